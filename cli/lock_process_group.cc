#include "lock_process_group.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace lockfleet::cli {
namespace {

// Reads exactly sizeof(int32_t) bytes; false on EOF (or an error).
bool ReadPid(int fd, int32_t* pid) {
  char* out = reinterpret_cast<char*>(pid);
  size_t got = 0;
  while (got < sizeof(*pid)) {
    const ssize_t n = ::read(fd, out + got, sizeof(*pid) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

// The guard's whole life, in the forked child: only async-signal-safe calls
// (the parent has threads).
[[noreturn]] void GuardMain(int read_fd) {
  ::setpgid(0, 0);
  struct sigaction ignore = {};
  ignore.sa_handler = SIG_IGN;
  for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP, SIGPIPE}) {
    ::sigaction(signal, &ignore, nullptr);
  }
  // Keep no socket, pipe or terminal of lockfleet's alive.
  if (read_fd > 0) ::close_range(0, static_cast<unsigned>(read_fd) - 1, 0);
  ::close_range(static_cast<unsigned>(read_fd) + 1, ~0U, 0);
  int32_t pgid = 0;
  int32_t message = 0;
  while (ReadPid(read_fd, &message)) {
    if (message == 0) ::_exit(0);  // Stand(): lockfleet cleaned up
    pgid = message;
  }
  if (pgid > 0) ::kill(-pgid, SIGKILL);  // lockfleet died
  ::_exit(0);
}

// The file's contents, or "" if it cannot be read: a /proc file vanishes, or
// fails to read (ESRCH), when its process exits meanwhile — which
// std::ifstream reports by throwing from underflow.
std::string ReadWhole(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string out;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      out.append(buffer, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      if (n < 0) out.clear();
      break;
    }
  }
  ::close(fd);
  return out;
}

}  // namespace

std::vector<pid_t> LiveProcessesInGroup(pid_t pgid) {
  std::vector<pid_t> members;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return members;
  while (const dirent* entry = ::readdir(proc)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    const std::string stat =
        ReadWhole(std::string("/proc/") + entry->d_name + "/stat");
    // "pid (comm) state ppid pgrp ...": comm may hold spaces and parens.
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream fields(stat.substr(paren + 1));
    char state = 0;
    long ppid = 0;
    long pgrp = 0;
    if (!(fields >> state >> ppid >> pgrp)) continue;
    if (pgrp == pgid && state != 'Z' && state != 'X') {
      members.push_back(static_cast<pid_t>(std::atol(entry->d_name)));
    }
  }
  ::closedir(proc);
  return members;
}

std::string CountProcesses(size_t count) {
  return std::to_string(count) + (count == 1 ? " process" : " processes");
}

DeathGuard::DeathGuard() {
  int fds[2] = {-1, -1};
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  pid_ = ::fork();
  if (pid_ == 0) {
    ::close(fds[1]);
    GuardMain(fds[0]);
  }
  const int fork_errno = errno;
  ::close(fds[0]);
  if (pid_ < 0) {
    ::close(fds[1]);
    throw std::runtime_error(std::string("fork: ") + std::strerror(fork_errno));
  }
  write_fd_ = fds[1];
}

DeathGuard::~DeathGuard() { Stand(); }

void DeathGuard::Stand() {
  if (write_fd_ < 0) return;
  const int32_t done = 0;
  while (::write(write_fd_, &done, sizeof(done)) < 0 && errno == EINTR) {
  }
  ::close(write_fd_);
  write_fd_ = -1;
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
}

int ForegroundTerminal() {
  if (::isatty(STDIN_FILENO) != 1) return -1;
  return ::tcgetpgrp(STDIN_FILENO) == ::getpgrp() ? STDIN_FILENO : -1;
}

void TakeTerminalBack(int tty, pid_t pgid) {
  if (tty >= 0 && ::tcgetpgrp(tty) == pgid) ::tcsetpgrp(tty, ::getpgrp());
}

void GiveTerminalTo(int tty, pid_t pgid) {
  if (tty >= 0 && ::tcgetpgrp(tty) == ::getpgrp()) ::tcsetpgrp(tty, pgid);
}

}  // namespace lockfleet::cli
