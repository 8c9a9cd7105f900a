// SupervisedProcess: a child the calling process owns for its whole life —
// the demo's redis-server and worker processes.
//
// The child gets PR_SET_PDEATHSIG(SIGKILL), so it dies with its parent even
// when the parent is SIGKILLed; its stdout can be captured line by line;
// its stderr goes to a file (shown when something goes wrong). Destruction
// stops it: SIGTERM, then SIGKILL after `kill_after`, and reaps it.
//
// Thread-safety: none; one owner thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace lockfleet::cli {

class SupervisedProcess {
 public:
  // Starts argv[0] (an absolute path) with argv. `stderr_path`: file that
  // receives its stderr (truncated); empty: inherit ours. Throws
  // std::runtime_error if it cannot be started.
  SupervisedProcess(std::vector<std::string> argv, std::string stderr_path,
                    bool capture_stdout);
  ~SupervisedProcess();
  SupervisedProcess(const SupervisedProcess&) = delete;
  SupervisedProcess& operator=(const SupervisedProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& name() const { return name_; }

  // The next line of its stdout (without '\n'), or std::nullopt when none
  // arrives within `timeout` or stdout closed. REQUIRES: capture_stdout.
  std::optional<std::string> ReadLine(std::chrono::milliseconds timeout);

  void Signal(int signal);

  // Waits up to `timeout` for it to exit; its wait status, or nullopt.
  std::optional<int> WaitFor(std::chrono::milliseconds timeout);

  // SIGTERM, wait up to `grace`, then SIGKILL. Returns the wait status.
  int Stop(std::chrono::milliseconds grace);

  bool exited() const { return status_.has_value(); }

 private:
  std::string name_;
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string buffer_;
  std::optional<int> status_;
};

// "exit 0", "exit 3", "killed by SIGKILL".
std::string DescribeWaitStatus(int status);

}  // namespace lockfleet::cli
