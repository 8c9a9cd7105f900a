// http_abuse: measures how long health probes and scrapes take while idle
// and slow clients hold connections to the server.
//
//   http_abuse [--idle N] [--slow M] [--seconds S] [--timeout T]
//              [--port PORT]
//
// Without --port it starts a HealthServer (its check always healthy) and a
// MetricsServer on loopback in this process, abuses both, and probes
// /livez, /readyz, /healthz and /metrics every 100 ms (each probe with a
// timeout of T s, default 30) for S seconds. With --port it abuses and probes
// 127.0.0.1:PORT (its /healthz only). Prints per path: probes, answered
// (any status), max and median latency, and the longest stretch without an
// answer.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "abusive_clients.h"
#include "lockfleet/metrics/http.h"
#include "lockfleet/metrics/metrics.h"

namespace lockfleet::metrics::testing {
namespace {

using Clock = std::chrono::steady_clock;

struct Target {
  uint16_t port;
  std::string path;
};

struct Tally {
  int probes = 0;
  int answered = 0;
  std::vector<double> latencies;  // s, answered probes
  double worst_gap = 0;           // s without an answer
  Clock::time_point last_answer;
};

int Main(int argc, char** argv) {
  int idle = 64, slow = 8, seconds = 30, port = 0, timeout = 30;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (flag == "--idle") idle = value;
    if (flag == "--slow") slow = value;
    if (flag == "--seconds") seconds = value;
    if (flag == "--port") port = value;
    if (flag == "--timeout") timeout = value;
  }
  std::unique_ptr<HealthServer> health;
  std::unique_ptr<MetricsServer> scrape;
  std::vector<Target> targets;
  if (port == 0) {
    health = std::make_unique<HealthServer>(
        [] {
          return HealthReport{true, "ok\n"};
        },
        "127.0.0.1:0");
    scrape = std::make_unique<MetricsServer>(std::make_shared<Metrics>(),
                                             "127.0.0.1:0");
    targets = {{health->port(), "/livez"},
               {health->port(), "/readyz"},
               {health->port(), "/healthz"},
               {scrape->port(), "/metrics"}};
  } else {
    targets = {{static_cast<uint16_t>(port), "/healthz"}};
  }
  std::vector<std::unique_ptr<AbusiveClients>> abusers;
  std::vector<uint16_t> ports;
  for (const Target& t : targets) {
    if (std::find(ports.begin(), ports.end(), t.port) != ports.end()) continue;
    ports.push_back(t.port);
    abusers.push_back(std::make_unique<AbusiveClients>(t.port, idle, slow));
  }
  for (auto& a : abusers) a->WaitConnected(std::chrono::seconds(10));
  std::printf("%d idle + %d slow clients per port, probing for %d s\n", idle,
              slow, seconds);

  std::map<std::string, Tally> tallies;
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> probers;
  std::mutex mu;
  for (const Target& t : targets) {
    tallies[t.path].last_answer = start;
    probers.emplace_back([&, t] {
      while (Clock::now() - start < std::chrono::seconds(seconds)) {
        const Clock::time_point sent = Clock::now();
        const HttpResponse r =
            HttpGet("127.0.0.1", t.port, t.path, std::chrono::seconds(timeout));
        const Clock::time_point got = Clock::now();
        {
          std::lock_guard<std::mutex> lock(mu);
          Tally& tally = tallies[t.path];
          ++tally.probes;
          // Time since the last answer (or the start), this probe included.
          tally.worst_gap = std::max(
              tally.worst_gap,
              std::chrono::duration<double>(got - tally.last_answer).count());
          if (r.status != 0) {
            ++tally.answered;
            tally.latencies.push_back(
                std::chrono::duration<double>(got - sent).count());
            tally.last_answer = got;
          }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
  }
  for (auto& p : probers) p.join();
  for (auto& [path, tally] : tallies) {
    std::sort(tally.latencies.begin(), tally.latencies.end());
    const double max = tally.latencies.empty() ? 0 : tally.latencies.back();
    const double median = tally.latencies.empty()
                              ? 0
                              : tally.latencies[tally.latencies.size() / 2];
    std::printf(
        "%-9s probes %4d answered %4d  max %7.3f s  median %7.3f s  "
        "longest without an answer %7.3f s\n",
        path.c_str(), tally.probes, tally.answered, max, median,
        tally.worst_gap);
  }
  int closed = 0;
  for (auto& a : abusers) closed += a->closed_by_server();
  std::printf("abusive connections closed by the server: %d\n", closed);
  return 0;
}

}  // namespace
}  // namespace lockfleet::metrics::testing

int main(int argc, char** argv) {
  return lockfleet::metrics::testing::Main(argc, argv);
}
