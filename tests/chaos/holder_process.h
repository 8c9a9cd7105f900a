// HolderProcess: a lockfleet_chaos_holder child process for the holder
// chaos tests (tests/chaos/holder_chaos_test.cc; the helper's command line
// and output are described in chaos_holder.cc).
//
// Thread-safety: none; one test thread uses a HolderProcess.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "cli/cli_process.h"
#include "support/wait_until.h"

namespace lockfleet::testing {

inline std::vector<std::string> OutputLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

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

// Started with `args` (the helper's options), stdout and stderr captured to
// files; killed and reaped on destruction.
class HolderProcess {
 public:
  explicit HolderProcess(std::vector<std::string> args) {
    args.insert(args.begin(), LOCKFLEET_CHAOS_HOLDER_PATH);
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    const std::string out = dir_.File("stdout");
    const std::string err = dir_.File("stderr");
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, out.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, err.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    const int rc =
        ::posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      throw std::runtime_error(std::string("cannot start ") + argv[0] + ": " +
                               std::strerror(rc));
    }
  }
  ~HolderProcess() {
    if (!status_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  HolderProcess(const HolderProcess&) = delete;
  HolderProcess& operator=(const HolderProcess&) = delete;

  pid_t pid() const { return pid_; }
  void Signal(int signal) {
    if (!status_) ::kill(pid_, signal);
  }
  bool Running() {
    if (status_) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == 0) return true;
    status_ =
        WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    return false;
  }
  // Exit status (128 + signal if killed), or nullopt if still running.
  std::optional<int> Wait(
      std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    WaitUntil([this] { return !Running(); }, timeout);
    return status_;
  }
  // The first output line "EVENT ...", waiting for it up to `timeout`;
  // nullopt if the process exited without printing it.
  std::optional<std::string> WaitForLine(
      const std::string& event,
      std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    std::optional<std::string> found;
    WaitUntil(
        [&] {
          const bool running = Running();  // before reading: no lost lines
          for (const std::string& line : OutputLines(Stdout())) {
            if (line.starts_with(event + " ")) found = line;
            if (found) return true;
          }
          return !running;
        },
        timeout);
    return found;
  }
  std::string Stdout() const { return ReadFile(dir_.File("stdout")); }
  std::string Stderr() const { return ReadFile(dir_.File("stderr")); }
  std::string Output() const { return Stdout() + Stderr(); }

 private:
  TempDir dir_;
  pid_t pid_ = -1;
  std::optional<int> status_;
};

}  // namespace lockfleet::testing
