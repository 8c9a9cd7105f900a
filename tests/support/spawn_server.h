// SpawnServer: starts a server a test runs (redis-server, prometheus) as a
// child process.
//
// fork/exec rather than posix_spawn, for two things a test needs: the
// server must not hold the test's stdout/stderr open (a pipe reader would
// wait for it forever), and it must die with the test process even when
// that aborts (a sanitizer report) instead of running its destructors
// (PR_SET_PDEATHSIG: it is killed when the *thread* that started it exits,
// so start it from a long-lived thread).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <unistd.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace lockfleet::testing {

// Runs `args` (args[0] looked up on PATH) with stdin from /dev/null and
// stdout and stderr appended to `output`. Returns its pid; the caller reaps
// it. A program that cannot be executed exits with status 127. Throws
// std::runtime_error if fork fails.
inline pid_t SpawnServer(std::vector<std::string> args,
                         const std::string& output = "/dev/null") {
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    const int in = ::open("/dev/null", O_RDONLY);
    const int out = ::open(output.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

}  // namespace lockfleet::testing
