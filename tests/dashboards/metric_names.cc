#include "dashboards/metric_names.h"

#include <algorithm>
#include <cctype>
#include <sstream>

namespace lockfleet::testing {
namespace {

bool IdentStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':';
}

bool IdentChar(char c) {
  return IdentStart(c) || std::isdigit(static_cast<unsigned char>(c));
}

// Words that are never metric names when not followed by '('.
const std::set<std::string, std::less<>> kKeywords = {
    // binary operators and modifiers
    "and", "or", "unless", "bool", "offset", "atan2",
    // grouping (their label lists are skipped separately)
    "by", "without", "on", "ignoring", "group_left", "group_right",
    // aggregation operators (may be followed by `by (...)` before '(')
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count",
    "count_values", "bottomk", "topk", "quantile",
    // number literals
    "inf", "nan", "Inf", "NaN"};

const std::set<std::string, std::less<>> kGrouping = {
    "by", "without", "on", "ignoring", "group_left", "group_right"};

bool Quote(char c) { return c == '"' || c == '\'' || c == '`'; }

// Index just past the string literal that starts at `i`.
size_t SkipString(std::string_view s, size_t i) {
  const char quote = s[i];
  for (++i; i < s.size() && s[i] != quote; ++i) {
    if (s[i] == '\\' && quote != '`') ++i;
  }
  return std::min(i + 1, s.size());
}

// Index just past the bracket that closes the one at `i`, skipping strings.
size_t SkipBalanced(std::string_view s, size_t i, char open, char close) {
  int depth = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (Quote(c)) {
      i = SkipString(s, i);
      continue;
    }
    if (c == open) {
      ++depth;
    } else if (c == close && --depth == 0) {
      return i + 1;
    }
    ++i;
  }
  return i;
}

size_t SkipSpace(std::string_view s, size_t i) {
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return i;
}

}  // namespace

std::set<std::string> MetricNames(std::string_view expr) {
  std::set<std::string> names;
  size_t i = 0;
  while (i < expr.size()) {
    const char c = expr[i];
    if (Quote(c)) {
      i = SkipString(expr, i);
    } else if (c == '{') {
      i = SkipBalanced(expr, i, '{', '}');
    } else if (c == '[') {
      i = SkipBalanced(expr, i, '[', ']');
    } else if (c == '#') {
      while (i < expr.size() && expr[i] != '\n') ++i;
    } else if (c == '$') {  // a Grafana variable left over
      ++i;
      if (i < expr.size() && expr[i] == '{') {
        i = SkipBalanced(expr, i, '{', '}');
      } else {
        while (i < expr.size() && IdentChar(expr[i])) ++i;
      }
    } else if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      // numbers and durations: 0.99, 1e3, 5m, 0x1f
      while (i < expr.size() &&
             (IdentChar(expr[i]) || expr[i] == '.' ||
              ((expr[i] == '+' || expr[i] == '-') &&
               (expr[i - 1] == 'e' || expr[i - 1] == 'E')))) {
        ++i;
      }
    } else if (IdentStart(c)) {
      const size_t start = i;
      while (i < expr.size() && IdentChar(expr[i])) ++i;
      const std::string word(expr.substr(start, i - start));
      const size_t next = SkipSpace(expr, i);
      const bool call = next < expr.size() && expr[next] == '(';
      if (kGrouping.contains(word)) {
        if (call) i = SkipBalanced(expr, next, '(', ')');
      } else if (!call && !kKeywords.contains(word)) {
        names.insert(word);
      }
    } else {
      ++i;
    }
  }
  return names;
}

std::set<std::string> DocumentedSeries(std::string_view metrics_md) {
  std::set<std::string> series;
  std::istringstream lines{std::string(metrics_md)};
  for (std::string line; std::getline(lines, line);) {
    // | `lockfleet_x` | histogram | labels | fed by |
    if (!line.starts_with("| `lockfleet_")) continue;
    const size_t end = line.find('`', 3);
    if (end == std::string::npos) continue;
    const std::string name = line.substr(3, end - 3);
    if (line.find("| histogram |") != std::string::npos) {
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        series.insert(name + suffix);
      }
    } else {
      series.insert(name);
    }
  }
  return series;
}

}  // namespace lockfleet::testing
