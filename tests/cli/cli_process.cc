#include "cli_process.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "support/wait_until.h"

extern char** environ;

namespace lockfleet::testing {

const char* LockfleetBinary() { return LOCKFLEET_CLI_PATH; }

TempDir::TempDir() {
  char tmpl[] = "/tmp/lockfleet-cli-test-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

CliProcess::CliProcess(const std::vector<std::string>& args,
                       const std::vector<std::string>& env)
    : CliProcess(LockfleetBinary(), args, env) {}

CliProcess::CliProcess(const std::string& program,
                       const std::vector<std::string>& args,
                       const std::vector<std::string>& env) {
  std::vector<std::string> argv_strings{program};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<std::string> env_strings;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view entry_view(*entry);
    if (entry_view.starts_with("LOCKFLEET_REDIS=") ||
        entry_view.starts_with("LOCKFLEET_KAFKA=") ||
        entry_view.starts_with("LOCKFLEET_EVENT_KEY=")) {
      continue;
    }
    env_strings.emplace_back(*entry);
  }
  env_strings.insert(env_strings.end(), env.begin(), env.end());

  std::vector<char*> argv;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

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
  // Whatever mask the test thread has, lockfleet starts like from a shell.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  const int rc =
      ::posix_spawn(&pid_, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    throw std::runtime_error(std::string("cannot start ") + argv[0] + ": " +
                             std::strerror(rc));
  }
}

CliProcess::~CliProcess() {
  if (!status_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

std::optional<int> CliProcess::Wait(std::chrono::milliseconds timeout) {
  WaitUntil([this] { return !Running(); }, timeout);
  return status_;
}

bool CliProcess::Running() {
  if (status_) return false;
  int status = 0;
  const pid_t rc = ::waitpid(pid_, &status, WNOHANG);
  if (rc == 0) return true;
  if (rc < 0) {
    status_ = -1;  // cannot happen: we own the child
  } else if (WIFSIGNALED(status)) {
    status_ = 128 + WTERMSIG(status);
  } else {
    status_ = WEXITSTATUS(status);
  }
  return false;
}

void CliProcess::Signal(int signal) {
  if (!status_) ::kill(pid_, signal);
}

std::string CliProcess::Stdout() const { return ReadFile(dir_.File("stdout")); }
std::string CliProcess::Stderr() const { return ReadFile(dir_.File("stderr")); }

CliResult RunCli(const std::vector<std::string>& args,
                 const std::vector<std::string>& env,
                 std::chrono::milliseconds timeout) {
  CliProcess process(args, env);
  CliResult result;
  result.status = process.Wait(timeout).value_or(-1);
  result.out = process.Stdout();
  result.err = process.Stderr();
  return result;
}

std::optional<std::string> WaitForFirstLine(CliProcess& process,
                                            std::chrono::milliseconds timeout) {
  std::optional<std::string> line;
  WaitUntil(
      [&] {
        // Read stdout before checking for exit: a process that printed its
        // line and then exited still counts.
        const bool running = process.Running();
        const std::string out = process.Stdout();
        if (const size_t newline = out.find('\n');
            newline != std::string::npos) {
          line = out.substr(0, newline);
          return true;
        }
        return !running;
      },
      timeout);
  return line;
}

int UnusedTcpPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot find a free loopback port");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

bool FileExists(const std::string& path) {
  return ::access(path.c_str(), F_OK) == 0;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string UntilExists(const std::string& file) {
  return "while [ ! -e '" + file + "' ]; do sleep 0.02; done";
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream(path) << content;
}

bool WaitForFile(const std::string& path, std::chrono::milliseconds timeout) {
  return WaitUntil([&] { return FileExists(path); }, timeout);
}

}  // namespace lockfleet::testing
