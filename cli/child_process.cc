#include "child_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string_view>

extern char** environ;

namespace lockfleet::cli {
namespace {

// posix_spawn* report errors through their return value.
void Check(int rc, const char* what) {
  if (rc != 0) {
    throw std::runtime_error(std::string(what) + ": " + std::strerror(rc));
  }
}

std::vector<char*> CStrings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings)
    out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

std::string_view KeyOf(std::string_view entry) {
  return entry.substr(0, entry.find('='));
}

// Where execvp(3) would look for `command`: itself if it names a path, else
// each $PATH entry (an empty one is the current directory).
std::vector<std::string> ExecCandidates(const std::string& command) {
  if (command.find('/') != std::string::npos) return {command};
  const char* path = std::getenv("PATH");
  const std::string dirs =
      path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t colon = dirs.find(':', start);
    const std::string dir = dirs.substr(
        start, colon == std::string::npos ? std::string::npos : colon - start);
    out.push_back((dir.empty() ? "." : dir) + "/" + command);
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return out;
}

void CloseRangeExcept(unsigned from, int keep) {
  const unsigned k = static_cast<unsigned>(keep);
  if (keep < 0 || k < from) {
    ::close_range(from, ~0U, 0);
    return;
  }
  if (k > from) ::close_range(from, k - 1, 0);
  ::close_range(k + 1, ~0U, 0);
}

}  // namespace

SpawnResult SpawnInNewGroup(const std::vector<std::string>& argv,
                            const std::vector<std::string>& env,
                            const ChildDescriptors& fds,
                            const sigset_t& reset_to_default,
                            const GroupSpawn& group) {
  // Everything the child needs is prepared before fork(): between fork and
  // exec only async-signal-safe calls are allowed (we have threads).
  const std::vector<std::string> candidates = ExecCandidates(argv[0]);
  std::vector<const char*> paths;
  for (const std::string& candidate : candidates) {
    paths.push_back(candidate.c_str());
  }
  std::vector<char*> c_argv = CStrings(argv);
  std::vector<char*> c_env = CStrings(env);
  int error_pipe[2] = {-1, -1};
  if (::pipe2(error_pipe, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  sigset_t ttou;
  sigemptyset(&ttou);
  sigaddset(&ttou, SIGTTOU);
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid == 0) {
    const int report = error_pipe[1];
    auto fail = [report](int error) {
      while (::write(report, &error, sizeof(error)) < 0 && errno == EINTR) {
      }
      ::_exit(kExitCannotExecute);
    };
    if (::setpgid(0, 0) != 0) fail(errno);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(kExitCannotExecute);  // parent gone
    if (group.report_fd >= 0) {
      const int32_t self = static_cast<int32_t>(::getpid());
      while (::write(group.report_fd, &self, sizeof(self)) < 0 &&
             errno == EINTR) {
      }
    }
    if (group.terminal_fd >= 0) {
      // A background group may take the terminal only with SIGTTOU blocked.
      ::sigprocmask(SIG_BLOCK, &ttou, nullptr);
      ::tcsetpgrp(group.terminal_fd, ::getpid());
    }
    struct sigaction default_action = {};
    default_action.sa_handler = SIG_DFL;
    for (int signal = 1; signal < NSIG; ++signal) {
      if (sigismember(&reset_to_default, signal) == 1) {
        ::sigaction(signal, &default_action, nullptr);
      }
    }
    for (int fd : fds.close) {
      if (fd != report) ::close(fd);
    }
    if (fds.close_from >= 0) {
      CloseRangeExcept(static_cast<unsigned>(fds.close_from), report);
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    int error = ENOENT;
    bool denied = false;
    for (const char* path : paths) {
      ::execve(path, c_argv.data(), c_env.data());
      error = errno;
      if (error == EACCES) {
        denied = true;
      } else if (error != ENOENT && error != ENOTDIR) {
        break;
      }
    }
    fail(denied && (error == ENOENT || error == ENOTDIR) ? EACCES : error);
    ::_exit(kExitCannotExecute);  // not reached: fail() exits
  }
  const int fork_errno = errno;
  ::close(error_pipe[1]);
  SpawnResult result;
  if (pid < 0) {
    ::close(error_pipe[0]);
    result.error = fork_errno;
    return result;
  }
  int error = 0;
  ssize_t n = 0;
  while ((n = ::read(error_pipe[0], &error, sizeof(error))) < 0 &&
         errno == EINTR) {
  }
  ::close(error_pipe[0]);
  if (n == sizeof(error)) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    result.error = error;
    return result;
  }
  result.pid = pid;
  return result;
}

bool WaitForExitOrStop(pid_t pid) {
  siginfo_t info;
  while (true) {
    info.si_pid = 0;
    if (waitid(P_PID, static_cast<id_t>(pid), &info,
               WEXITED | WSTOPPED | WNOWAIT) != 0) {
      if (errno == EINTR) continue;
      return true;  // ECHILD: already reaped
    }
    if (info.si_code != CLD_STOPPED) return true;
    // Consume the stop report; WNOHANG in case it continued and exited.
    waitid(P_PID, static_cast<id_t>(pid), &info, WSTOPPED | WNOHANG);
    return false;
  }
}

SpawnResult Spawn(const std::vector<std::string>& argv,
                  const std::vector<std::string>& env,
                  const ChildDescriptors& fds,
                  const sigset_t& reset_to_default) {
  posix_spawnattr_t attr;
  Check(posix_spawnattr_init(&attr), "posix_spawnattr_init");
  posix_spawn_file_actions_t actions;
  if (int rc = posix_spawn_file_actions_init(&actions); rc != 0) {
    posix_spawnattr_destroy(&attr);
    Check(rc, "posix_spawn_file_actions_init");
  }
  SpawnResult result;
  try {
    sigset_t empty;
    sigemptyset(&empty);
    Check(posix_spawnattr_setsigmask(&attr, &empty),
          "posix_spawnattr_setsigmask");
    Check(posix_spawnattr_setsigdefault(&attr, &reset_to_default),
          "posix_spawnattr_setsigdefault");
    Check(posix_spawnattr_setflags(
              &attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF),
          "posix_spawnattr_setflags");
    for (int fd : fds.close) {
      Check(posix_spawn_file_actions_addclose(&actions, fd),
            "posix_spawn_file_actions_addclose");
    }
    if (fds.close_from >= 0) {
      Check(posix_spawn_file_actions_addclosefrom_np(&actions, fds.close_from),
            "posix_spawn_file_actions_addclosefrom_np");
    }
    std::vector<char*> c_argv = CStrings(argv);
    std::vector<char*> c_env = CStrings(env);
    pid_t pid = -1;
    const int rc = posix_spawnp(&pid, c_argv[0], &actions, &attr, c_argv.data(),
                                c_env.data());
    if (rc == 0) {
      result.pid = pid;
    } else {
      result.error = rc;
    }
  } catch (...) {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    throw;
  }
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  return result;
}

ChildDescriptors DescriptorsToCloseExcept(const std::vector<int>& inherited) {
  ChildDescriptors fds;
  fds.close_from = inherited.empty() ? 0 : inherited.back() + 1;
  for (int fd : OpenFileDescriptors()) {
    if (fd < fds.close_from &&
        !std::binary_search(inherited.begin(), inherited.end(), fd)) {
      fds.close.push_back(fd);
    }
  }
  return fds;
}

sigset_t SignalsAtDefault() {
  sigset_t set;
  sigemptyset(&set);
  for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) {
    struct sigaction action;
    if (sigaction(signal, nullptr, &action) == 0 &&
        (action.sa_flags & SA_SIGINFO) == 0 && action.sa_handler == SIG_DFL) {
      sigaddset(&set, signal);
    }
  }
  return set;
}

int SpawnFailureStatus(const SpawnResult& result) {
  return result.error == ENOENT ? kExitNotFound : kExitCannotExecute;
}

std::string SpawnFailureMessage(const std::string& command,
                                const SpawnResult& result) {
  if (result.error == ENOENT && command.find('/') == std::string::npos) {
    return command + ": command not found";
  }
  return command + ": " + std::strerror(result.error);
}

void WaitForExit(pid_t pid) {
  siginfo_t info;
  while (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) != 0) {
    if (errno != EINTR) return;  // ECHILD: already reaped; nothing to wait for
  }
}

int Reap(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return kExitCannotExecute;  // not our child: cannot be
  }
  if (WIFSIGNALED(status)) return kExitSignalBase + WTERMSIG(status);
  return WEXITSTATUS(status);
}

std::vector<std::string> EnvironmentWith(
    const std::vector<std::string>& overrides,
    const std::function<bool(std::string_view key)>& drop) {
  std::vector<std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view key = KeyOf(*entry);
    if (drop && drop(key)) continue;
    const bool overridden =
        std::any_of(overrides.begin(), overrides.end(),
                    [&](const std::string& o) { return KeyOf(o) == key; });
    if (!overridden) env.emplace_back(*entry);
  }
  env.insert(env.end(), overrides.begin(), overrides.end());
  return env;
}

std::vector<int> OpenFileDescriptors() {
  std::vector<int> fds;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return fds;
  const int own = dirfd(dir);
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    const int fd = std::atoi(entry->d_name);
    if (fd != own) fds.push_back(fd);
  }
  closedir(dir);
  std::sort(fds.begin(), fds.end());
  return fds;
}

}  // namespace lockfleet::cli
