#include "reader.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lockfleet/config/duration.h"
#include "text.h"

namespace lockfleet::config::internal {
namespace {

using std::chrono::milliseconds;

bool IsNameStart(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}
bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

constexpr std::string_view kSyntax = "${VAR} or ${VAR:-default}";

// Expands ${VAR}, ${VAR:-default} and $$ in `text`. Appends a message to
// `errors` for each problem; the result is meaningful only without errors.
std::string ExpandEnv(std::string_view text, const EnvLookup& env,
                      std::vector<std::string>& errors) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c != '$') {
      out += c;
      ++i;
      continue;
    }
    if (i + 1 < text.size() && text[i + 1] == '$') {
      out += '$';
      i += 2;
      continue;
    }
    if (i + 1 >= text.size() || text[i + 1] != '{') {
      errors.push_back("expected " + std::string(kSyntax) +
                       " after '$' (write $$ for a literal '$'), found " +
                       Quote(text.substr(i, 8)));
      ++i;
      continue;
    }
    const size_t close = text.find('}', i + 2);
    if (close == std::string_view::npos) {
      errors.push_back("expected " + std::string(kSyntax) +
                       ", found an unterminated " + Quote(text.substr(i)));
      break;
    }
    const std::string_view inner = text.substr(i + 2, close - i - 2);
    const std::string_view whole = text.substr(i, close + 1 - i);
    i = close + 1;
    const size_t split = inner.find(":-");
    const std::string_view name = inner.substr(0, split);
    const bool valid_name = !name.empty() && IsNameStart(name[0]) &&
                            std::all_of(name.begin(), name.end(), IsNameChar);
    if (!valid_name) {
      errors.push_back("expected " + std::string(kSyntax) +
                       " with VAR made of letters, digits and '_', found " +
                       Quote(whole));
      continue;
    }
    std::optional<std::string_view> fallback;
    if (split != std::string_view::npos) {
      fallback = inner.substr(split + 2);
      if (fallback->find('$') != std::string_view::npos) {
        errors.push_back("the default in " + Quote(whole) +
                         " contains '$': defaults are literal text");
        continue;
      }
    }
    const std::optional<std::string> set = env(std::string(name));
    if (set && !(fallback && set->empty())) {
      out += *set;
    } else if (fallback) {
      out += *fallback;
    } else {
      errors.push_back("environment variable " + std::string(name) +
                       " is not set (write ${" + std::string(name) +
                       ":-default} to give a default)");
    }
  }
  return out;
}

std::optional<std::string> ProcessEnv(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

bool IsInteger(std::string_view text) {
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) {
    text.remove_prefix(1);
  }
  return !text.empty() && std::all_of(text.begin(), text.end(), IsDigit);
}

// [-+] (digits [. digits*] | . digits) [(e|E) [-+] digits]
bool IsDecimal(std::string_view text) {
  size_t i = 0;
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) ++i;
  size_t digits = 0;
  while (i < text.size() && IsDigit(text[i])) ++i, ++digits;
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && IsDigit(text[i])) ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) ++i;
    size_t exponent = 0;
    while (i < text.size() && IsDigit(text[i])) ++i, ++exponent;
    if (exponent == 0) return false;
  }
  return i == text.size();
}

std::optional<bool> ReadBool(std::string_view text) {
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  return std::nullopt;
}

}  // namespace

Context::Context(std::string file, EnvLookup env)
    : file_(std::move(file)), env_(env ? std::move(env) : ProcessEnv) {}

void Context::Error(const YAML::Mark& mark, std::string path,
                    std::string message) {
  Diagnostic diagnostic;
  diagnostic.file = file_;
  if (!mark.is_null()) {
    diagnostic.line = mark.line + 1;
    diagnostic.column = mark.column + 1;
  }
  diagnostic.path = std::move(path);
  diagnostic.message = std::move(message);
  errors_.push_back(std::move(diagnostic));
}

std::optional<std::string> Context::Text(const Value& value,
                                         std::string_view expected) {
  if (!value.node.IsScalar()) {
    Error(value,
          "expected " + std::string(expected) + ", found " + Found(value.node));
    return std::nullopt;
  }
  std::vector<std::string> errors;
  std::string text = ExpandEnv(value.node.Scalar(), env_, errors);
  for (std::string& error : errors) Error(value, std::move(error));
  if (!errors.empty()) return std::nullopt;
  return text;
}

std::vector<Diagnostic> Context::TakeErrors() {
  std::stable_sort(errors_.begin(), errors_.end(),
                   [](const Diagnostic& a, const Diagnostic& b) {
                     return std::pair(a.line, a.column) <
                            std::pair(b.line, b.column);
                   });
  return std::move(errors_);
}

std::string Found(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "nothing";
  if (node.IsMap()) return "a mapping";
  if (node.IsSequence()) return "a list";
  return Quote(node.Scalar());
}

std::string ChildPath(std::string_view parent, std::string_view key) {
  std::string child(parent);
  const bool plain =
      !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
        return IsNameChar(c) || c == '-';
      });
  if (plain) {
    if (!child.empty()) child += '.';
    child += key;
  } else {
    child += "[\"";
    for (char c : key) {
      if (c == '"' || c == '\\') child += '\\';
      child += c;
    }
    child += "\"]";
  }
  return child;
}

std::string IndexPath(std::string_view parent, size_t index) {
  return std::string(parent) + "[" + std::to_string(index) + "]";
}

Value Absent(const Value& parent, std::string_view key) {
  return Value{YAML::Node(), ChildPath(parent.path, key), parent.key_mark,
               parent.key_mark};
}

Value Item(const Value& list, size_t index) {
  const YAML::Node item = list.node[index];
  const bool empty = !item.IsDefined() || item.IsNull();
  return Value{item, IndexPath(list.path, index),
               empty ? list.key_mark : item.Mark(),
               empty ? list.key_mark : item.Mark()};
}

MapReader::MapReader(Context& context, const Value& value,
                     std::string_view expected)
    : context_(context), value_(value) {
  const YAML::Node& node = value.node;
  if (!node.IsDefined() || node.IsNull()) return;
  if (!node.IsMap()) {
    context_.Error(
        value, "expected " + std::string(expected) + ", found " + Found(node));
    wrong_type_ = true;
    return;
  }
  for (auto it = node.begin(); it != node.end(); ++it) {
    const YAML::Node key = it->first;
    if (!key.IsScalar()) {
      context_.Error(key.Mark(), value.path,
                     "expected a key name, found " + Found(key) + " as a key");
      continue;
    }
    const std::string name = key.Scalar();
    const std::string path = ChildPath(value.path, name);
    const auto first =
        std::find_if(entries_.begin(), entries_.end(),
                     [&](const Entry& entry) { return entry.key == name; });
    if (first != entries_.end()) {
      context_.Error(key.Mark(), path,
                     "duplicate key (first given on line " +
                         std::to_string(first->value.key_mark.line + 1) + ")");
      continue;
    }
    const YAML::Node child = it->second;
    const bool empty = !child.IsDefined() || child.IsNull();
    entries_.push_back(Entry{
        name,
        Value{child, path, empty ? key.Mark() : child.Mark(), key.Mark()}});
  }
}

std::optional<Value> MapReader::Get(std::string_view key) {
  if (std::find(known_.begin(), known_.end(), key) == known_.end()) {
    known_.emplace_back(key);
  }
  for (const Entry& entry : entries_) {
    if (entry.key == key) return entry.value;
  }
  return std::nullopt;
}

std::optional<Value> MapReader::Require(std::string_view key,
                                        std::string_view expected) {
  std::optional<Value> value = Get(key);
  if (!value && !wrong_type_) {
    context_.Error(value_.key_mark, ChildPath(value_.path, key),
                   "missing required key; expected " + std::string(expected));
  }
  return value;
}

void MapReader::Finish() {
  for (const Entry& entry : entries_) {
    if (std::find(known_.begin(), known_.end(), entry.key) != known_.end()) {
      continue;
    }
    const std::string suggestion = ClosestMatch(entry.key, known_);
    context_.Error(entry.value.key_mark, entry.value.path,
                   suggestion.empty()
                       ? "unknown key; expected one of " + JoinNames(known_)
                       : "unknown key; did you mean '" + suggestion + "'?");
  }
}

std::optional<std::string> ParseChecked(Context& context, const Value& value,
                                        const std::string& expected,
                                        StringCheck check, StringCheck show) {
  std::optional<std::string> text = context.Text(value, expected);
  if (!text) return std::nullopt;
  const std::string why = check(*text);
  if (why.empty()) return text;
  context.Error(value, "expected " + expected + ", found " +
                           Quote(show ? show(*text) : *text) + " (" + why +
                           ")");
  return std::nullopt;
}

std::optional<int> ParseInt(Context& context, const Value& value, int low,
                            int high) {
  const std::string expected =
      "an integer from " + std::to_string(low) + " to " + std::to_string(high);
  const std::optional<std::string> text = context.Text(value, expected);
  if (!text) return std::nullopt;
  std::string_view digits = *text;
  if (digits.starts_with('+')) digits.remove_prefix(1);
  int64_t parsed = 0;
  const auto [end, ec] =
      std::from_chars(digits.data(), digits.data() + digits.size(), parsed);
  const bool whole = IsInteger(*text) && end == digits.data() + digits.size();
  if (!whole || ec != std::errc() || parsed < low || parsed > high) {
    context.Error(value, "expected " + expected + ", found " + Quote(*text));
    return std::nullopt;
  }
  return static_cast<int>(parsed);
}

std::optional<bool> ParseBool(Context& context, const Value& value) {
  const std::optional<std::string> text = context.Text(value, "true or false");
  if (!text) return std::nullopt;
  const std::optional<bool> parsed = ReadBool(*text);
  if (!parsed) {
    context.Error(value, "expected true or false, found " + Quote(*text));
  }
  return parsed;
}

std::optional<milliseconds> ParseDurationValue(Context& context,
                                               const Value& value,
                                               milliseconds low,
                                               milliseconds high) {
  const std::optional<std::string> text =
      context.Text(value, "a duration such as 500ms, 2s, 1.5m or 1h");
  if (!text) return std::nullopt;
  return DurationFromText(context, value, *text, low, high);
}

std::optional<milliseconds> DurationFromText(Context& context,
                                             const Value& value,
                                             std::string_view text,
                                             milliseconds low,
                                             milliseconds high) {
  milliseconds parsed;
  try {
    parsed = ParseDuration(text);
  } catch (const ConfigError& e) {
    context.Error(value, e.what());
    return std::nullopt;
  }
  if (parsed >= low && parsed <= high) return parsed;
  std::string expected;
  if (high < kMaxDuration) {
    expected = "a duration from " + FormatDuration(low) + " to " +
               FormatDuration(high);
  } else if (low == milliseconds(1)) {
    expected = "a duration greater than 0";
  } else {
    expected = "a duration of at least " + FormatDuration(low);
  }
  context.Error(value, "expected " + expected + ", found " + Quote(text));
  return std::nullopt;
}

std::optional<size_t> ParseChoice(Context& context, const Value& value,
                                  const std::vector<std::string>& choices) {
  const std::string expected = "one of " + JoinNames(choices);
  const std::optional<std::string> text = context.Text(value, expected);
  if (!text) return std::nullopt;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (choices[i] == *text) return i;
  }
  std::string message = "expected " + expected + ", found " + Quote(*text);
  const std::string suggestion = ClosestMatch(*text, choices);
  if (!suggestion.empty()) message += "; did you mean '" + suggestion + "'?";
  context.Error(value, std::move(message));
  return std::nullopt;
}

std::optional<Scalar> ParseScalar(Context& context, const Value& value) {
  std::optional<std::string> text =
      context.Text(value, "a string, number or boolean");
  if (!text) return std::nullopt;
  Scalar scalar;
  // "?" is yaml-cpp's tag for a plain (unquoted, untagged) scalar.
  if (value.node.Tag() == "?") {
    if (ReadBool(*text)) {
      scalar.type = Scalar::Type::kBool;
    } else if (IsInteger(*text)) {
      scalar.type = Scalar::Type::kInteger;
    } else if (IsDecimal(*text)) {
      scalar.type = Scalar::Type::kNumber;
    }
  }
  scalar.text = std::move(*text);
  return scalar;
}

}  // namespace lockfleet::config::internal
