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
#include "metrics_targets.h"

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

// From a worker's "ready worker=ID metrics=http://HOST:PORT/metrics ..."
// line; std::nullopt if it serves no metrics or the line is not that.
std::optional<Endpoint> ParseMetricsUrl(const std::string& ready_line);

// A running demo registers its config (with the workers' metrics.targets)
// so that `lockfleet top` and `lockfleet jobs` run without --config or
// --redis find it: "<pid>\n<config path>\n" in the file
// DemoRegistryPath(), $XDG_RUNTIME_DIR/lockfleet-demo (else
// /tmp/lockfleet-demo-<uid>), mode 0600.
std::filesystem::path DemoRegistryPath();
// Registers this process's demo (replacing any other). Returns false when
// the file cannot be written; the demo runs on without it.
bool RegisterDemo(const std::filesystem::path& config);
// Removes the registration if it is this process's.
void UnregisterDemo();
// The config of the registered demo if its process is alive and both the
// registration and the config are regular files of this user's (not
// symlinks, not FIFOs: nothing here blocks); std::nullopt otherwise.
std::optional<std::filesystem::path> FindRunningDemo();

// lockfleet_jobs_total{source="kafka",result=...} summed.
double Jobs(const std::vector<metrics::Sample>& samples, const char* result);

// Commands Redis has executed (INFO commandstats, scripts' own commands
// included; INFO itself left out).
long long TotalCommands(RedisClient& redis);

}  // namespace lockfleet::cli
