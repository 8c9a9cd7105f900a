#include "lockfleet/config/cron.h"

#include <array>
#include <bitset>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lockfleet::config {
namespace {

using std::chrono::days;
using std::chrono::hours;
using std::chrono::minutes;

struct Field {
  std::string_view name;
  int min;
  int max;
  const std::array<std::string_view, 12>* names;  // or nullptr
  int first_named;                                // value of names[0]
};

constexpr std::array<std::string_view, 12> kMonthNames = {
    "jan", "feb", "mar", "apr", "may", "jun",
    "jul", "aug", "sep", "oct", "nov", "dec"};
constexpr std::array<std::string_view, 12> kWeekdayNames = {
    "sun", "mon", "tue", "wed", "thu", "fri", "sat", "", "", "", "", ""};

constexpr std::array<Field, 5> kFields = {{
    {"minute", 0, 59, nullptr, 0},
    {"hour", 0, 23, nullptr, 0},
    {"day-of-month", 1, 31, nullptr, 0},
    {"month", 1, 12, &kMonthNames, 1},
    {"day-of-week", 0, 7, &kWeekdayNames, 0},
}};

struct Macro {
  std::string_view name;
  std::string_view expansion;
};

constexpr std::array<Macro, 7> kMacros = {{
    {"@yearly", "0 0 1 1 *"},
    {"@annually", "0 0 1 1 *"},
    {"@monthly", "0 0 1 * *"},
    {"@weekly", "0 0 * * 0"},
    {"@daily", "0 0 * * *"},
    {"@midnight", "0 0 * * *"},
    {"@hourly", "0 * * * *"},
}};

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  [[noreturn]] void Fail(const std::string& what) const {
    throw ConfigError("invalid cron expression '" + std::string(text_) +
                      "': " + what);
  }

  // Parses one field into bits [0, field.max].
  std::vector<bool> ParseField(const Field& field, std::string_view spec) {
    std::vector<bool> bits(field.max + 1, false);
    size_t start = 0;
    while (true) {
      const size_t comma = spec.find(',', start);
      const std::string_view item = spec.substr(
          start, comma == std::string_view::npos ? comma : comma - start);
      ParseItem(field, spec, item, bits);
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    return bits;
  }

 private:
  void ParseItem(const Field& field, std::string_view spec,
                 std::string_view item, std::vector<bool>& bits) const {
    const std::string where =
        std::string(field.name) + " field '" + std::string(spec) + "': ";
    if (item.empty()) Fail(where + "expected a value, found an empty item");
    int step = 1;
    const size_t slash = item.find('/');
    std::string_view range = item.substr(0, slash);
    if (slash != std::string_view::npos) {
      const std::string_view step_text = item.substr(slash + 1);
      const std::optional<int> parsed = Number(step_text);
      if (!parsed || *parsed < 1 || *parsed > field.max) {
        Fail(where + "expected a step from 1 to " + std::to_string(field.max) +
             " after '/', found '" + std::string(step_text) + "'");
      }
      step = *parsed;
    }
    int low = field.min;
    int high = field.max;
    if (range == "*") {
      // all values
    } else {
      const size_t dash = range.find('-');
      low = Value(field, where, range.substr(0, dash));
      if (dash != std::string_view::npos) {
        high = Value(field, where, range.substr(dash + 1));
        if (high < low) {
          Fail(where + "expected a range from low to high, found '" +
               std::string(range) + "' (ranges do not wrap around)");
        }
      } else if (slash == std::string_view::npos) {
        high = low;
      }
    }
    for (int v = low; v <= high; v += step) bits[v] = true;
  }

  int Value(const Field& field, const std::string& where,
            std::string_view text) const {
    if (std::optional<int> n = Number(text)) {
      if (*n >= field.min && *n <= field.max) return *n;
    } else if (field.names != nullptr && text.size() == 3) {
      std::string lower(text);
      for (char& c : lower) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      }
      for (size_t i = 0; i < field.names->size(); ++i) {
        if ((*field.names)[i] == lower) {
          return field.first_named + static_cast<int>(i);
        }
      }
    }
    std::string expected = "expected " + std::to_string(field.min) + "-" +
                           std::to_string(field.max);
    if (field.names == &kMonthNames) expected += " or jan-dec";
    if (field.names == &kWeekdayNames) expected += " or sun-sat";
    Fail(where + expected + ", found '" + std::string(text) + "'");
  }

  static std::optional<int> Number(std::string_view text) {
    int value = 0;
    const auto [ptr, ec] =
        std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
      return std::nullopt;
    }
    return value;
  }

  std::string_view text_;
};

template <size_t N>
std::bitset<N> ToBits(const std::vector<bool>& bits) {
  std::bitset<N> out;
  for (size_t i = 0; i < bits.size() && i < N; ++i) out[i] = bits[i];
  return out;
}

constexpr std::array<int, 13> kMaxDays = {0,  31, 29, 31, 30, 31, 30,
                                          31, 31, 30, 31, 30, 31};

}  // namespace

CronSchedule CronSchedule::Parse(std::string_view text) {
  // Split on runs of spaces and tabs.
  std::vector<std::string_view> parts;
  for (size_t i = 0; i < text.size();) {
    if (text[i] == ' ' || text[i] == '\t') {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && text[j] != ' ' && text[j] != '\t') ++j;
    parts.push_back(text.substr(i, j - i));
    i = j;
  }
  Parser parser(text);
  CronSchedule out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out.text_ += ' ';
    out.text_ += parts[i];
  }
  std::string_view expression = out.text_;
  if (parts.size() == 1 && parts[0].starts_with('@')) {
    expression = {};
    for (const Macro& macro : kMacros) {
      if (macro.name == parts[0]) expression = macro.expansion;
    }
    if (expression.empty()) {
      parser.Fail(
          "expected @yearly, @annually, @monthly, @weekly, @daily, @midnight "
          "or @hourly, found '" +
          std::string(parts[0]) + "'");
    }
    return Parse(expression).WithText(out.text_);
  }
  if (parts.size() != kFields.size()) {
    parser.Fail(
        "expected 5 fields (minute hour day-of-month month day-of-week) or a "
        "macro such as @daily, found " +
        std::to_string(parts.size()) +
        (parts.size() == 1 ? " field" : " fields"));
  }
  out.minutes_ = ToBits<60>(parser.ParseField(kFields[0], parts[0]));
  out.hours_ = ToBits<24>(parser.ParseField(kFields[1], parts[1]));
  out.days_ = ToBits<32>(parser.ParseField(kFields[2], parts[2]));
  out.months_ = ToBits<13>(parser.ParseField(kFields[3], parts[3]));
  const std::vector<bool> weekdays = parser.ParseField(kFields[4], parts[4]);
  out.weekdays_ = ToBits<7>(weekdays);
  if (weekdays[7]) out.weekdays_[0] = true;  // 7 is Sunday too
  out.days_star_ = parts[2].starts_with('*');
  out.weekdays_star_ = parts[4].starts_with('*');

  // With the day-of-week unrestricted only the day of the month decides;
  // make sure some selected month has one of the selected days.
  if (!out.days_star_ && out.weekdays_star_) {
    bool possible = false;
    for (int month = 1; month <= 12 && !possible; ++month) {
      if (!out.months_[month]) continue;
      for (int day = 1; day <= kMaxDays[month] && !possible; ++day) {
        possible = out.days_[day];
      }
    }
    if (!possible) {
      parser.Fail(
          "expected a day-of-month that exists in one of the months, found "
          "none (the schedule would never fire)");
    }
  }
  return out;
}

CronSchedule CronSchedule::WithText(std::string text) const {
  CronSchedule out = *this;
  out.text_ = std::move(text);
  return out;
}

bool CronSchedule::DayMatches(std::chrono::year_month_day date) const {
  const bool day = days_[static_cast<unsigned>(date.day())];
  const bool weekday =
      weekdays_[std::chrono::weekday(std::chrono::sys_days(date)).c_encoding()];
  if (days_star_ || weekdays_star_) return day && weekday;
  return day || weekday;
}

std::chrono::sys_seconds CronSchedule::Next(
    std::chrono::sys_seconds after) const {
  using std::chrono::floor;
  std::chrono::sys_time<minutes> t = floor<minutes>(after) + minutes(1);
  // Parse guarantees a match within a leap cycle (Feb 29 may be 8 years
  // away); each step below moves to the next candidate month, day, hour or
  // minute, so this bound is generous.
  for (int steps = 0; steps < 1'000'000; ++steps) {
    const std::chrono::sys_days day = floor<days>(t);
    const std::chrono::year_month_day date(day);
    if (!months_[static_cast<unsigned>(date.month())]) {
      const std::chrono::year_month next_month =
          date.year() / date.month() + std::chrono::months(1);
      t = std::chrono::sys_days(next_month / 1);
      continue;
    }
    if (!DayMatches(date)) {
      t = day + days(1);
      continue;
    }
    const auto hour = floor<hours>(t - day);
    if (!hours_[hour.count()]) {
      t = day + hour + hours(1);
      continue;
    }
    const auto minute = floor<minutes>(t - day - hour);
    if (!minutes_[minute.count()]) {
      t += minutes(1);
      continue;
    }
    return t;
  }
  throw std::logic_error("CronSchedule::Next: no match for '" + text_ + "'");
}

bool CronSchedule::operator==(const CronSchedule& other) const {
  return minutes_ == other.minutes_ && hours_ == other.hours_ &&
         days_ == other.days_ && months_ == other.months_ &&
         weekdays_ == other.weekdays_ && days_star_ == other.days_star_ &&
         weekdays_star_ == other.weekdays_star_;
}

}  // namespace lockfleet::config
