// Idle, slow and numerous clients cannot starve /livez, /readyz, /healthz
// or /metrics; /livez runs no check.
//
// The latency bound (2 s per probe) is a behaviour check, not a speed
// target: a server that serves one connection per thread needs ten seconds
// or more per probe here (the old one: 2 threads, 10 s request timeout).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "abusive_clients.h"
#include "lockfleet/metrics/http.h"
#include "lockfleet/metrics/metrics.h"

namespace lockfleet::metrics::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

constexpr auto kProbeBound = seconds(2);
constexpr auto kProbeTimeout = seconds(4);  // fail fast on a starved server
constexpr auto kProbing = seconds(3);

// Probes `paths` on `port` in turn for kProbing; every probe must be
// answered with 200 within kProbeBound. With `shed` (more clients than the
// server keeps), a probe whose connection is shed before its request was
// read may fail at the connection level — what a kubelet's failureThreshold
// (3 by default, deploy/kubernetes) absorbs — but never two in a row, never
// with another status, and not more than one probe in ten.
void ProbeRepeatedly(uint16_t port, const std::vector<std::string>& paths,
                     bool shed = false) {
  const Clock::time_point start = Clock::now();
  int probes = 0;
  int shed_probes = 0;
  bool last_shed = false;
  while (Clock::now() - start < kProbing) {
    for (const std::string& path : paths) {
      const Clock::time_point sent = Clock::now();
      const HttpResponse r = HttpGet("127.0.0.1", port, path, kProbeTimeout);
      const auto took = Clock::now() - sent;
      ++probes;
      if (shed && r.status == 0 && !last_shed) {
        last_shed = true;
        ++shed_probes;
        continue;
      }
      last_shed = false;
      ASSERT_EQ(r.status, 200)
          << path << " probe " << probes << ": " << r.error;
      ASSERT_LT(took, kProbeBound)
          << path << " probe " << probes << " took "
          << std::chrono::duration<double>(took).count() << " s";
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_GT(probes, 10);
  EXPECT_LE(shed_probes * 10, probes)
      << shed_probes << " of " << probes << " probes shed";
}

TEST(HealthAbuse, ProbesAreAnsweredWhileIdleAndSlowClientsHoldConnections) {
  HealthServer server([] { return HealthReport{true, "ok\n"}; }, "127.0.0.1:0");
  AbusiveClients abusers(server.port(), /*idle=*/64, /*slow=*/8);
  ASSERT_TRUE(abusers.WaitConnected(seconds(10)));
  ProbeRepeatedly(server.port(), {"/livez", "/readyz", "/healthz"});
}

TEST(HealthAbuse, ScrapesAreAnsweredWhileIdleAndSlowClientsHoldConnections) {
  auto metrics = std::make_shared<Metrics>();
  MetricsServer server(metrics, "127.0.0.1:0");
  AbusiveClients abusers(server.port(), /*idle=*/64, /*slow=*/8);
  ASSERT_TRUE(abusers.WaitConnected(seconds(10)));
  ProbeRepeatedly(server.port(), {"/metrics"});
}

TEST(HealthAbuse, ProbesAreAnsweredWithMoreClientsThanTheServerKeeps) {
  // More connections than the server holds open: it drops the oldest idle
  // ones to make room, so a probe (which sends its request at once) gets in.
  HealthServer server([] { return HealthReport{true, "ok\n"}; }, "127.0.0.1:0");
  AbusiveClients abusers(server.port(), /*idle=*/300, /*slow=*/8);
  ASSERT_TRUE(abusers.WaitConnected(seconds(10)));
  ProbeRepeatedly(server.port(), {"/livez", "/readyz"}, /*shed=*/true);
}

TEST(HealthSplit, LivezRunsNoCheckReadyzAndHealthzDo) {
  std::atomic<int> checks{0};
  HealthServer server(
      [&] {
        ++checks;
        return HealthReport{false, "redis unreachable\n"};
      },
      "127.0.0.1:0");
  const HttpResponse live =
      HttpGet("127.0.0.1", server.port(), "/livez", seconds(10));
  EXPECT_EQ(live.status, 200) << live.error;
  EXPECT_EQ(live.body, "ok\n");
  EXPECT_EQ(checks.load(), 0);
  for (const char* path : {"/readyz", "/healthz"}) {
    const HttpResponse r =
        HttpGet("127.0.0.1", server.port(), path, seconds(10));
    EXPECT_EQ(r.status, 503) << path << ": " << r.error;
    EXPECT_EQ(r.body, "redis unreachable\n") << path;
  }
  EXPECT_EQ(checks.load(), 2);
  EXPECT_EQ(server.url(),
            "http://127.0.0.1:" + std::to_string(server.port()) + "/healthz");
}

TEST(HealthSplit, LivezAnswersWhileReadinessChecksHang) {
  // Readiness checks stuck on a dependency (say a Redis PING that waits for
  // its timeout) must not hold up the liveness answer.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  HealthServer server(
      [released] {
        released.wait_for(seconds(20));
        return HealthReport{true, "ok\n"};
      },
      "127.0.0.1:0");
  std::vector<std::future<HttpResponse>> stuck;
  for (int i = 0; i < 4; ++i) {
    stuck.push_back(std::async(std::launch::async, [&] {
      return HttpGet("127.0.0.1", server.port(), "/readyz", seconds(30));
    }));
  }
  std::this_thread::sleep_for(milliseconds(200));
  for (int i = 0; i < 5; ++i) {
    const Clock::time_point sent = Clock::now();
    const HttpResponse r =
        HttpGet("127.0.0.1", server.port(), "/livez", kProbeTimeout);
    EXPECT_EQ(r.status, 200) << r.error;
    EXPECT_LT(Clock::now() - sent, kProbeBound);
  }
  release.set_value();
  for (auto& f : stuck) EXPECT_EQ(f.get().status, 200);
}

TEST(HealthSplit, UnknownPathsAre404AndQueriesAreIgnored) {
  HealthServer server([] { return HealthReport{true, "ok\n"}; }, "127.0.0.1:0");
  EXPECT_EQ(HttpGet("127.0.0.1", server.port(), "/", seconds(10)).status, 404);
  EXPECT_EQ(
      HttpGet("127.0.0.1", server.port(), "/livez?verbose", seconds(10)).status,
      200);
}

}  // namespace
}  // namespace lockfleet::metrics::testing
