// End to end: a LockClient on a private redis-server feeds the metrics.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "exposition.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/redis_client.h"
#include "lockfleet/metrics/metrics.h"
#include "support/redis_server.h"

namespace lockfleet::metrics::testing {
namespace {

using std::chrono::milliseconds;

TEST(LockClientMetrics, AHoldAndAContendedTimeoutAreCounted) {
  lockfleet::testing::RedisServer server;
  RedisOptions redis;
  redis.url = server.url();
  Metrics metrics;
  LockClient locks(std::make_shared<RedisClient>(redis),
                   {.observer = metrics.lock_observer()});

  Lease held = locks.TryAcquire("orders:1").lease;
  ASSERT_TRUE(held.held());
  // Another owner waits briefly and gives up: contended, timed out.
  EXPECT_FALSE(
      locks.AcquireFor("orders:1", milliseconds(30), {.owner = "other"}));
  held.Release();

  const auto m = ParseExposition(metrics.Exposition());
  const LabelMatch orders = {{"lock_class", "orders"}};
  auto with = [&](const char* name, const char* value) {
    LabelMatch labels = orders;
    labels.emplace(name, value);
    return labels;
  };
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_acquisitions_total",
                    with("result", "acquired")),
            1);
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_acquisitions_total",
                    with("result", "timed_out")),
            1);
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_contended_total", orders), 1);
  EXPECT_GE(ValueIn(m, "lockfleet_lock_attempts_total", orders), 2);
  EXPECT_EQ(
      ValueIn(m, "lockfleet_lock_releases_total", with("result", "released")),
      1);
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_hold_seconds_count", orders), 1);
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_waiters"), 0);
}

}  // namespace
}  // namespace lockfleet::metrics::testing
