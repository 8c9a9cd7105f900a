// Runs promtool (Debian package `prometheus`): `check metrics` on a text
// exposition, for tests that check what lockfleet serves on /metrics, and
// any other subcommand (`check rules`, `test rules`) on files.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "support/shell.h"

namespace lockfleet::testing {

// The first executable `name` in $PATH, or nullopt.
inline std::optional<std::string> FindOnPath(std::string_view name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate =
        (dir.empty() ? "." : dir) + "/" + std::string(name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

inline std::optional<std::string> FindPromtool() {
  return FindOnPath("promtool");
}

inline constexpr char kNoPromtool[] =
    "promtool is not on PATH: install the Debian package 'prometheus' "
    "(apt-get install prometheus; scripts/setup.sh does)";

// promtool's exit status (-1 if it could not run) and its stdout and
// stderr: lint complaints, errors.
using PromtoolResult = ShellResult;

// Runs `promtool args...` with `input` on its stdin.
// REQUIRES: FindPromtool() found it.
inline PromtoolResult RunPromtool(const std::vector<std::string>& args,
                                  const std::string& input = "") {
  const std::optional<std::string> promtool = FindPromtool();
  if (!promtool) return {};
  char path[] = "/tmp/lockfleet-promtool-input-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return {};
  close(fd);
  std::ofstream(path) << input;
  std::string command = ShellQuote(*promtool);
  for (const std::string& arg : args) command += " " + ShellQuote(arg);
  PromtoolResult result = RunShell(command + " < " + ShellQuote(path));
  unlink(path);
  return result;
}

// REQUIRES: FindPromtool() found it.
inline PromtoolResult PromtoolCheckMetrics(const std::string& exposition) {
  return RunPromtool({"check", "metrics"}, exposition);
}

}  // namespace lockfleet::testing
