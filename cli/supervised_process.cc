#include "supervised_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace lockfleet::cli {

SupervisedProcess::SupervisedProcess(std::vector<std::string> argv,
                                     std::string stderr_path,
                                     bool capture_stdout)
    : name_(argv.empty() ? "" : argv[0]) {
  if (argv.empty()) throw std::runtime_error("empty command");
  // Everything the child needs is prepared before fork(): between fork and
  // exec only async-signal-safe calls are allowed (we have threads).
  std::vector<char*> args;
  for (std::string& arg : argv) args.push_back(arg.data());
  args.push_back(nullptr);
  int pipe_fds[2] = {-1, -1};
  if (capture_stdout && ::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  int err_fd = -1;
  if (!stderr_path.empty()) {
    err_fd = ::open(stderr_path.c_str(),
                    O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (err_fd < 0) {
      throw std::runtime_error(stderr_path + ": " + std::strerror(errno));
    }
  }
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // parent already gone
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    if (pipe_fds[1] >= 0) ::dup2(pipe_fds[1], STDOUT_FILENO);
    if (err_fd >= 0) {
      ::dup2(err_fd, STDERR_FILENO);
      if (pipe_fds[1] < 0) ::dup2(err_fd, STDOUT_FILENO);  // its chatter too
    }
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  const int fork_errno = errno;
  if (pipe_fds[1] >= 0) ::close(pipe_fds[1]);
  if (err_fd >= 0) ::close(err_fd);
  stdout_fd_ = pipe_fds[0];
  if (pid_ < 0) {
    if (stdout_fd_ >= 0) ::close(stdout_fd_);
    throw std::runtime_error(std::string("fork: ") + std::strerror(fork_errno));
  }
}

SupervisedProcess::~SupervisedProcess() {
  if (pid_ > 0 && !status_) Stop(std::chrono::seconds(5));
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
}

std::optional<std::string> SupervisedProcess::ReadLine(
    std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (const size_t newline = buffer_.find('\n');
        newline != std::string::npos) {
      std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return line;
    }
    if (stdout_fd_ < 0) return std::nullopt;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd fd{.fd = stdout_fd_, .events = POLLIN, .revents = 0};
    const int ready = ::poll(&fd, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return std::nullopt;
    char chunk[4096];
    const ssize_t n = ::read(stdout_fd_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(stdout_fd_);
      stdout_fd_ = -1;
      continue;
    }
    buffer_.append(chunk, static_cast<size_t>(n));
  }
}

void SupervisedProcess::Signal(int signal) {
  if (pid_ > 0 && !status_) ::kill(pid_, signal);
}

std::optional<int> SupervisedProcess::WaitFor(
    std::chrono::milliseconds timeout) {
  if (status_) return status_;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    const pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      status_ = status;
      return status_;
    }
    if (done < 0 && errno != EINTR) {
      status_ = 0;  // not our child any more (cannot happen): stop asking
      return status_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

int SupervisedProcess::Stop(std::chrono::milliseconds grace) {
  Signal(SIGTERM);
  if (std::optional<int> status = WaitFor(grace)) return *status;
  Signal(SIGKILL);
  return *WaitFor(std::chrono::hours(1));
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return std::string("killed by SIG") + sigabbrev_np(WTERMSIG(status));
  }
  return "status " + std::to_string(status);
}

}  // namespace lockfleet::cli
