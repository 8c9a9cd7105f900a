#include "lockfleet/config/duration.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "text.h"

namespace lockfleet::config {
namespace {

struct Unit {
  std::string_view name;
  int64_t ms;
};

// Largest first: FormatDuration picks the first one that fits.
constexpr std::array<Unit, 4> kUnits = {{
    {"h", 3'600'000},
    {"m", 60'000},
    {"s", 1'000},
    {"ms", 1},
}};

constexpr std::string_view kExpected =
    "a duration such as 500ms, 2s, 1.5s, 1m or 1h (units ms, s, m, h)";

using internal::Quote;

[[noreturn]] void Fail(std::string_view text, std::string_view found) {
  throw ConfigError("invalid duration " + Quote(text) + ": expected " +
                    std::string(kExpected) + ", found " + std::string(found));
}

std::optional<int64_t> UnitMs(std::string_view name) {
  for (const Unit& unit : kUnits) {
    if (unit.name == name) return unit.ms;
  }
  return std::nullopt;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

std::chrono::milliseconds ParseDuration(std::string_view text) {
  if (text.empty()) Fail(text, "an empty string");
  if (text.front() == '-') Fail(text, "a negative value");

  // Integer part. Saturates: anything above kMaxDuration in milliseconds is
  // out of range whatever the unit, but the rest is still checked first so
  // that garbage is reported as garbage.
  const int64_t max_ms = kMaxDuration.count();
  size_t pos = 0;
  int64_t whole = 0;
  bool saturated = false;
  while (pos < text.size() && IsDigit(text[pos])) {
    if (!saturated) {
      whole = whole * 10 + (text[pos] - '0');
      if (whole > max_ms) saturated = true;
    }
    ++pos;
  }
  if (pos == 0) Fail(text, Quote(text) + ", which does not start with a digit");

  // Fraction.
  std::string_view fraction;
  if (pos < text.size() && text[pos] == '.') {
    const size_t start = ++pos;
    while (pos < text.size() && IsDigit(text[pos])) ++pos;
    fraction = text.substr(start, pos - start);
    if (fraction.empty()) {
      Fail(text, "no digit after the decimal point");
    }
  }

  // Unit.
  const std::string_view unit_name = text.substr(pos);
  if (unit_name.empty()) {
    if (fraction.empty() && whole == 0 && !saturated) {
      return std::chrono::milliseconds(0);  // a bare "0"
    }
    Fail(text, "no unit after " + Quote(text.substr(0, pos)));
  }
  const std::optional<int64_t> unit_ms = UnitMs(unit_name);
  if (!unit_ms) {
    Fail(text, "unknown unit " + Quote(unit_name) + " after " +
                   Quote(text.substr(0, pos)));
  }

  // Fraction in milliseconds; it must come out whole. Trailing zeros carry no
  // precision. More than 9 significant decimals can never be a whole number
  // of milliseconds of any unit (an hour is 2^7 * 3^2 * 5^5 ms).
  while (!fraction.empty() && fraction.back() == '0') {
    fraction.remove_suffix(1);
  }
  int64_t fraction_ms = 0;
  if (!fraction.empty()) {
    bool whole_ms = fraction.size() <= 9;
    if (whole_ms) {
      int64_t numerator = 0;
      int64_t denominator = 1;
      for (char c : fraction) {
        numerator = numerator * 10 + (c - '0');
        denominator *= 10;
      }
      // numerator < 1e9 and unit_ms <= 3.6e6: no overflow in int64.
      whole_ms = (numerator * *unit_ms) % denominator == 0;
      fraction_ms = numerator * *unit_ms / denominator;
    }
    if (!whole_ms) {
      Fail(text, "a value that is not a whole number of milliseconds");
    }
  }

  if (saturated || whole > (max_ms - fraction_ms) / *unit_ms) {
    throw ConfigError("invalid duration " + Quote(text) +
                      ": expected at most " + FormatDuration(kMaxDuration) +
                      ", found a larger value");
  }
  return std::chrono::milliseconds(whole * *unit_ms + fraction_ms);
}

std::string FormatDuration(std::chrono::milliseconds duration) {
  const int64_t count = duration.count();
  if (count == 0) return "0";
  std::string sign;
  // Magnitude as unsigned so that milliseconds::min() negates safely.
  uint64_t ms = static_cast<uint64_t>(count);
  if (count < 0) {
    sign = "-";
    ms = ~ms + 1;
  }
  for (const Unit& unit : kUnits) {
    const auto unit_ms = static_cast<uint64_t>(unit.ms);
    const uint64_t remainder = ms % unit_ms;
    // remainder < 3.6e6, so remainder * 1000 cannot overflow.
    if (ms < unit_ms || (remainder * 1000) % unit_ms != 0) continue;
    std::string out = sign + std::to_string(ms / unit_ms);
    if (remainder != 0) {
      // remainder < unit_ms: three digits, 001..999.
      std::string digits = std::to_string(remainder * 1000 / unit_ms);
      digits.insert(0, 3 - digits.size(), '0');
      while (digits.back() == '0') digits.pop_back();
      out += '.';
      out += digits;
    }
    out += unit.name;
    return out;
  }
  return sign + std::to_string(ms) + "ms";  // not reached: ms always fits
}

}  // namespace lockfleet::config
