// The error type of the config module.
//
// Everything that parses or validates configuration — a duration on the
// command line, a key in a config file — throws ConfigError when the input is
// wrong. Its message is meant for the person who wrote the input: it says
// what was expected and what was found, and names where when that is known.
// Config errors are the caller's fault, never a lockfleet bug, so callers map
// them to a usage error (the CLI exits 2).
#pragma once

#include <stdexcept>
#include <string>

namespace lockfleet::config {

class ConfigError : public std::runtime_error {
 public:
  explicit ConfigError(const std::string& message)
      : std::runtime_error(message) {}
};

}  // namespace lockfleet::config
