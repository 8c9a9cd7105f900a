#include "demo_support.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

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
  const size_t at = ready_line.find(" metrics=http://");
  if (at == std::string::npos) return std::nullopt;
  const size_t start = at + std::string(" metrics=http://").size();
  const size_t slash = ready_line.find('/', start);
  const size_t colon = ready_line.rfind(':', slash);
  if (slash == std::string::npos || colon == std::string::npos ||
      colon < start) {
    return std::nullopt;
  }
  Endpoint endpoint;
  endpoint.host = ready_line.substr(start, colon - start);
  if (endpoint.host.size() > 2 && endpoint.host.front() == '[') {
    endpoint.host = endpoint.host.substr(1, endpoint.host.size() - 2);
  }
  endpoint.port = static_cast<uint16_t>(
      std::stoi(ready_line.substr(colon + 1, slash - colon - 1)));
  const size_t end = ready_line.find(' ', start);
  endpoint.url = ready_line.substr(
      at + 9, end == std::string::npos ? std::string::npos : end - at - 9);
  return endpoint;
}

// Every worker's samples, concatenated (sums are fleet-wide).
std::vector<metrics::Sample> ScrapeAll(const std::vector<Endpoint>& endpoints) {
  std::vector<metrics::Sample> all;
  for (const Endpoint& endpoint : endpoints) {
    const metrics::HttpResponse response = metrics::HttpGet(
        endpoint.host, endpoint.port, "/metrics", milliseconds(2000));
    if (response.status != 200) continue;  // a worker gone: shows as less
    std::vector<metrics::Sample> samples =
        metrics::ParseExposition(response.body);
    all.insert(all.end(), samples.begin(), samples.end());
  }
  return all;
}

double Jobs(const std::vector<metrics::Sample>& samples, const char* result) {
  return metrics::SumSamples(samples, "lockfleet_jobs_total",
                             {{"source", "kafka"}, {"result", result}});
}

long long TotalCommands(RedisClient& redis) {
  const Reply info = redis.Execute({"INFO", "commandstats"});
  long long total = 0;
  std::stringstream lines(info.str);
  for (std::string line; std::getline(lines, line);) {
    const size_t calls = line.find("calls=");
    if (line.rfind("cmdstat_", 0) != 0 || calls == std::string::npos) continue;
    if (line.rfind("cmdstat_info:", 0) == 0) continue;  // our own probes
    total += std::stoll(line.substr(calls + 6));
  }
  return total;
}

}  // namespace lockfleet::cli
