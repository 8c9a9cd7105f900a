// End to end: a LockClient on a private redis-server feeds the metrics.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "exposition.h"
#include "lockfleet/lockcore/lock_client.h"
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

TEST_F(LockClientMetrics, SemaphorePermitsAreCountedPerClass) {
  Semaphore api = locks.Semaphore("partner:api");
  api.SetPermits(3);
  PermitResult two = api.TryAcquire(2);
  ASSERT_TRUE(two);
  EXPECT_FALSE(api.AcquireFor(2, milliseconds(30)));  // 1 free: times out
  const LabelMatch partner = {{"semaphore_class", "partner"}};
  auto with = [&](const char* value) {
    LabelMatch labels = partner;
    labels.emplace("result", value);
    return labels;
  };
  auto m = ParseExposition(metrics.Exposition());
  EXPECT_EQ(ValueIn(m, "lockfleet_semaphore_permits_held", partner), 2);
  EXPECT_EQ(
      ValueIn(m, "lockfleet_semaphore_acquisitions_total", with("acquired")),
      1);
  EXPECT_EQ(
      ValueIn(m, "lockfleet_semaphore_acquisitions_total", with("timed_out")),
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
  EXPECT_EQ(ValueIn(m, "lockfleet_semaphore_permits_lost_total", partner), 1);
  EXPECT_EQ(ValueIn(m, "lockfleet_semaphore_releases_total", with("released")),
            1);
  EXPECT_EQ(ValueIn(m, "lockfleet_semaphore_releases_total", with("not_held")),
            1);
  EXPECT_EQ(ValueIn(m, "lockfleet_semaphore_hold_seconds_count", partner), 2);
  EXPECT_FALSE(ValueIn(m, "lockfleet_lock_leases_lost_total",
                       {{"lock_class", "partner"}}) > 0)
      << "a permit set is no lock";
}

TEST_F(LockClientMetrics, ReadWriteLockHoldsAreCountedPerClassAndMode) {
  ReadWriteLock catalogue = locks.ReadWriteLock("catalogue:eu");
  auto labels = [](const char* mode, const char* result = nullptr) {
    LabelMatch l = {{"rwlock_class", "catalogue"}, {"mode", mode}};
    if (result != nullptr) l.emplace("result", result);
    return l;
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
  EXPECT_EQ(ValueIn(m, "lockfleet_rwlock_acquisitions_total",
                    labels("read", "acquired")),
            2);
  EXPECT_EQ(ValueIn(m, "lockfleet_rwlock_acquisitions_total",
                    labels("write", "timed_out")),
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
      ValueIn(m, "lockfleet_rwlock_releases_total", labels("read", "released")),
      2);
  EXPECT_EQ(ValueIn(m, "lockfleet_rwlock_releases_total",
                    labels("write", "not_held")),
            1);
  EXPECT_EQ(ValueIn(m, "lockfleet_rwlock_hold_seconds_count", labels("read")),
            2);
  EXPECT_FALSE(ValueIn(m, "lockfleet_semaphore_permits_held",
                       {{"semaphore_class", "catalogue"}}) > 0)
      << "a read-write lock is no semaphore";
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
