// HolderProcess: a lockfleet_chaos_holder child process for the holder
// chaos tests (tests/chaos/holder_chaos_test.cc; the helper's command line
// and output are described in chaos_holder.cc).
//
// Thread-safety: none; one test thread uses a HolderProcess.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_process.h"
#include "support/wait_until.h"

namespace lockfleet::testing {

// The value of "key=value" in a helper's output line ("" if absent).
inline std::string Field(const std::string& line, const std::string& key) {
  std::istringstream in(line);
  for (std::string word; in >> word;) {
    if (word.starts_with(key + "=")) return word.substr(key.size() + 1);
  }
  return "";
}

inline int64_t IntField(const std::string& line, const std::string& key) {
  const std::string value = Field(line, key);
  return value.empty() ? -1 : std::stoll(value);
}

// Started with `args` (the helper's options) like a CliProcess: stdout and
// stderr captured to files; killed and reaped on destruction.
class HolderProcess : public CliProcess {
 public:
  explicit HolderProcess(const std::vector<std::string>& args)
      : CliProcess(LOCKFLEET_CHAOS_HOLDER_PATH, args, {}) {}

  // The first output line "EVENT ...", waiting for it up to `timeout`;
  // nullopt if the process exited without printing it.
  std::optional<std::string> WaitForLine(
      const std::string& event,
      std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    std::optional<std::string> found;
    WaitUntil(
        [&] {
          const bool running = Running();  // before reading: no lost lines
          for (const std::string& line : SplitLines(Stdout())) {
            if (line.starts_with(event + " ")) found = line;
            if (found) return true;
          }
          return !running;
        },
        timeout);
    return found;
  }
  std::string Output() const { return Stdout() + Stderr(); }
};

}  // namespace lockfleet::testing
