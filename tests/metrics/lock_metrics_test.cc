// Each LockObserver hook moves the right series by the right amount.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "exposition.h"
#include "lockfleet/lockcore/latch.h"
#include "lockfleet/lockcore/lease.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/rwlock.h"
#include "lockfleet/metrics/metrics.h"

namespace lockfleet::metrics::testing {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

LabelMatch Class(const char* lock_class) {
  return {{"lock_class", lock_class}};
}
LabelMatch Class(const char* lock_class, const char* name, const char* value) {
  return {{"lock_class", lock_class}, {name, value}};
}
// The series of the families every kind shares, for `kind`.
LabelMatch Kind(const char* kind, const char* lock_class) {
  return {{"kind", kind}, {"lock_class", lock_class}};
}
LabelMatch Kind(const char* kind, const char* lock_class, const char* name,
                const char* value) {
  return {{"kind", kind}, {"lock_class", lock_class}, {name, value}};
}
LabelMatch Lock(const char* lock_class) { return Kind("lock", lock_class); }
LabelMatch Lock(const char* lock_class, const char* name, const char* value) {
  return Kind("lock", lock_class, name, value);
}

class LockMetricsTest : public ::testing::Test {
 protected:
  Metrics metrics_;
  std::shared_ptr<LockObserver> observer_ = metrics_.lock_observer();
};

TEST_F(LockMetricsTest, AcquireCountsTheResultAttemptsAndContention) {
  observer_->OnAcquire("orders:1", AcquireStatus::kAcquired, milliseconds(3), 4,
                       true);
  EXPECT_EQ(Value(metrics_, "lockfleet_lock_acquisitions_total",
                  Lock("orders", "result", "acquired")),
            1);
  EXPECT_EQ(Value(metrics_, "lockfleet_lock_attempts_total", Class("orders")),
            4);
  EXPECT_EQ(Value(metrics_, "lockfleet_lock_contended_total", Class("orders")),
            1);
}

TEST_F(LockMetricsTest, AcquireObservesTheWaitInSeconds) {
  observer_->OnAcquire("orders:1", AcquireStatus::kAcquired, milliseconds(3), 1,
                       false);
  EXPECT_EQ(
      Value(metrics_, "lockfleet_lock_wait_seconds_count", Lock("orders")), 1);
  EXPECT_DOUBLE_EQ(
      Value(metrics_, "lockfleet_lock_wait_seconds_sum", Lock("orders")),
      0.003);
  EXPECT_EQ(Value(metrics_, "lockfleet_lock_wait_seconds_bucket",
                  Lock("orders", "le", "0.0025")),
            0);
  EXPECT_EQ(Value(metrics_, "lockfleet_lock_wait_seconds_bucket",
                  Lock("orders", "le", "0.005")),
            1);
}

TEST_F(LockMetricsTest, UncontendedAcquireLeavesContendedAtZero) {
  observer_->OnAcquire("orders:1", AcquireStatus::kAcquired, milliseconds(0), 1,
                       false);
  EXPECT_EQ(Value(metrics_, "lockfleet_lock_contended_total", Class("orders")),
            0);
}

TEST_F(LockMetricsTest, EachAcquireStatusCountsUnderItsOwnResult) {
  observer_->OnAcquire("a", AcquireStatus::kTimedOut, milliseconds(5), 2, true);
  observer_->OnAcquire("a", AcquireStatus::kCancelled, milliseconds(1), 1,
                       true);
  observer_->OnAcquire("a", AcquireStatus::kCancelled, milliseconds(1), 1,
                       true);
  const auto m = ParseExposition(metrics_.Exposition());
  const char* name = "lockfleet_lock_acquisitions_total";
  EXPECT_EQ(ValueIn(m, name, Lock("a", "result", "acquired")), 0);
  EXPECT_EQ(ValueIn(m, name, Lock("a", "result", "timed_out")), 1);
  EXPECT_EQ(ValueIn(m, name, Lock("a", "result", "cancelled")), 2);
}

TEST_F(LockMetricsTest, AClassStartsWithEveryResultCauseAndStatusAtZero) {
  observer_->OnLeaseLost("fresh:1");
  const auto m = ParseExposition(metrics_.Exposition());
  for (const char* result : {"acquired", "timed_out", "cancelled"}) {
    EXPECT_EQ(ValueIn(m, "lockfleet_lock_acquisitions_total",
                      Lock("fresh", "result", result)),
              0)
        << result;
  }
  for (const char* result :
       {"released", "still_held", "not_held", "not_owner"}) {
    EXPECT_EQ(ValueIn(m, "lockfleet_lock_releases_total",
                      Lock("fresh", "result", result)),
              0)
        << result;
  }
  for (const char* cause : {"local", "event", "bound", "spin"}) {
    EXPECT_EQ(ValueIn(m, "lockfleet_lock_wakeups_total",
                      Class("fresh", "cause", cause)),
              0)
        << cause;
  }
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_hold_seconds_count", Lock("fresh")), 0);
}

TEST_F(LockMetricsTest, ReleaseCountsTheResultAndObservesTheHold) {
  observer_->OnRelease("orders:1", ReleaseStatus::kReleased, milliseconds(40));
  observer_->OnRelease("orders:2", ReleaseStatus::kNotOwner, milliseconds(2));
  const auto m = ParseExposition(metrics_.Exposition());
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_releases_total",
                    Lock("orders", "result", "released")),
            1);
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_releases_total",
                    Lock("orders", "result", "not_owner")),
            1);
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_hold_seconds_count", Lock("orders")), 2);
  EXPECT_DOUBLE_EQ(
      ValueIn(m, "lockfleet_lock_hold_seconds_sum", Lock("orders")), 0.042);
}

TEST_F(LockMetricsTest, WakeupsCountByCause) {
  observer_->OnWakeup("orders:1", WakeCause::kEvent);
  observer_->OnWakeup("orders:1", WakeCause::kEvent);
  observer_->OnWakeup("orders:1", WakeCause::kBound);
  const auto m = ParseExposition(metrics_.Exposition());
  const char* name = "lockfleet_lock_wakeups_total";
  EXPECT_EQ(ValueIn(m, name, Class("orders", "cause", "event")), 2);
  EXPECT_EQ(ValueIn(m, name, Class("orders", "cause", "bound")), 1);
  EXPECT_EQ(ValueIn(m, name, Class("orders", "cause", "local")), 0);
  EXPECT_EQ(ValueIn(m, name, Class("orders", "cause", "spin")), 0);
}

TEST_F(LockMetricsTest, SpinChecksAndTheirWinsAreCounted) {
  observer_->OnSpin("orders:1");
  observer_->OnSpin("orders:1");
  observer_->OnWakeup("orders:1", WakeCause::kSpin);
  const auto m = ParseExposition(metrics_.Exposition());
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_spins_total", Class("orders")), 2);
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_wakeups_total",
                    Class("orders", "cause", "spin")),
            1);
}

TEST_F(LockMetricsTest, WaitingMovesTheWaitersGauge) {
  observer_->OnWaiting(+1);
  observer_->OnWaiting(+1);
  observer_->OnWaiting(-1);
  EXPECT_EQ(Value(metrics_, "lockfleet_lock_waiters"), 1);
}

TEST_F(LockMetricsTest, RenewalCountsRenewedLeasesAndFailedRoundTrips) {
  observer_->OnRenewal(5, false);
  observer_->OnRenewal(0, true);
  EXPECT_EQ(Value(metrics_, "lockfleet_lock_renewals_total"), 5);
  EXPECT_EQ(Value(metrics_, "lockfleet_lock_renewal_failures_total"), 1);
}

TEST_F(LockMetricsTest, LeaseLostCountsPerClass) {
  observer_->OnLeaseLost("orders:1");
  EXPECT_EQ(Value(metrics_, "lockfleet_lock_leases_lost_total", Lock("orders")),
            1);
}

// Every primitive counts in the same families, told apart by `kind`; a
// class of one kind does not create the series of another.
TEST_F(LockMetricsTest, EveryPrimitiveCountsInTheSharedFamiliesUnderItsKind) {
  observer_->OnPermitsAcquire("api:1", AcquireStatus::kAcquired,
                              milliseconds(3));
  observer_->OnPermitsRelease("api:1", ReleaseStatus::kReleased,
                              milliseconds(20));
  observer_->OnPermitsLost("api:2");
  observer_->OnRwAcquire("cat:1", RwMode::kRead, AcquireStatus::kAcquired,
                         milliseconds(1));
  observer_->OnRwAcquire("cat:1", RwMode::kWrite, AcquireStatus::kTimedOut,
                         milliseconds(9));
  observer_->OnRwRelease("cat:1", RwMode::kRead, ReleaseStatus::kNotHeld,
                         milliseconds(4));
  observer_->OnRwLost("cat:1", RwMode::kWrite);
  observer_->OnLatchAwait("merge:1", AwaitStatus::kOpened, milliseconds(7));
  observer_->OnLatchAwait("merge:1", AwaitStatus::kCancelled, milliseconds(1));
  observer_->OnMultiAcquire("stock:A", 2, AcquireStatus::kAcquired,
                            milliseconds(2));
  observer_->OnMultiRelease("stock:A", ReleaseStatus::kReleased,
                            milliseconds(30));
  const auto m = ParseExposition(metrics_.Exposition());
  const char* acquisitions = "lockfleet_lock_acquisitions_total";
  const char* releases = "lockfleet_lock_releases_total";
  EXPECT_EQ(
      ValueIn(m, acquisitions, Kind("semaphore", "api", "result", "acquired")),
      1);
  EXPECT_EQ(
      ValueIn(m, releases, Kind("semaphore", "api", "result", "released")), 1);
  EXPECT_EQ(
      ValueIn(m, "lockfleet_lock_leases_lost_total", Kind("semaphore", "api")),
      1);
  EXPECT_DOUBLE_EQ(
      ValueIn(m, "lockfleet_lock_hold_seconds_sum", Kind("semaphore", "api")),
      0.02);
  EXPECT_EQ(ValueIn(m, acquisitions,
                    Kind("rwlock_read", "cat", "result", "acquired")),
            1);
  EXPECT_EQ(ValueIn(m, acquisitions,
                    Kind("rwlock_write", "cat", "result", "timed_out")),
            1);
  EXPECT_EQ(
      ValueIn(m, releases, Kind("rwlock_read", "cat", "result", "not_held")),
      1);
  EXPECT_EQ(ValueIn(m, "lockfleet_lock_leases_lost_total",
                    Kind("rwlock_write", "cat")),
            1);
  EXPECT_EQ(
      ValueIn(m, acquisitions, Kind("latch", "merge", "result", "acquired")),
      1);
  EXPECT_EQ(
      ValueIn(m, acquisitions, Kind("latch", "merge", "result", "cancelled")),
      1);
  EXPECT_DOUBLE_EQ(
      ValueIn(m, "lockfleet_lock_wait_seconds_sum", Kind("latch", "merge")),
      0.008);
  EXPECT_EQ(ValueIn(m, acquisitions,
                    Kind("multilock", "stock", "result", "acquired")),
            1);
  EXPECT_EQ(
      ValueIn(m, releases, Kind("multilock", "stock", "result", "released")),
      1);
  // No kind="lock" series for classes only used by other kinds; a latch
  // has no holds, a permit set no still_held.
  EXPECT_TRUE(std::isnan(
      ValueIn(m, acquisitions, Kind("lock", "api", "result", "acquired"))));
  EXPECT_TRUE(std::isnan(
      ValueIn(m, "lockfleet_lock_hold_seconds_count", Kind("latch", "merge"))));
  EXPECT_TRUE(std::isnan(
      ValueIn(m, releases, Kind("semaphore", "api", "result", "still_held"))));
}

TEST_F(LockMetricsTest, LatchCountDownsCountByResult) {
  observer_->OnLatchCountDown("merge:1", CountDownStatus::kCounted);
  observer_->OnLatchCountDown("merge:1", CountDownStatus::kCounted);
  observer_->OnLatchCountDown("merge:1", CountDownStatus::kOpened);
  const auto m = ParseExposition(metrics_.Exposition());
  const char* name = "lockfleet_latch_count_downs_total";
  EXPECT_EQ(ValueIn(m, name, Class("merge", "result", "counted")), 2);
  EXPECT_EQ(ValueIn(m, name, Class("merge", "result", "opened")), 1);
  EXPECT_EQ(ValueIn(m, name, Class("merge", "result", "already_open")), 0);
  EXPECT_EQ(ValueIn(m, name, Class("merge", "result", "no_latch")), 0);
}

TEST_F(LockMetricsTest, ErrorsCountByCodeAndEveryCodeStartsAtZero) {
  EXPECT_EQ(Value(metrics_, "lockfleet_lock_errors_total",
                  {{"code", "redis_unavailable"}}),
            0);
  observer_->OnError(ErrorCode::kRedisTimeout);
  EXPECT_EQ(Value(metrics_, "lockfleet_lock_errors_total",
                  {{"code", "redis_timeout"}}),
            1);
}

TEST_F(LockMetricsTest, TheObserverOutlivesItsMetrics) {
  auto metrics = std::make_unique<Metrics>();
  auto observer = metrics->lock_observer();
  metrics.reset();
  observer->OnAcquire("a", AcquireStatus::kAcquired, microseconds(1), 1, false);
  observer->OnWaiting(+1);
}

TEST_F(LockMetricsTest, ConcurrentHooksAddUp) {
  constexpr int kThreads = 4, kPerThread = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        // Each thread also meets new classes while others scrape.
        const std::string name =
            "c" + std::to_string((t * kPerThread + i) % 50);
        observer_->OnAcquire(name, AcquireStatus::kAcquired, microseconds(i), 1,
                             false);
        if (i % 100 == 0) (void)metrics_.Exposition();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  const auto m = ParseExposition(metrics_.Exposition());
  EXPECT_EQ(SumSamples(m, "lockfleet_lock_acquisitions_total"),
            kThreads * kPerThread);
  EXPECT_EQ(SumSamples(m, "lockfleet_lock_wait_seconds_count"),
            kThreads * kPerThread);
}

}  // namespace
}  // namespace lockfleet::metrics::testing
