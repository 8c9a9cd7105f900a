// Helpers of `lockfleet demo` (demo_command.cc): finding programs, reading
// its workers' `ready` lines and scraping their /metrics, reading Redis's
// command counters, formatting.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "lockfleet/lockcore/redis_client.h"
#include "lockfleet/metrics/scrape.h"

namespace lockfleet::cli {

// The executable `name` on PATH ("" if none). For "redis-server",
// $LOCKFLEET_REDIS_SERVER wins when set.
std::string FindOnPath(const std::string& name);

// This process's executable (/proc/self/exe); "" if unknown.
std::string SelfExe();

// The last `max_lines` lines of `file`, indented, for error messages.
std::string Tail(const std::filesystem::path& file, size_t max_lines = 20);

// "1.23 ms" (or "n/a" for NaN) from seconds.
std::string Ms(double seconds);

// A worker's /metrics address.
struct Endpoint {
  std::string host;
  uint16_t port = 0;
  std::string url;
};

// From a worker's "ready worker=ID metrics=http://HOST:PORT/metrics ..."
// line; std::nullopt if it serves no metrics or the line is not that.
std::optional<Endpoint> ParseMetricsUrl(const std::string& ready_line);

// Every worker's samples, concatenated, so sums are fleet-wide. A worker
// that does not answer within 2 s is left out.
std::vector<metrics::Sample> ScrapeAll(const std::vector<Endpoint>& endpoints);

// lockfleet_jobs_total{source="kafka",result=...} summed.
double Jobs(const std::vector<metrics::Sample>& samples, const char* result);

// Commands Redis has executed (INFO commandstats, scripts' own commands
// included; INFO itself left out).
long long TotalCommands(RedisClient& redis);

}  // namespace lockfleet::cli
