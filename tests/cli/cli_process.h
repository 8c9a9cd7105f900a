// Test helpers that drive the real `lockfleet` binary as a child process.
//
// CliProcess starts it with stdout and stderr captured to files, so a test
// can signal it, wait for it with a deadline, and read what it printed. Only
// the descriptors 0-2 are passed on: the test's own Redis connections must
// not leak into lockfleet (and from there into COMMAND).
//
// Thread-safety: none; one test thread uses a CliProcess.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace lockfleet::testing {

// Path of the lockfleet binary under test (set by CMake).
const char* LockfleetBinary();

// A fresh directory under /tmp, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

class CliProcess {
 public:
  // Starts `lockfleet args...` with `env` ("KEY=value") added to the test's
  // environment, minus any LOCKFLEET_REDIS, LOCKFLEET_KAFKA or
  // LOCKFLEET_EVENT_KEY the test runner had. Throws std::runtime_error if it
  // cannot be started.
  explicit CliProcess(const std::vector<std::string>& args,
                      const std::vector<std::string>& env = {});
  // SIGKILLs the process if it still runs, and reaps it.
  ~CliProcess();
  CliProcess(const CliProcess&) = delete;
  CliProcess& operator=(const CliProcess&) = delete;

  pid_t pid() const { return pid_; }

  // Waits up to `timeout` for the process to exit; returns its status as a
  // shell reports it (128 + signal if killed), or nullopt if it still runs.
  std::optional<int> Wait(
      std::chrono::milliseconds timeout = std::chrono::seconds(30));

  // True while the process has not exited.
  bool Running();

  void Signal(int signal);

  std::string Stdout() const;
  std::string Stderr() const;

 protected:
  // Starts `program args...` instead of lockfleet (a test helper binary,
  // e.g. tests/chaos/holder_process.h), the same way.
  CliProcess(const std::string& program, const std::vector<std::string>& args,
             const std::vector<std::string>& env);

 private:
  TempDir dir_;
  pid_t pid_ = -1;
  std::optional<int> status_;
};

struct CliResult {
  int status = -1;  // -1: did not finish in time (then killed)
  std::string out;
  std::string err;
};

// Runs `lockfleet args...` to completion (killed after `timeout`).
CliResult RunCli(const std::vector<std::string>& args,
                 const std::vector<std::string>& env = {},
                 std::chrono::milliseconds timeout = std::chrono::seconds(30));

// Polls until the process printed a whole first line on stdout, up to
// `timeout`; returns it without the newline, or nullopt (also if the process
// exited first without printing one).
std::optional<std::string> WaitForFirstLine(
    CliProcess& process,
    std::chrono::milliseconds timeout = std::chrono::seconds(20));

// A loopback TCP port nobody listens on right now (bound once, then closed).
int UnusedTcpPort();

// File helpers.
bool FileExists(const std::string& path);
std::string ReadFile(const std::string& path);  // "" if missing
void WriteFile(const std::string& path, const std::string& content);
// The lines of `text` (a process's output), without their newlines.
std::vector<std::string> SplitLines(const std::string& text);
// A shell loop that runs until `file` exists (a child's cue to go on).
std::string UntilExists(const std::string& file);
// Polls for `path` to exist, up to `timeout`.
bool WaitForFile(const std::string& path,
                 std::chrono::milliseconds timeout = std::chrono::seconds(20));

}  // namespace lockfleet::testing
