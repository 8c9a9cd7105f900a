// End to end: a LockClient on a private redis-server feeds the metrics.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string_view>

#include "exposition.h"
#include "lockfleet/lockcore/latch.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/multi_lock.h"
#include "lockfleet/lockcore/redis_client.h"
#include "lockfleet/lockcore/rwlock.h"
#include "lockfleet/lockcore/semaphore.h"
#include "lockfleet/metrics/metrics.h"
#include "support/redis_server.h"
#include "support/wait_until.h"

namespace lockfleet::metrics::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// The labels of the families every kind shares.
LabelMatch Kind(const char* kind, const char* lock_class,
                const char* result = nullptr) {
  LabelMatch l = {{"kind", kind}, {"lock_class", lock_class}};
  if (result != nullptr) l.emplace("result", result);
  return l;
}

// A LockClient on a private redis-server, observed by `metrics`.
class LockClientMetrics : public ::testing::Test {
 protected:
  lockfleet::testing::RedisServer server_;
  Metrics metrics;
  LockClient locks{
      std::make_shared<RedisClient>(RedisOptions{.url = server_.url()}),
      {.observer = metrics.lock_observer()}};
};

TEST_F(LockClientMetrics, AHoldAndAContendedTimeoutAreCounted) {
  Lease held = locks.TryAcquire("orders:1").lease;
  ASSERT_TRUE(held.held());
  // Another owner waits briefly and gives up: contended, timed out.
  EXPECT_FALSE(
      locks.AcquireFor("orders:1", milliseconds(30), {.owner = "other"}));
  held.Release();

  const auto m = ParseExposition(metrics.Exposition());
  const LabelMatch orders = {{"lock_class", "orders"}};
  const LabelMatch lock_orders = Kind("lock", "orders");
  auto with = [&](const char* name, const char* value) {
    LabelMatch labels = lock_orders;
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
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_hold_seconds_count", lock_orders), 1);
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_waiters"), 0);
}

TEST_F(LockClientMetrics, SemaphorePermitsAreCountedPerClass) {
  Semaphore api = locks.Semaphore("partner:api");
  api.SetPermits(3);
  PermitResult two = api.TryAcquire(2);
  ASSERT_TRUE(two);
  EXPECT_FALSE(api.AcquireFor(2, milliseconds(30)));  // 1 free: times out
  const LabelMatch partner = {{"semaphore_class", "partner"}};
  auto with = [&](const char* value) {
    return Kind("semaphore", "partner", value);
  };
  auto m = ParseExposition(metrics.Exposition());
  EXPECT_EQ(ValueIn(m, "lockfleet_semaphore_permits_held", partner), 2);
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_acquisitions_total", with("acquired")),
            1);
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_acquisitions_total", with("timed_out")),
            1);
  // Released by its id: this client's holder has lost it.
  PermitResult one = api.TryAcquire(1);
  ASSERT_TRUE(one);
  EXPECT_EQ(api.Release(one.permits.id()), ReleaseStatus::kReleased);
  EXPECT_EQ(one.permits.Release(), ReleaseStatus::kNotHeld);
  EXPECT_EQ(two.permits.Release(), ReleaseStatus::kReleased);
  m = ParseExposition(metrics.Exposition());
  EXPECT_EQ(ValueIn(m, "lockfleet_semaphore_permits_held", partner), 0)
      << "a lost set is not taken off twice";
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_leases_lost_total",
                    Kind("semaphore", "partner")),
            1);
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_releases_total", with("released")), 1);
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_releases_total", with("not_held")), 1);
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_hold_seconds_count",
                    Kind("semaphore", "partner")),
            2);
  EXPECT_FALSE(ValueIn(m, "lockfleet_lock_leases_lost_total",
                       Kind("lock", "partner")) > 0)
      << "a permit set is no lock";
}

TEST_F(LockClientMetrics, ReadWriteLockHoldsAreCountedPerClassAndMode) {
  ReadWriteLock catalogue = locks.ReadWriteLock("catalogue:eu");
  auto labels = [](const char* mode) -> LabelMatch {
    return {{"rwlock_class", "catalogue"}, {"mode", mode}};
  };
  auto kind = [](const char* mode, const char* result = nullptr) {
    return Kind(
        std::string_view(mode) == "read" ? "rwlock_read" : "rwlock_write",
        "catalogue", result);
  };
  RwResult r1 = catalogue.TryAcquire(RwMode::kRead);
  RwResult r2 = catalogue.TryAcquire(RwMode::kRead, {.owner = "other"});
  ASSERT_TRUE(r1);
  ASSERT_TRUE(r2);
  EXPECT_FALSE(catalogue.AcquireFor(RwMode::kWrite, milliseconds(30),
                                    {.owner = "writer"}));
  auto m = ParseExposition(metrics.Exposition());
  EXPECT_EQ(ValueIn(m, "lockfleet_rwlock_holds", labels("read")), 2);
  EXPECT_EQ(ValueIn(m, "lockfleet_rwlock_holds", labels("write")), 0);
  EXPECT_EQ(
      ValueIn(m, "lockfleet_lock_acquisitions_total", kind("read", "acquired")),
      2);
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_acquisitions_total",
                    kind("write", "timed_out")),
            1);
  r1.lease.Release();
  r2.lease.Release();
  RwResult w = catalogue.TryAcquire(RwMode::kWrite, {.lease = seconds(1)});
  ASSERT_TRUE(w);
  EXPECT_EQ(Value(metrics, "lockfleet_rwlock_holds", labels("write")), 1);
  // Its explicit lease runs out (on the server too): lost, off the gauge
  // once.
  ASSERT_TRUE(lockfleet::testing::WaitUntil(
      [&] { return w.lease.lost() && catalogue.Inspect().holders.empty(); }));
  EXPECT_EQ(w.lease.Release(), ReleaseStatus::kNotHeld);
  m = ParseExposition(metrics.Exposition());
  EXPECT_EQ(ValueIn(m, "lockfleet_rwlock_holds", labels("read")), 0);
  EXPECT_EQ(ValueIn(m, "lockfleet_rwlock_holds", labels("write")), 0);
  EXPECT_EQ(
      ValueIn(m, "lockfleet_lock_releases_total", kind("read", "released")), 2);
  EXPECT_EQ(
      ValueIn(m, "lockfleet_lock_releases_total", kind("write", "not_held")),
      1);
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_hold_seconds_count", kind("read")), 2);
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_leases_lost_total", kind("write")), 1);
  EXPECT_FALSE(ValueIn(m, "lockfleet_semaphore_permits_held",
                       {{"semaphore_class", "catalogue"}}) > 0)
      << "a read-write lock is no semaphore";
}

TEST_F(LockClientMetrics, LatchAwaitsAndCountDownsAreCounted) {
  CountDownLatch merge = locks.Latch("merge:nightly");
  EXPECT_EQ(merge.AwaitFor(milliseconds(20)), AwaitStatus::kTimedOut)
      << "not set: not open";
  ASSERT_TRUE(merge.TrySetCount(2));
  EXPECT_EQ(merge.CountDown("shard-1").status, CountDownStatus::kCounted);
  EXPECT_EQ(merge.CountDown("shard-2").status, CountDownStatus::kOpened);
  EXPECT_EQ(merge.CountDown("shard-3").status, CountDownStatus::kAlreadyOpen);
  EXPECT_EQ(merge.AwaitFor(seconds(5)), AwaitStatus::kOpened);
  const auto m = ParseExposition(metrics.Exposition());
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_acquisitions_total",
                    Kind("latch", "merge", "acquired")),
            1);
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_acquisitions_total",
                    Kind("latch", "merge", "timed_out")),
            1);
  EXPECT_EQ(
      ValueIn(m, "lockfleet_lock_wait_seconds_count", Kind("latch", "merge")),
      2);
  auto downs = [&](const char* result) {
    return ValueIn(m, "lockfleet_latch_count_downs_total",
                   {{"lock_class", "merge"}, {"result", result}});
  };
  EXPECT_EQ(downs("counted"), 1);
  EXPECT_EQ(downs("opened"), 1);
  EXPECT_EQ(downs("already_open"), 1);
  EXPECT_EQ(downs("no_latch"), 0);
}

// A multi-lock counts once as a whole (by the class of its first name in
// canonical order) and each of its locks as a lock.
TEST_F(LockClientMetrics, AMultiLockCountsAsAWholeAndItsLocksAsLocks) {
  {
    AcquireAllResult both = locks.TryAcquireAll({"stock:B", "stock:A"});
    ASSERT_TRUE(both);
  }  // released together
  Lease b = locks.TryAcquire("stock:B", {.owner = "other"}).lease;
  ASSERT_TRUE(b.held());
  EXPECT_FALSE(locks.AcquireAllFor({"stock:A", "stock:B"}, milliseconds(30)));
  const auto m = ParseExposition(metrics.Exposition());
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_acquisitions_total",
                    Kind("multilock", "stock", "acquired")),
            1);
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_acquisitions_total",
                    Kind("multilock", "stock", "timed_out")),
            1);
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_releases_total",
                    Kind("multilock", "stock", "released")),
            1);
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_hold_seconds_count",
                    Kind("multilock", "stock")),
            1);
  // Its locks: A and B, then A again and B timing out (A given back), and
  // the other owner's B.
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_acquisitions_total",
                    Kind("lock", "stock", "acquired")),
            4);
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_acquisitions_total",
                    Kind("lock", "stock", "timed_out")),
            1);
}

// The held gauge never drifts: not when a release fails (Redis gone: the
// set runs out by itself), not when the LockClient goes with sets held.
TEST_F(LockClientMetrics, ThePermitsHeldGaugeSurvivesFailuresAndTheClientsEnd) {
  const LabelMatch pool = {{"semaphore_class", "pool"}};
  auto other = std::make_unique<LockClient>(
      std::make_shared<RedisClient>(RedisOptions{.url = server_.url()}),
      LockClientOptions{.observer = metrics.lock_observer()});
  other->Semaphore("pool").SetPermits(5);
  PermitResult kept = other->Semaphore("pool").TryAcquire(2);
  ASSERT_TRUE(kept);
  EXPECT_EQ(Value(metrics, "lockfleet_semaphore_permits_held", pool), 2);
  other.reset();  // with `kept` out: the client's end counts the set lost
  EXPECT_EQ(Value(metrics, "lockfleet_semaphore_permits_held", pool), 0);
  kept.permits.Release();  // no second decrement
  EXPECT_EQ(Value(metrics, "lockfleet_semaphore_permits_held", pool), 0);

  PermitResult held = locks.Semaphore("pool").TryAcquire(1);
  ASSERT_TRUE(held);
  EXPECT_EQ(Value(metrics, "lockfleet_semaphore_permits_held", pool), 1);
  server_.Stop();
  EXPECT_THROW(held.permits.Release(), Error);
  EXPECT_EQ(Value(metrics, "lockfleet_semaphore_permits_held", pool), 0)
      << "a failed release still ends the hold here";
}

}  // namespace
}  // namespace lockfleet::metrics::testing
