// The workers' /metrics endpoints that the tools watching a fleet scrape
// (`lockfleet top`, `lockfleet jobs status`, the demo's summary): from
// --metrics HOST:PORT (repeatable), else the config's metrics.targets.
//
// Thread-safety: ScrapeEach and ScrapeAll may be called from any thread;
// the rest is used while the command line is handled.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lockfleet/config/config.h"
#include "lockfleet/metrics/scrape.h"

namespace lockfleet::cli {

// A worker's /metrics address.
struct Endpoint {
  std::string host;  // without brackets for IPv6
  uint16_t port = 0;
  std::string address;  // "HOST:PORT" ("[IPV6]:PORT"), as given
  std::string url;      // "http://HOST:PORT/metrics"
};

// "HOST:PORT" or "[IPV6]:PORT" (port 1..65535); std::nullopt otherwise.
std::optional<Endpoint> ParseTarget(std::string_view text);

struct TargetArgs {
  std::vector<std::string> targets;
  CLI::Option* option = nullptr;
};

// Declares --metrics HOST:PORT (repeatable).
void AddTargetOption(CLI::App& app, TargetArgs& args);

// --metrics when given, else `config`'s metrics.targets, else none. Throws
// UsageError naming a malformed --metrics value.
std::vector<Endpoint> ResolveTargets(
    const TargetArgs& args, const std::optional<config::Config>& config);

// One endpoint's scrape: ok with its samples, or the reason it failed.
struct Scrape {
  bool ok = false;
  std::string error;  // "connection refused", "HTTP 500", "line 3: ..."
  std::vector<metrics::Sample> samples;
};

// Scrapes every endpoint concurrently, each within `timeout`; the results in
// the order of `endpoints`. Never throws for an endpoint's failure.
std::vector<Scrape> ScrapeEach(const std::vector<Endpoint>& endpoints,
                               std::chrono::milliseconds timeout);

// Every answering endpoint's samples, concatenated, so sums are fleet-wide;
// an endpoint that does not answer within 2 s is left out.
std::vector<metrics::Sample> ScrapeAll(const std::vector<Endpoint>& endpoints);

}  // namespace lockfleet::cli
