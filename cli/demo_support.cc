#include "demo_support.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string_view>
#include <utility>

#include "lockfleet/metrics/http.h"

namespace lockfleet::cli {

using std::chrono::milliseconds;

std::string FindOnPath(const std::string& name) {
  if (const char* env = std::getenv("LOCKFLEET_REDIS_SERVER");
      env != nullptr && *env != '\0' && name == "redis-server") {
    return env;
  }
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::filesystem::path candidate =
        std::filesystem::path(dir.empty() ? "." : dir) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

std::string SelfExe() {
  std::error_code ec;
  const std::filesystem::path self =
      std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "" : self.string();
}

std::string Tail(const std::filesystem::path& file, size_t max_lines) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::string out;
  for (size_t i = lines.size() > max_lines ? lines.size() - max_lines : 0;
       i < lines.size(); ++i) {
    out += "    " + lines[i] + "\n";
  }
  return out;
}

std::string Ms(double seconds) {
  char text[32];
  if (std::isnan(seconds)) return "n/a";
  std::snprintf(text, sizeof(text), "%.2f ms", seconds * 1000);
  return text;
}

std::optional<Endpoint> ParseMetricsUrl(const std::string& ready_line) {
  // "ready worker=ID metrics=http://HOST:PORT/metrics health=..."
  constexpr std::string_view kMetrics = " metrics=http://";
  const size_t at = ready_line.find(kMetrics);
  if (at == std::string::npos) return std::nullopt;
  const size_t start = at + kMetrics.size();
  const size_t slash = ready_line.find('/', start);
  if (slash == std::string::npos) return std::nullopt;
  return ParseTarget(std::string_view(ready_line).substr(start, slash - start));
}

double Jobs(const std::vector<metrics::Sample>& samples, const char* result) {
  return metrics::SumSamples(samples, "lockfleet_jobs_total",
                             {{"source", "kafka"}, {"result", result}});
}

std::filesystem::path DemoRegistryPath() {
  if (const char* runtime = std::getenv("XDG_RUNTIME_DIR");
      runtime != nullptr && runtime[0] == '/') {
    return std::filesystem::path(runtime) / "lockfleet-demo";
  }
  return "/tmp/lockfleet-demo-" + std::to_string(::getuid());
}

bool RegisterDemo(const std::filesystem::path& config) {
  const std::filesystem::path path = DemoRegistryPath();
  const std::filesystem::path temp =
      path.string() + "." + std::to_string(::getpid());
  // O_EXCL: never write through a file (or link) someone else put there.
  const int fd = ::open(
      temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const std::string text =
      std::to_string(::getpid()) + "\n" + config.string() + "\n";
  const bool written = ::write(fd, text.data(), text.size()) ==
                       static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!written || ::rename(temp.c_str(), path.c_str()) != 0) {
    ::unlink(temp.c_str());
    return false;
  }
  return true;
}

namespace {

// The registration's pid and config, if the file is a regular file of ours.
std::optional<std::pair<pid_t, std::filesystem::path>> ReadRegistration() {
  const std::filesystem::path path = DemoRegistryPath();
  // O_NONBLOCK: a FIFO planted under the name must not hang the open.
  const int fd =
      ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  char buffer[4200];
  ssize_t size = -1;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::getuid()) {
    size = ::read(fd, buffer, sizeof(buffer));
  }
  ::close(fd);
  if (size <= 0) return std::nullopt;
  std::stringstream in(std::string(buffer, static_cast<size_t>(size)));
  long pid = 0;
  std::string config;
  if (!(in >> pid) || pid <= 0 || !(in >> std::ws) ||
      !std::getline(in, config) || config.empty()) {
    return std::nullopt;
  }
  return std::make_pair(static_cast<pid_t>(pid), std::filesystem::path(config));
}

}  // namespace

void UnregisterDemo() {
  const auto registration = ReadRegistration();
  if (registration && registration->first == ::getpid()) {
    ::unlink(DemoRegistryPath().c_str());
  }
}

std::optional<std::filesystem::path> FindRunningDemo() {
  const auto registration = ReadRegistration();
  if (!registration) return std::nullopt;
  // Alive and ours (EPERM: another user's process has that pid now).
  if (::kill(registration->first, 0) != 0) return std::nullopt;
  struct stat st {};
  if (::lstat(registration->second.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_uid != ::getuid()) {
    return std::nullopt;
  }
  return registration->second;
}

long long TotalCommands(RedisClient& redis) {
  long long total = 0;
  // Every master's (a cluster's commands are spread over them).
  for (const RedisNode& master : redis.Masters()) {
    const Reply info = redis.ExecuteOn(master, {"INFO", "commandstats"});
    std::stringstream lines(info.str);
    for (std::string line; std::getline(lines, line);) {
      const size_t calls = line.find("calls=");
      if (line.rfind("cmdstat_", 0) != 0 || calls == std::string::npos)
        continue;
      // Our own probes, and a cluster client's map reads.
      if (line.rfind("cmdstat_info:", 0) == 0 ||
          line.rfind("cmdstat_cluster|", 0) == 0) {
        continue;
      }
      total += std::stoll(line.substr(calls + 6));
    }
  }
  return total;
}

}  // namespace lockfleet::cli
