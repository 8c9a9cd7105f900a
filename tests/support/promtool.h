// Runs `promtool check metrics` (Debian package `prometheus`) on a text
// exposition, for tests that check what lockfleet serves on /metrics.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace lockfleet::testing {

inline std::optional<std::string> FindPromtool() {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/promtool";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

inline constexpr char kNoPromtool[] =
    "promtool is not on PATH: install the Debian package 'prometheus' "
    "(apt-get install prometheus; scripts/setup.sh does)";

struct PromtoolResult {
  int status = -1;     // promtool's exit status; -1 if it could not run
  std::string output;  // stdout and stderr: lint complaints, errors
};

// REQUIRES: FindPromtool() found it.
inline PromtoolResult PromtoolCheckMetrics(const std::string& exposition) {
  PromtoolResult result;
  const std::optional<std::string> promtool = FindPromtool();
  if (!promtool) return result;
  char path[] = "/tmp/lockfleet-exposition-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return result;
  close(fd);
  std::ofstream(path) << exposition;
  const std::string command =
      "'" + *promtool + "' check metrics < '" + path + "' 2>&1";
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

}  // namespace lockfleet::testing
