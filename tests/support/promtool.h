// Runs promtool (Debian package `prometheus`): `check metrics` on a text
// exposition, for tests that check what lockfleet serves on /metrics, and
// any other subcommand (`check rules`, `test rules`) on files.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

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

struct PromtoolResult {
  int status = -1;     // promtool's exit status; -1 if it could not run
  std::string output;  // stdout and stderr: lint complaints, errors
};

// Runs `promtool args...` with `input` on its stdin.
// REQUIRES: FindPromtool() found it.
inline PromtoolResult RunPromtool(const std::vector<std::string>& args,
                                  const std::string& input = "") {
  PromtoolResult result;
  const std::optional<std::string> promtool = FindPromtool();
  if (!promtool) return result;
  char path[] = "/tmp/lockfleet-promtool-input-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return result;
  close(fd);
  std::ofstream(path) << input;
  // Single-quoted for the shell; a ' inside becomes '\''.
  const auto quote = [](const std::string& arg) {
    std::string quoted = "'";
    for (const char c : arg) quoted += c == '\'' ? "'\\''" : std::string(1, c);
    return quoted + "'";
  };
  std::string command = quote(*promtool);
  for (const std::string& arg : args) command += " " + quote(arg);
  command += " < " + quote(path) + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe != nullptr) {
    char buffer[4096];
    for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) {
      result.output.append(buffer, n);
    }
    const int status = pclose(pipe);
    if (WIFEXITED(status)) result.status = WEXITSTATUS(status);
  }
  unlink(path);
  return result;
}

// REQUIRES: FindPromtool() found it.
inline PromtoolResult PromtoolCheckMetrics(const std::string& exposition) {
  return RunPromtool({"check", "metrics"}, exposition);
}

}  // namespace lockfleet::testing
