// Helpers for the config tests: load YAML text with a fake environment and
// look at the errors.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lockfleet/config/config.h"

namespace lockfleet::config::testing {

// A fresh directory per test (named after its suite and name), removed
// afterwards, and a way to write files into it.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* test =
        ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("lockfleet_" + std::string(test->test_suite_name()) + "_" +
            test->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Writes `content` (bytes as given) to `name` in the directory; its path.
  std::string Write(const std::string& name, const std::string& content) {
    const std::filesystem::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << content;
    return path.string();
  }

  std::filesystem::path dir_;
};

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
