// The error types of the config module.
//
// Everything that parses or validates configuration — a duration on the
// command line, a key in a config file — throws ConfigError when the input is
// wrong. Its message is meant for the person who wrote the input: it says
// what was expected and what was found, and names where when that is known.
// Config errors are the caller's fault, never a lockfleet bug, so callers map
// them to a usage error (the CLI exits 2).
//
// Loading a config file (config.h) finds every problem of the file in one
// pass and throws them together as ConfigErrors, one Diagnostic each.
//
// Thread-safety: the types are plain values; const methods may be called
// concurrently.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace lockfleet::config {

class ConfigError : public std::runtime_error {
 public:
  explicit ConfigError(const std::string& message)
      : std::runtime_error(message) {}
};

// One problem in a config file and where it is.
struct Diagnostic {
  // The file as the caller named it (the path given to LoadFile, the name
  // given to LoadString).
  std::string file;
  // 1-based position of the offending key or value. 0 and 0 when the problem
  // has no position (a file that cannot be read).
  int line = 0;
  int column = 0;
  // Where in the document, as keys joined by '.' with list indexes in
  // brackets: "redis.pool_size", "worker.sources.schedules[1].every". A key
  // that itself contains '.' is quoted: kafka.properties["sasl.username"].
  // Empty for the file as a whole (unreadable, not YAML, empty).
  std::string path;
  // What was expected and what was found, e.g. "expected an integer from 1
  // to 1024, found 0".
  std::string message;

  // "FILE:LINE:COLUMN: PATH: MESSAGE", leaving out LINE:COLUMN and PATH when
  // they are unknown or empty. The shape compilers use, so editors jump to it.
  std::string ToString() const;

  bool operator==(const Diagnostic&) const = default;
};

// Every problem found in one config file, in file order (by line, then
// column; problems without a position first). what() is their ToString()s,
// one per line. Never empty.
class ConfigErrors : public ConfigError {
 public:
  // REQUIRES: !errors.empty().
  explicit ConfigErrors(std::vector<Diagnostic> errors);

  const std::vector<Diagnostic>& errors() const { return errors_; }

 private:
  std::vector<Diagnostic> errors_;
};

}  // namespace lockfleet::config
