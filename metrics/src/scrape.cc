#include "lockfleet/metrics/scrape.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "lockfleet/lockcore/error.h"

namespace lockfleet::metrics {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool IsBlank(char c) { return c == ' ' || c == '\t'; }
bool IsNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }

bool EqualsNoCase(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

// A sample value as Go's strconv.ParseFloat reads it (which is what
// Prometheus uses): decimal or hex floats, [+-]Inf, NaN.
std::optional<double> ParseFloat(std::string_view text) {
  bool negative = false;
  if (!text.empty() && (text.front() == '+' || text.front() == '-')) {
    negative = text.front() == '-';
    text.remove_prefix(1);
  }
  if (EqualsNoCase(text, "inf") || EqualsNoCase(text, "infinity"))
    return negative ? -kInf : kInf;
  if (EqualsNoCase(text, "nan")) return std::nan("");
  if (text.empty() || text.front() == '+' || text.front() == '-') return {};
  double value = 0;
  auto format = std::chars_format::general;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    text.remove_prefix(2);
    format = std::chars_format::hex;
  }
  auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), value, format);
  if (ec != std::errc() || end != text.data() + text.size()) return {};
  return negative ? -value : value;
}

// One line of the format, consumed left to right.
class LineParser {
 public:
  LineParser(std::string_view line, size_t number)
      : rest_(line), number_(number) {}

  Sample Parse() {
    Sample sample;
    SkipBlanks();
    sample.name = Name(/*colons=*/true, "a metric name");
    bool blank = SkipBlanks();
    if (Take('{')) {
      Labels(sample);
      blank = SkipBlanks();
    }
    if (!blank) Fail("expected a blank before the value");
    const std::string_view value = Token();
    const std::optional<double> parsed = ParseFloat(value);
    if (!parsed) Fail("bad value '" + std::string(value) + "'");
    sample.value = *parsed;
    SkipBlanks();
    if (!rest_.empty()) {
      const std::string_view stamp = Token();
      int64_t ms = 0;
      auto [end, ec] =
          std::from_chars(stamp.data(), stamp.data() + stamp.size(), ms);
      if (ec != std::errc() || end != stamp.data() + stamp.size())
        Fail("bad timestamp '" + std::string(stamp) + "'");
      sample.timestamp_ms = ms;
      SkipBlanks();
      if (!rest_.empty()) Fail("unexpected text after the timestamp");
    }
    return sample;
  }

 private:
  [[noreturn]] void Fail(const std::string& why) const {
    throw Error(ErrorCode::kInvalidArgument,
                "exposition line " + std::to_string(number_) + ": " + why);
  }

  bool SkipBlanks() {
    size_t n = 0;
    while (n < rest_.size() && IsBlank(rest_[n])) ++n;
    rest_.remove_prefix(n);
    return n > 0;
  }

  bool Take(char c) {
    if (rest_.empty() || rest_.front() != c) return false;
    rest_.remove_prefix(1);
    return true;
  }

  std::string_view Token() {
    size_t n = 0;
    while (n < rest_.size() && !IsBlank(rest_[n])) ++n;
    std::string_view token = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return token;
  }

  std::string Name(bool colons, const char* what) {
    size_t n = 0;
    auto ok = [&](char c) { return IsNameChar(c) || (colons && c == ':'); };
    if (!rest_.empty() &&
        (IsNameStart(rest_[0]) || (colons && rest_[0] == ':')))
      while (n < rest_.size() && ok(rest_[n])) ++n;
    if (n == 0) Fail(std::string("expected ") + what);
    std::string name(rest_.substr(0, n));
    rest_.remove_prefix(n);
    return name;
  }

  void Labels(Sample& sample) {
    for (;;) {
      SkipBlanks();
      if (Take('}')) return;
      std::string name = Name(/*colons=*/false, "a label name");
      SkipBlanks();
      if (!Take('=')) Fail("expected '=' after label " + name);
      SkipBlanks();
      if (!Take('"')) Fail("expected '\"' to open the value of " + name);
      std::string value = QuotedRest(name);
      if (!sample.labels.emplace(name, std::move(value)).second)
        Fail("label " + name + " appears twice");
      SkipBlanks();
      if (Take('}')) return;
      if (!Take(',')) Fail("expected ',' or '}' after label " + name);
    }
  }

  // The rest of a label value after its opening quote, unescaped.
  std::string QuotedRest(const std::string& label) {
    std::string value;
    for (;;) {
      if (rest_.empty()) Fail("unterminated value of label " + label);
      const char c = rest_.front();
      rest_.remove_prefix(1);
      if (c == '"') return value;
      if (c != '\\') {
        value += c;
        continue;
      }
      if (rest_.empty()) Fail("unterminated value of label " + label);
      const char e = rest_.front();
      rest_.remove_prefix(1);
      if (e == 'n') {
        value += '\n';
      } else if (e == '\\' || e == '"') {
        value += e;
      } else {
        Fail(std::string("bad escape '\\") + e + "' in label " + label);
      }
    }
  }

  std::string_view rest_;
  const size_t number_;
};

bool Matches(const Sample& sample, const LabelMatch& match) {
  for (const auto& [name, value] : match) {
    auto it = sample.labels.find(name);
    if (it == sample.labels.end() || it->second != value) return false;
  }
  return true;
}

// Sorts by upper bound and adds up the counts of equal bounds (one per
// label set or per scrape).
std::vector<Bucket> SortAndMerge(std::vector<Bucket> buckets) {
  std::sort(buckets.begin(), buckets.end(),
            [](const Bucket& a, const Bucket& b) {
              return a.upper_bound < b.upper_bound;
            });
  std::vector<Bucket> merged;
  for (const Bucket& b : buckets) {
    if (!merged.empty() && merged.back().upper_bound == b.upper_bound) {
      merged.back().count += b.count;
    } else {
      merged.push_back(b);
    }
  }
  return merged;
}

}  // namespace

std::vector<Sample> ParseExposition(std::string_view text) {
  std::vector<Sample> samples;
  size_t number = 0;
  while (!text.empty()) {
    ++number;
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string_view::npos || line[first] == '#') continue;
    samples.push_back(LineParser(line, number).Parse());
  }
  return samples;
}

double SumSamples(const std::vector<Sample>& samples, std::string_view name,
                  const LabelMatch& match) {
  double sum = 0;
  for (const Sample& s : samples) {
    if (s.name == name && Matches(s, match)) sum += s.value;
  }
  return sum;
}

std::vector<Bucket> HistogramBuckets(const std::vector<Sample>& samples,
                                     std::string_view histogram,
                                     const LabelMatch& match) {
  const std::string name = std::string(histogram) + "_bucket";
  std::vector<Bucket> buckets;
  for (const Sample& s : samples) {
    if (s.name != name || !Matches(s, match)) continue;
    auto le = s.labels.find("le");
    if (le == s.labels.end()) continue;
    const std::optional<double> bound = ParseFloat(le->second);
    if (!bound || std::isnan(*bound)) continue;
    buckets.push_back({*bound, s.value});
  }
  return SortAndMerge(std::move(buckets));
}

double HistogramQuantile(double q, std::vector<Bucket> buckets) {
  const double nan = std::nan("");
  if (std::isnan(q)) return nan;
  if (q < 0) return -kInf;
  if (q > 1) return kInf;
  // Raise decreasing counts, as PromQL does: summed scrapes are taken at
  // slightly different moments.
  std::vector<Bucket> b = SortAndMerge(std::move(buckets));
  for (size_t i = 1; i < b.size(); ++i)
    b[i].count = std::max(b[i].count, b[i - 1].count);
  if (b.size() < 2 || b.back().upper_bound != kInf) return nan;
  const double total = b.back().count;
  if (!(total > 0)) return nan;

  const double rank = q * total;
  // The first bucket whose cumulative count reaches the rank.
  size_t i = 0;
  while (i < b.size() - 1 && b[i].count < rank) ++i;
  if (i == b.size() - 1) return b[b.size() - 2].upper_bound;
  if (i == 0 && b[0].upper_bound <= 0) return b[0].upper_bound;
  const double start = i == 0 ? 0 : b[i - 1].upper_bound;
  const double below = i == 0 ? 0 : b[i - 1].count;
  const double in_bucket = b[i].count - below;
  const double end = b[i].upper_bound;
  if (in_bucket <= 0) return end;
  return start + (end - start) * ((rank - below) / in_bucket);
}

}  // namespace lockfleet::metrics
