// Worker, notifier and notification-delay series.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <stdexcept>

#include "exposition.h"
#include "lockfleet/metrics/metrics.h"
#include "lockfleet/notifier/kafka_notifier.h"
#include "lockfleet/worker/observer.h"

namespace lockfleet::metrics::testing {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using worker::JobResult;
using worker::JobSource;

TEST(WorkerMetrics, AJobCountsItsResultAndObservesItsDuration) {
  Metrics m;
  m.worker_observer()->OnJob(JobSource::kKafka, "reserve", JobResult::kOk,
                             milliseconds(30));
  const LabelMatch job = {{"source", "kafka"}, {"type", "reserve"}};
  LabelMatch ok = job;
  ok.emplace("result", "ok");
  EXPECT_EQ(Value(m, "lockfleet_jobs_total", ok), 1);
  EXPECT_EQ(Value(m, "lockfleet_job_duration_seconds_count", job), 1);
  EXPECT_DOUBLE_EQ(Value(m, "lockfleet_job_duration_seconds_sum", job), 0.03);
}

TEST(WorkerMetrics, AJobTypeStartsWithEveryResultAtZero) {
  Metrics m;
  m.worker_observer()->OnJob(JobSource::kSchedule, "sweep", JobResult::kFailed,
                             milliseconds(1));
  for (const char* result :
       {"ok", "rejected", "duplicate", "cancelled", "timeout", "lease_lost"}) {
    EXPECT_EQ(
        Value(m, "lockfleet_jobs_total",
              {{"source", "schedule"}, {"type", "sweep"}, {"result", result}}),
        0)
        << result;
  }
}

TEST(WorkerMetrics, JobTypesBeyondTheBoundCountAsOther) {
  Metrics m({.max_job_types = 1});
  auto observer = m.worker_observer();
  observer->OnJob(JobSource::kKafka, "a", JobResult::kOk, milliseconds(1));
  observer->OnJob(JobSource::kKafka, "b", JobResult::kOk, milliseconds(1));
  EXPECT_EQ(Value(m, "lockfleet_jobs_total",
                  {{"source", "kafka"}, {"type", "other"}, {"result", "ok"}}),
            1);
}

TEST(WorkerMetrics, RunningMovesTheGauge) {
  Metrics m;
  auto observer = m.worker_observer();
  observer->OnRunning(+1);
  observer->OnRunning(+1);
  observer->OnRunning(-1);
  EXPECT_EQ(Value(m, "lockfleet_jobs_running"), 1);
}

TEST(WorkerMetrics, ConsumerLagAppearsWithItsFirstReport) {
  Metrics m;
  EXPECT_FALSE(HasSeries(m, "lockfleet_jobs_consumer_lag"));
  m.worker_observer()->OnConsumerLag(42);
  EXPECT_EQ(Value(m, "lockfleet_jobs_consumer_lag"), 42);
}

TEST(WorkerMetrics, ConsumerPartitionsAppearWithTheirFirstReport) {
  Metrics m;
  EXPECT_FALSE(HasSeries(m, "lockfleet_jobs_consumer_partitions"));
  m.worker_observer()->OnConsumerPartitions(3);
  EXPECT_EQ(Value(m, "lockfleet_jobs_consumer_partitions"), 3);
  m.worker_observer()->OnConsumerPartitions(0);
  EXPECT_EQ(Value(m, "lockfleet_jobs_consumer_partitions"), 0);
}

TEST(WorkerMetrics, ConsumerErrorsAddUpByKind) {
  Metrics m;
  m.worker_observer()->OnConsumerErrors(2, 1);
  m.worker_observer()->OnConsumerErrors(3, 0);
  EXPECT_EQ(
      Value(m, "lockfleet_jobs_consumer_errors_total", {{"kind", "consume"}}),
      5);
  EXPECT_EQ(
      Value(m, "lockfleet_jobs_consumer_errors_total", {{"kind", "commit"}}),
      1);
}

// A limit's gauges appear with its first sample, per limit (not summed
// over its class: one exhausted limit must show); names beyond the bound
// are dropped, not labelled; an unknown limit's gauges are withdrawn.
TEST(WorkerMetrics, LimitSamplesSetThePermitsGaugesPerLimit) {
  Metrics m({.max_lock_classes = 3});
  auto observer = m.worker_observer();
  EXPECT_FALSE(HasSeries(m, "lockfleet_semaphore_permits_in_use"));
  observer->OnLimitSampled("partner:eu", 2, 1, 4);
  observer->OnLimitSampled("partner:us", 1, 0, 0);
  observer->OnLimitSampled("partner:eu", 3, 0, 5);  // replaces its sample
  const LabelMatch eu = {{"semaphore_class", "partner"},
                         {"limit", "partner:eu"}};
  const LabelMatch us = {{"semaphore_class", "partner"},
                         {"limit", "partner:us"}};
  EXPECT_EQ(Value(m, "lockfleet_semaphore_permits_in_use", eu), 3);
  EXPECT_EQ(Value(m, "lockfleet_semaphore_permits_available", eu), 0);
  EXPECT_EQ(Value(m, "lockfleet_semaphore_waiters", eu), 5);
  EXPECT_EQ(Value(m, "lockfleet_semaphore_permits_in_use", us), 1);
  observer->OnLimitSampled("export", 1, 9, 0);
  observer->OnLimitSampled("fourth", 1, 1, 1);  // past the bound of 3 names
  EXPECT_EQ(Value(m, "lockfleet_semaphore_permits_available",
                  {{"semaphore_class", "export"}, {"limit", "export"}}),
            9);
  EXPECT_EQ(SumSamples(ParseExposition(m.Exposition()),
                       "lockfleet_semaphore_waiters"),
            5)
      << "fourth is not labelled";
  observer->OnLimitUnknown("partner:eu");
  EXPECT_TRUE(std::isnan(Value(m, "lockfleet_semaphore_waiters", eu)))
      << "withdrawn, not left at its last value";
  observer->OnLimitSampled("fourth", 1, 1, 1);  // room again
  EXPECT_EQ(Value(m, "lockfleet_semaphore_waiters",
                  {{"semaphore_class", "fourth"}, {"limit", "fourth"}}),
            1);
  observer->OnLimitSampled("partner:eu", 0, 3, 0);  // bound reached again
  EXPECT_TRUE(std::isnan(Value(m, "lockfleet_semaphore_waiters", eu)));
}

TEST(WorkerMetrics, UnknownConsumerLagIsNaN) {
  Metrics m;
  m.worker_observer()->OnConsumerLag(-1);
  EXPECT_TRUE(HasSeries(m, "lockfleet_jobs_consumer_lag"));
  EXPECT_TRUE(std::isnan(Value(m, "lockfleet_jobs_consumer_lag")));
}

TEST(NotificationDelay, IsObservedInSeconds) {
  Metrics m;
  m.ObserveNotificationDelay(microseconds(1500));
  EXPECT_EQ(Value(m, "lockfleet_notification_delay_seconds_count"), 1);
  EXPECT_EQ(Value(m, "lockfleet_notification_delay_seconds_bucket",
                  {{"le", "0.001"}}),
            0);
  EXPECT_EQ(Value(m, "lockfleet_notification_delay_seconds_bucket",
                  {{"le", "0.0015"}}),
            1);
}

TEST(NotificationDelay, ANegativeDelayCountsAsZero) {
  Metrics m;
  m.ObserveNotificationDelay(milliseconds(-5));
  EXPECT_EQ(Value(m, "lockfleet_notification_delay_seconds_sum"), 0);
  EXPECT_EQ(Value(m, "lockfleet_notification_delay_seconds_bucket",
                  {{"le", "0.0001"}}),
            1);
}

TEST(NotifierStats, WithoutASourceNoKafkaFamilyIsExported) {
  Metrics m;
  EXPECT_FALSE(HasSeries(m, "lockfleet_unlock_events_published_total"));
  EXPECT_FALSE(HasSeries(m, "lockfleet_kafka_errors_total"));
}

TEST(NotifierStats, AreReadAtEachScrape) {
  Metrics m;
  auto published = std::make_shared<std::atomic<uint64_t>>(3);
  m.AddNotifierStats([published] {
    notifier::NotifierStats s;
    s.published = published->load();
    return s;
  });
  EXPECT_EQ(Value(m, "lockfleet_unlock_events_published_total"), 3);
  published->store(7);
  EXPECT_EQ(Value(m, "lockfleet_unlock_events_published_total"), 7);
}

TEST(NotifierStats, AuthenticationFailuresAreMalformedReasons) {
  Metrics m;
  m.AddNotifierStats([] {
    notifier::NotifierStats s;
    s.malformed = 5;
    s.malformed_by_reason = {{"unsigned", 3}, {"bad_signature", 2}};
    return s;
  });
  const auto x = ParseExposition(m.Exposition());
  EXPECT_EQ(ValueIn(x, "lockfleet_unlock_events_malformed_total",
                    {{"reason", "unsigned"}}),
            3);
  EXPECT_EQ(ValueIn(x, "lockfleet_unlock_events_malformed_total",
                    {{"reason", "bad_signature"}}),
            2);
  EXPECT_EQ(SumSamples(x, "lockfleet_unlock_events_malformed_total"), 5);
}

TEST(NotifierStats, EveryCounterAndGaugeIsExported) {
  Metrics m;
  m.AddNotifierStats([] {
    notifier::NotifierStats s;
    s.published = 10;
    s.publish_dropped = 1;
    s.delivered = 8;
    s.delivery_failed = 2;
    s.consumed = 20;
    s.malformed = 3;
    s.malformed_by_reason = {{"not_json", 2}, {"bad_field", 1}};
    s.consumer_errors = 4;
    s.transport_errors = 5;
    s.assigned = true;
    s.partitions = 6;
    s.fetched_partitions = 2;  // targeted fan-out: 2 of the 6
    s.partition_assigns = 7;
    s.partition_unassigns = 5;
    return s;
  });
  const auto x = ParseExposition(m.Exposition());
  EXPECT_EQ(ValueIn(x, "lockfleet_unlock_events_delivered_total"), 8);
  EXPECT_EQ(ValueIn(x, "lockfleet_unlock_events_publish_failures_total",
                    {{"reason", "dropped"}}),
            1);
  EXPECT_EQ(ValueIn(x, "lockfleet_unlock_events_publish_failures_total",
                    {{"reason", "delivery"}}),
            2);
  EXPECT_EQ(ValueIn(x, "lockfleet_unlock_events_consumed_total"), 20);
  EXPECT_EQ(ValueIn(x, "lockfleet_unlock_events_malformed_total",
                    {{"reason", "not_json"}}),
            2);
  EXPECT_EQ(ValueIn(x, "lockfleet_unlock_events_malformed_total",
                    {{"reason", "too_large"}}),
            0);  // every reason is exported, seen or not
  for (const char* reason : {"unsigned", "bad_signature"}) {
    EXPECT_EQ(ValueIn(x, "lockfleet_unlock_events_malformed_total",
                      {{"reason", reason}}),
              0)
        << reason << ": the authentication reasons exist from the start";
  }
  EXPECT_EQ(
      ValueIn(x, "lockfleet_kafka_errors_total", {{"client", "consumer"}}), 4);
  EXPECT_EQ(
      ValueIn(x, "lockfleet_kafka_errors_total", {{"client", "transport"}}), 5);
  EXPECT_EQ(ValueIn(x, "lockfleet_kafka_consumer_assigned"), 1);
  EXPECT_EQ(ValueIn(x, "lockfleet_kafka_consumer_partitions"), 2)
      << "the partitions fetched, not the topic's";
  EXPECT_EQ(ValueIn(x, "lockfleet_kafka_consumer_partition_changes_total",
                    {{"change", "assigned"}}),
            7);
  EXPECT_EQ(ValueIn(x, "lockfleet_kafka_consumer_partition_changes_total",
                    {{"change", "unassigned"}}),
            5);
}

TEST(NotifierStats, SeveralSourcesAddUp) {
  Metrics m;
  for (uint64_t n : {2, 5}) {
    m.AddNotifierStats([n] {
      notifier::NotifierStats s;
      s.consumed = n;
      return s;
    });
  }
  EXPECT_EQ(Value(m, "lockfleet_unlock_events_consumed_total"), 7);
}

TEST(NotifierStats, ASourceThatThrowsIsLeftOut) {
  Metrics m;
  m.AddNotifierStats(
      []() -> notifier::NotifierStats { throw std::runtime_error("gone"); });
  m.AddNotifierStats([] {
    notifier::NotifierStats s;
    s.consumed = 1;
    return s;
  });
  EXPECT_EQ(Value(m, "lockfleet_unlock_events_consumed_total"), 1);
}

}  // namespace
}  // namespace lockfleet::metrics::testing

namespace lockfleet::metrics {
namespace {

using testing::HasSeries;
using testing::Value;

TEST(RedisRoundTrips, AreReadAtEachScrapeAndSummed) {
  Metrics m;
  EXPECT_FALSE(HasSeries(m, "lockfleet_redis_round_trips_total"));
  auto trips = std::make_shared<std::atomic<uint64_t>>(5);
  m.AddRedisRoundTrips([trips] { return trips->load(); });
  m.AddRedisRoundTrips([] { return uint64_t{2}; });
  EXPECT_EQ(Value(m, "lockfleet_redis_round_trips_total"), 7);
  *trips = 10;
  EXPECT_EQ(Value(m, "lockfleet_redis_round_trips_total"), 12);
}

}  // namespace
}  // namespace lockfleet::metrics
