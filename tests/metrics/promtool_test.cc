// The exposition passes Prometheus's own linter: promtool check metrics.
#include "support/promtool.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "exposition.h"
#include "lockfleet/lockcore/latch.h"
#include "lockfleet/lockcore/lease.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/rwlock.h"
#include "lockfleet/metrics/metrics.h"
#include "lockfleet/worker/observer.h"

namespace lockfleet::metrics::testing {
namespace {

using std::chrono::milliseconds;

// promtool's path, from $PATH.
// Every family, each with at least one sample.
void Populate(Metrics& m) {
  auto locks = m.lock_observer();
  locks->OnAcquire("orders:1", AcquireStatus::kAcquired, milliseconds(2), 2,
                   true);
  locks->OnAcquire("orders:2", AcquireStatus::kTimedOut, milliseconds(900), 5,
                   true);
  locks->OnRelease("orders:1", ReleaseStatus::kReleased, milliseconds(12));
  locks->OnWakeup("orders:2", WakeCause::kEvent);
  locks->OnWaiting(+1);
  locks->OnRenewal(3, false);
  locks->OnRenewal(0, true);
  locks->OnLeaseLost("orders:3");
  locks->OnSpin("orders:2");
  locks->OnError(ErrorCode::kRedisTimeout);
  // A label value that needs escaping.
  locks->OnAcquire("we\"ird\\name", AcquireStatus::kAcquired, milliseconds(1),
                   1, false);
  locks->OnPermitsAcquire("api:1", AcquireStatus::kAcquired, milliseconds(3));
  locks->OnPermitsHeld("api:1", 2);
  locks->OnPermitsRelease("api:1", ReleaseStatus::kReleased, milliseconds(9));
  locks->OnPermitsLost("api:2");
  locks->OnRwAcquire("cat:1", RwMode::kRead, AcquireStatus::kAcquired,
                     milliseconds(2));
  locks->OnRwHeld("cat:1", RwMode::kRead, 1);
  locks->OnRwRelease("cat:1", RwMode::kWrite, ReleaseStatus::kReleased,
                     milliseconds(7));
  locks->OnRwLost("cat:2", RwMode::kWrite);
  locks->OnLatchAwait("merge:1", AwaitStatus::kOpened, milliseconds(40));
  locks->OnLatchCountDown("merge:1", CountDownStatus::kOpened);
  locks->OnMultiAcquire("stock:A", 2, AcquireStatus::kAcquired,
                        milliseconds(1));
  locks->OnMultiRelease("stock:A", ReleaseStatus::kReleased, milliseconds(5));

  auto jobs = m.worker_observer();
  jobs->OnJob(worker::JobSource::kKafka, "reserve", worker::JobResult::kOk,
              milliseconds(40));
  jobs->OnRunning(+1);
  jobs->OnConsumerLag(17);
  jobs->OnLimitSampled("partner:eu", 2, 1, 3);

  m.ObserveNotificationDelay(std::chrono::microseconds(1200));
  m.AddNotifierStats([] {
    notifier::NotifierStats s;
    s.published = 5;
    s.publish_dropped = 1;
    s.delivered = 4;
    s.consumed = 9;
    s.malformed_by_reason = {{"not_json", 1}};
    s.consumer_errors = 2;
    s.assigned = true;
    s.partitions = 3;
    s.fetched_partitions = 3;
    s.partition_assigns = 1;
    return s;
  });
}

TEST(Promtool, APopulatedExpositionHasEveryFamily) {
  Metrics m;
  Populate(m);
  const auto samples = ParseExposition(m.Exposition());
  for (const char* name : {
           "lockfleet_lock_acquisitions_total",
           "lockfleet_lock_attempts_total",
           "lockfleet_lock_contended_total",
           "lockfleet_lock_wait_seconds_count",
           "lockfleet_lock_hold_seconds_count",
           "lockfleet_lock_releases_total",
           "lockfleet_lock_waiters",
           "lockfleet_lock_wakeups_total",
           "lockfleet_lock_renewals_total",
           "lockfleet_lock_renewal_failures_total",
           "lockfleet_lock_leases_lost_total",
           "lockfleet_lock_spins_total",
           "lockfleet_lock_errors_total",
           "lockfleet_semaphore_permits_held",
           "lockfleet_rwlock_holds",
           "lockfleet_latch_count_downs_total",
           "lockfleet_semaphore_permits_in_use",
           "lockfleet_semaphore_permits_available",
           "lockfleet_semaphore_waiters",
           "lockfleet_unlock_events_published_total",
           "lockfleet_unlock_events_delivered_total",
           "lockfleet_unlock_events_publish_failures_total",
           "lockfleet_unlock_events_consumed_total",
           "lockfleet_unlock_events_malformed_total",
           "lockfleet_kafka_errors_total",
           "lockfleet_kafka_consumer_assigned",
           "lockfleet_kafka_consumer_partitions",
           "lockfleet_kafka_consumer_partition_changes_total",
           "lockfleet_notification_delay_seconds_count",
           "lockfleet_jobs_total",
           "lockfleet_job_duration_seconds_count",
           "lockfleet_jobs_running",
           "lockfleet_jobs_consumer_lag",
       }) {
    EXPECT_GT(SumSamples(samples, name), 0) << name;
  }
}

TEST(Promtool, CheckMetricsAcceptsThePopulatedExpositionWithoutComplaint) {
  ASSERT_TRUE(lockfleet::testing::FindPromtool().has_value())
      << lockfleet::testing::kNoPromtool;
  Metrics m;
  Populate(m);
  const lockfleet::testing::PromtoolResult result =
      lockfleet::testing::PromtoolCheckMetrics(m.Exposition());
  EXPECT_EQ(result.status, 0) << result.output;
  EXPECT_EQ(result.output, "") << "promtool lint complaints:\n"
                               << result.output;
}

}  // namespace
}  // namespace lockfleet::metrics::testing
