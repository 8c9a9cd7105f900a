// Test helpers for `lockfleet worker` processes, shared by the worker CLI
// tests (tests/cli/worker_test.cc) and the worker chaos scenarios
// (tests/chaos/worker_fleet.h).
//
// Thread-safety: none; one test thread uses them.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cli/cli_process.h"
#include "lockfleet/metrics/scrape.h"

namespace lockfleet::testing {

// Starts `lockfleet worker --config config --id id` and waits up to
// `timeout` for its ready line (or its exit). A worker that did not print
// "ready worker=<id>" is a non-fatal test failure (its stderr shown); it is
// returned all the same.
std::unique_ptr<CliProcess> StartWorker(
    const std::string& config, const std::string& id,
    std::chrono::milliseconds timeout = std::chrono::seconds(60));

// The port of the worker's /metrics, from its ready line (0 if it printed
// none).
uint16_t WorkerMetricsPort(CliProcess& worker);

// The worker's samples from its /metrics (empty if it printed no metrics URL
// or did not answer 200).
std::vector<metrics::Sample> ScrapeWorker(CliProcess& worker);

}  // namespace lockfleet::testing
