// Helpers for the config tests: load YAML text with a fake environment and
// look at the errors.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lockfleet/config/config.h"

namespace lockfleet::config::testing {

using Env = std::map<std::string, std::string>;

// LoadOptions whose environment is exactly `env` (never the process's).
inline LoadOptions WithEnv(Env env) {
  LoadOptions options;
  options.env = [env = std::move(env)](
                    const std::string& name) -> std::optional<std::string> {
    const auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  return options;
}

// The errors LoadString reports for `yaml` (named "c.yaml"), or none.
inline std::vector<Diagnostic> Errors(std::string_view yaml, Env env = {}) {
  try {
    LoadString(yaml, "c.yaml", WithEnv(std::move(env)));
  } catch (const ConfigErrors& e) {
    return e.errors();
  }
  return {};
}

// The same as "FILE:LINE:COLUMN: path: message" lines, for readable failures.
inline std::vector<std::string> ErrorLines(std::string_view yaml,
                                           Env env = {}) {
  std::vector<std::string> lines;
  for (const Diagnostic& error : Errors(yaml, std::move(env))) {
    lines.push_back(error.ToString());
  }
  return lines;
}

// The one error for `yaml`, or a Diagnostic whose message says how many
// there were.
inline Diagnostic OnlyError(std::string_view yaml, Env env = {}) {
  std::vector<Diagnostic> errors = Errors(yaml, std::move(env));
  if (errors.size() == 1) return errors[0];
  Diagnostic wrong;
  wrong.message = std::to_string(errors.size()) + " errors:";
  for (const Diagnostic& error : errors) {
    wrong.message += "\n  " + error.ToString();
  }
  return wrong;
}

// Loads `yaml`, which must be valid.
inline Config Load(std::string_view yaml, Env env = {}) {
  return LoadString(yaml, "c.yaml", WithEnv(std::move(env)));
}

constexpr std::string_view kMinimal = "redis:\n  url: redis://h:1\n";

}  // namespace lockfleet::config::testing
