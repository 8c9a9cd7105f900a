// Reading a YAML document while collecting every error with its position.
// Private to the config module; schema.cc and worker_schema.cc describe the
// schema with it.
//
// The pattern: wrap a mapping in a MapReader, Read() each known key with a
// parser (Int(1, 1024), Duration(...), ...), then Finish(), which reports the
// keys nobody asked for. A parser that fails records the error in the
// Context and leaves the default in place, so reading carries on and one pass
// finds every problem.
#pragma once

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lockfleet/config/config.h"
#include "lockfleet/config/duration.h"
#include "lockfleet/config/error.h"

namespace lockfleet::config::internal {

// A node and where it is.
struct Value {
  YAML::Node node;
  std::string path;     // "redis.pool_size"; "" for the document
  YAML::Mark mark;      // the value's position (its key's when it is empty)
  YAML::Mark key_mark;  // the key's position (the item's for list items)
};

// Collects errors and expands ${VAR}. Not thread-safe.
class Context {
 public:
  Context(std::string file, EnvLookup env);

  void Error(const YAML::Mark& mark, std::string path, std::string message);
  void Error(const Value& value, std::string message) {
    Error(value.mark, value.path, std::move(message));
  }

  // The scalar's text with ${VAR} expanded. Records "expected <expected>,
  // found ..." for a mapping, list or empty value, or the expansion error,
  // and returns std::nullopt.
  std::optional<std::string> Text(const Value& value,
                                  std::string_view expected);

  // Where ${VAR} looks (LoadOptions::env, else the process environment).
  const EnvLookup& env() const { return env_; }

  bool has_errors() const { return !errors_.empty(); }
  // The errors in file order.
  std::vector<Diagnostic> TakeErrors();

 private:
  std::string file_;
  EnvLookup env_;
  std::vector<Diagnostic> errors_;
};

// How a node is described after "found": "a mapping", "a list", "nothing",
// or the scalar's text quoted.
std::string Found(const YAML::Node& node);

std::string ChildPath(std::string_view parent, std::string_view key);
std::string IndexPath(std::string_view parent, size_t index);

// The empty node at `key` of `parent`: what an absent section reads as. Its
// positions are the parent's key, where "missing required key" points.
Value Absent(const Value& parent, std::string_view key);

// Element `index` of the list `list` (REQUIRES: a sequence with more than
// `index` elements); an empty element points at the list's key.
Value Item(const Value& list, size_t index);

// One mapping of the document. Not thread-safe.
class MapReader {
 public:
  struct Entry {
    std::string key;
    Value value;
  };

  // `value` should be a mapping; an empty value reads as an empty mapping.
  // Anything else records "expected <expected>, found ..." and reads as
  // empty. Duplicate and non-scalar keys are recorded here.
  MapReader(Context& context, const Value& value, std::string_view expected);

  // The value under `key`, if present; `key` becomes known.
  std::optional<Value> Get(std::string_view key);
  // Same, but records "missing required key; expected <expected>" at the
  // mapping's key when absent (unless the mapping itself was the wrong type:
  // one error is enough).
  std::optional<Value> Require(std::string_view key, std::string_view expected);

  // If `key` is present and `parse` accepts it, stores the result in `out`.
  // `parse` is called as parse(Context&, const Value&) -> std::optional<T>.
  template <typename T, typename Parse>
  void Read(std::string_view key, T& out, Parse parse) {
    if (std::optional<Value> value = Get(key)) {
      if (auto parsed = parse(context_, *value)) out = std::move(*parsed);
    }
  }

  // Records every key not asked for by Get/Require/Read, suggesting the
  // closest known one.
  void Finish();

  // Every entry, in file order, duplicates left out (free-form mappings).
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  Context& context_;
  Value value_;
  bool wrong_type_ = false;
  std::vector<Entry> entries_;
  std::vector<std::string> known_;
};

// Parsers. Each records an error and returns std::nullopt when the value
// does not fit.
std::optional<int> ParseInt(Context& context, const Value& value, int low,
                            int high);
std::optional<bool> ParseBool(Context& context, const Value& value);
// A duration (duration.h) from `low` to `high`.
std::optional<std::chrono::milliseconds> ParseDurationValue(
    Context& context, const Value& value, std::chrono::milliseconds low,
    std::chrono::milliseconds high = kMaxDuration);
// The same for a scalar's text already expanded by Context::Text.
std::optional<std::chrono::milliseconds> DurationFromText(
    Context& context, const Value& value, std::string_view text,
    std::chrono::milliseconds low,
    std::chrono::milliseconds high = kMaxDuration);
// The index of the value in `choices`, matched exactly.
std::optional<size_t> ParseChoice(Context& context, const Value& value,
                                  const std::vector<std::string>& choices);
std::optional<Scalar> ParseScalar(Context& context, const Value& value);

// "" when a string is acceptable, else why not (see checks.h).
using StringCheck = std::string (*)(std::string_view text);
// A string that `check` accepts; else records "expected <expected>, found
// '<text>' (<why>)", with the text passed through `show` (RedactUrl for
// URLs) when given.
std::optional<std::string> ParseChecked(Context& context, const Value& value,
                                        const std::string& expected,
                                        StringCheck check,
                                        StringCheck show = nullptr);

// The same as parser objects for MapReader::Read.
inline auto Int(int low, int high) {
  return [=](Context& c, const Value& v) { return ParseInt(c, v, low, high); };
}
inline auto Bool() {
  return [](Context& c, const Value& v) { return ParseBool(c, v); };
}
inline auto Checked(std::string expected, StringCheck check,
                    StringCheck show = nullptr) {
  return [=](Context& c, const Value& v) {
    return ParseChecked(c, v, expected, check, show);
  };
}
inline auto Duration(std::chrono::milliseconds low,
                     std::chrono::milliseconds high = kMaxDuration) {
  return [=](Context& c, const Value& v) {
    return ParseDurationValue(c, v, low, high);
  };
}

}  // namespace lockfleet::config::internal
