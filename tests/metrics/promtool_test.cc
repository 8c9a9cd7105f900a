// The exposition passes Prometheus's own linter: promtool check metrics.
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
#include "lockfleet/lockcore/lease.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/metrics/metrics.h"
#include "lockfleet/worker/observer.h"

namespace lockfleet::metrics::testing {
namespace {

using std::chrono::milliseconds;

// promtool's path, from $PATH.
std::optional<std::string> FindPromtool() {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/promtool";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

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
  locks->OnError(ErrorCode::kRedisTimeout);
  // A label value that needs escaping.
  locks->OnAcquire("we\"ird\\name", AcquireStatus::kAcquired, milliseconds(1),
                   1, false);

  auto jobs = m.worker_observer();
  jobs->OnJob(worker::JobSource::kKafka, "reserve", worker::JobResult::kOk,
              milliseconds(40));
  jobs->OnRunning(+1);
  jobs->OnConsumerLag(17);

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
           "lockfleet_lock_errors_total",
           "lockfleet_unlock_events_published_total",
           "lockfleet_unlock_events_delivered_total",
           "lockfleet_unlock_events_publish_failures_total",
           "lockfleet_unlock_events_consumed_total",
           "lockfleet_unlock_events_malformed_total",
           "lockfleet_kafka_errors_total",
           "lockfleet_kafka_consumer_assigned",
           "lockfleet_kafka_consumer_partitions",
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
  const std::optional<std::string> promtool = FindPromtool();
  ASSERT_TRUE(promtool.has_value())
      << "promtool is not on PATH: install the Debian package 'prometheus' "
         "(apt-get install prometheus; scripts/setup.sh does)";

  Metrics m;
  Populate(m);
  char path[] = "/tmp/lockfleet-exposition-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << m.Exposition();

  const std::string command =
      "'" + *promtool + "' check metrics < '" + path + "' 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof(buffer), pipe)) > 0;)
    output.append(buffer, n);
  const int status = pclose(pipe);
  unlink(path);

  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 0) << output;
  EXPECT_EQ(output, "") << "promtool lint complaints:\n" << output;
}

}  // namespace
}  // namespace lockfleet::metrics::testing
