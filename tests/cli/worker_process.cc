#include "cli/worker_process.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "lockfleet/metrics/http.h"
#include "support/wait_until.h"

namespace lockfleet::testing {

std::unique_ptr<CliProcess> StartWorker(const std::string& config,
                                        const std::string& id,
                                        std::chrono::milliseconds timeout) {
  auto worker = std::make_unique<CliProcess>(
      std::vector<std::string>{"worker", "--config", config, "--id", id});
  EXPECT_TRUE(WaitUntil(
      [&] {
        return worker->Stdout().find("ready ") != std::string::npos ||
               !worker->Running();
      },
      timeout));
  EXPECT_NE(worker->Stdout().find("ready worker=" + id), std::string::npos)
      << worker->Stderr();
  return worker;
}

uint16_t WorkerMetricsPort(CliProcess& worker) {
  const std::string out = worker.Stdout();
  const size_t at = out.find("metrics=http://127.0.0.1:");
  if (at == std::string::npos) return 0;
  return static_cast<uint16_t>(std::stoi(out.substr(at + 25)));
}

std::vector<metrics::Sample> ScrapeWorker(CliProcess& worker) {
  const uint16_t port = WorkerMetricsPort(worker);
  if (port == 0) return {};
  const metrics::HttpResponse response =
      metrics::HttpGet("127.0.0.1", port, "/metrics", std::chrono::seconds(5));
  if (response.status != 200) return {};
  return metrics::ParseExposition(response.body);
}

}  // namespace lockfleet::testing
