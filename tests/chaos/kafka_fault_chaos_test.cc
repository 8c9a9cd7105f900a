// Chaos scenario 3: the Kafka broker killed, frozen (SIGSTOP) or set down
// while nodes contend for locks.
//
// Promise (README, kafka_notifier.h): Kafka only speeds waiting up. While it
// is gone, acquisitions continue on the waiters' park bounds with no lock
// error and never two holders; failed publishes are counted; the producer's
// queue is bounded (queue_max_messages, message_timeout); when the broker is
// back — even restarted empty on the same port — Kafka wake-ups resume with
// no restart of anything.
//
// Each test prints one "measured:" block; docs/RELIABILITY.md quotes them.
// Bounds are generous (a loaded 2-core machine must pass): the assertions
// are about outcomes, never about speed.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <memory>
#include <vector>

#include "chaos/fault_harness.h"
#include "cli/broker_process.h"
#include "cli/cli_process.h"
#include "lockfleet/notifier/embedded_broker.h"
#include "support/redis_server.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Steady = std::chrono::steady_clock;

constexpr int kNodes = 3;
constexpr seconds kOutage{6};  // longer than message_timeout (5 s)
constexpr seconds kLong{60};   // bounds for what takes a second or two

double Seconds(Steady::duration d) {
  return std::chrono::duration<double>(d).count();
}

uint64_t Sum(const std::vector<FaultNode*>& nodes,
             uint64_t notifier::NotifierStats::*field) {
  uint64_t n = 0;
  for (FaultNode* node : nodes) n += node->notifier()->stats().*field;
  return n;
}

class KafkaFaultChaos : public ::testing::Test {
 protected:
  void StartNodes(const std::string& bootstrap,
                  Contention::Options options = Contention::Options{}) {
    group_ = std::make_unique<ContendingNodes>(
        kNodes, NodeConfig{.redis_url = redis_.url(),
                           .bootstrap = bootstrap,
                           // Kafka's wake-ups are what these tests count.
                           .spin_max_hold = std::chrono::milliseconds(0)});
    nodes_ = group_->nodes();
    ASSERT_TRUE(group_->WaitUntilReady(kLong));
    shared_expected_ = SharedHoldsExpected(options);
    contention_ = &group_->StartContention(std::move(options));
    // Warm: cross-node hand-offs arrive as Kafka events.
    ASSERT_TRUE(WaitUntil(
        [&] {
          return EventWakeups(nodes_) >= 10 &&
                 contention_->acquisitions() >= 30;
        },
        kLong))
        << "events " << EventWakeups(nodes_) << " acquisitions "
        << contention_->acquisitions();
  }

  // Runs `outage` for kOutage and checks the locks kept working meanwhile.
  // Returns acquisitions during the outage.
  uint64_t RideOut(const std::function<void()>& outage) {
    const uint64_t before = contention_->acquisitions();
    const uint64_t bound_before = BoundWakeups(nodes_);
    const Steady::time_point start = Steady::now();
    outage();
    std::this_thread::sleep_for(kOutage - (Steady::now() - start));
    const uint64_t during = contention_->acquisitions() - before;
    bound_wakeups_in_outage_ = BoundWakeups(nodes_) - bound_before;
    // Locks keep being granted on park bounds, and no lock call failed.
    EXPECT_GE(during, 3u);
    EXPECT_EQ(contention_->error_count(), 0u) << Format(contention_->errors());
    return during;
  }

  // After the broker is back: how long until Kafka wake-ups resume (5 more
  // event-caused wake-ups than at `back`). Also notes when the producers
  // delivered and the consumers received again.
  double Recovery(Steady::time_point back) {
    const uint64_t events = EventWakeups(nodes_);
    const uint64_t delivered = Sum(nodes_, &notifier::NotifierStats::delivered);
    const uint64_t consumed = Sum(nodes_, &notifier::NotifierStats::consumed);
    delivered_s_ = consumed_s_ = -1;
    EXPECT_TRUE(WaitUntil(
        [&] {
          const double now = Seconds(Steady::now() - back);
          if (delivered_s_ < 0 &&
              Sum(nodes_, &notifier::NotifierStats::delivered) > delivered) {
            delivered_s_ = now;
          }
          if (consumed_s_ < 0 &&
              Sum(nodes_, &notifier::NotifierStats::consumed) > consumed) {
            consumed_s_ = now;
          }
          return EventWakeups(nodes_) >= events + 5;
        },
        kLong))
        << "Kafka wake-ups did not resume: events " << EventWakeups(nodes_);
    return Seconds(Steady::now() - back);
  }

  SafetyReport Finish() {
    contention_->Stop();
    const SafetyReport report = contention_->Check(*nodes_[0]->redis());
    EXPECT_GT(report.intervals, 0u);
    EXPECT_EQ(report.overlaps, 0u) << report.detail;
    EXPECT_GE(report.max_concurrent, shared_expected_)
        << "the holds never shared a name as much as they may";
    EXPECT_EQ(report.fence_regressions, 0u) << report.detail;
    EXPECT_EQ(report.rejected_writes, 0u);
    EXPECT_TRUE(report.counter_consistent)
        << report.counter_total << " vs " << report.accepted_writes << " + "
        << report.uncertain_writes;
    EXPECT_EQ(contention_->error_count(), 0u) << Format(contention_->errors());
    return report;
  }

  void Print(const char* scenario, uint64_t during, double recovery,
             const SafetyReport& report) {
    std::printf(
        "measured: %s\n"
        "  acquisitions %llu in all, %llu during the %lld s outage "
        "(park-bound wake-ups %llu), timeouts %llu\n"
        "  Kafka wake-ups resumed %.2f s after the broker was back (first "
        "delivery %.2f s, first event consumed %.2f s)\n"
        "  lock errors: %s; wake-ups event %llu bound %llu\n"
        "  publishes %llu, delivered %llu, delivery failed %llu, dropped "
        "%llu; transport errors %llu\n"
        "  %s\n",
        scenario, static_cast<unsigned long long>(contention_->acquisitions()),
        static_cast<unsigned long long>(during),
        static_cast<long long>(kOutage.count()),
        static_cast<unsigned long long>(bound_wakeups_in_outage_),
        static_cast<unsigned long long>(contention_->timeouts()), recovery,
        delivered_s_, consumed_s_, Format(contention_->errors()).c_str(),
        static_cast<unsigned long long>(EventWakeups(nodes_)),
        static_cast<unsigned long long>(BoundWakeups(nodes_)),
        static_cast<unsigned long long>(
            Sum(nodes_, &notifier::NotifierStats::published)),
        static_cast<unsigned long long>(
            Sum(nodes_, &notifier::NotifierStats::delivered)),
        static_cast<unsigned long long>(
            Sum(nodes_, &notifier::NotifierStats::delivery_failed)),
        static_cast<unsigned long long>(
            Sum(nodes_, &notifier::NotifierStats::publish_dropped)),
        static_cast<unsigned long long>(
            Sum(nodes_, &notifier::NotifierStats::transport_errors)),
        FormatSafety(report).c_str());
    std::fflush(stdout);
  }

  // SIGSTOP of a broker process for kOutage while `options` contend: the
  // locks keep working on park bounds, publishes into the frozen broker
  // fail and are counted, and Kafka's wake-ups resume after SIGCONT.
  void FrozenThenThawed(Contention::Options options, const char* scenario) {
    BrokerProcess broker;
    ASSERT_NO_FATAL_FAILURE(StartNodes(broker.bootstrap(), std::move(options)));
    const uint64_t failed_before =
        Sum(nodes_, &notifier::NotifierStats::delivery_failed);
    const uint64_t during = RideOut([&] { broker.process().Signal(SIGSTOP); });
    // Still frozen: what was published into it fails once message_timeout
    // (5 s) has passed and librdkafka's next timeout scan ran, and is
    // counted.
    EXPECT_TRUE(WaitUntil(
        [&] {
          return Sum(nodes_, &notifier::NotifierStats::delivery_failed) >
                 failed_before;
        },
        seconds(30)))
        << "publishes to a frozen broker must fail after message_timeout";
    broker.process().Signal(SIGCONT);
    const double recovery = Recovery(Steady::now());
    const SafetyReport report = Finish();
    Print(scenario, during, recovery, report);
  }

  // Stops the contention, then the nodes.
  void TearDown() override {
    contention_ = nullptr;
    group_.reset();
  }

  RedisServer redis_;
  std::unique_ptr<ContendingNodes> group_;
  std::vector<FaultNode*> nodes_;     // group_'s
  Contention* contention_ = nullptr;  // group_'s, once started
  uint64_t shared_expected_ = 1;      // SharedHoldsExpected of the run
  uint64_t bound_wakeups_in_outage_ = 0;
  double delivered_s_ = -1, consumed_s_ = -1;
};

// SIGKILL of the broker process, then a new broker on the same port: every
// topic starts empty again (offsets back to 0) and the mock behind the port
// listens on a new internal port, which clients learn from metadata.
TEST_F(KafkaFaultChaos, BrokerKilledThenRestartedOnTheSamePort) {
  const int port = UnusedTcpPort();
  auto broker = std::make_unique<BrokerProcess>(port);
  ASSERT_NO_FATAL_FAILURE(StartNodes(broker->bootstrap()));

  const uint64_t failed_before =
      Sum(nodes_, &notifier::NotifierStats::delivery_failed);
  const uint64_t during = RideOut([&] { broker->Kill(); });
  // Publishes into the void fail after message_timeout, and are counted.
  EXPECT_TRUE(WaitUntil(
      [&] {
        return Sum(nodes_, &notifier::NotifierStats::delivery_failed) >
               failed_before;
      },
      kLong));

  broker = std::make_unique<BrokerProcess>(port);
  const double recovery = Recovery(Steady::now());
  const SafetyReport report = Finish();
  Print("broker SIGKILLed, restarted on the same port", during, recovery,
        report);
}

// SIGSTOP: connections stay open but nothing answers (a hung broker, a
// network partition that drops packets) — the hardest case for timeouts.
TEST_F(KafkaFaultChaos, BrokerFrozenBySigstopThenThawed) {
  FrozenThenThawed({}, "broker frozen (SIGSTOP) then thawed");
}

// The same for a read-write lock's, a semaphore's and a multi-lock's
// waiters: their parks are bounded as a lock waiter's are.
TEST_F(KafkaFaultChaos, ReadWriteLockRidesOutAFrozenBroker) {
  FrozenThenThawed({.primitive = Primitive::kReadWrite, .prefix = "rw"},
                   "read-write lock, broker frozen (SIGSTOP) then thawed");
}

TEST_F(KafkaFaultChaos, SemaphoreRidesOutAFrozenBroker) {
  FrozenThenThawed(
      {.primitive = Primitive::kSemaphore, .permits = 2, .prefix = "sem"},
      "semaphore of 2 permits, broker frozen (SIGSTOP) then thawed");
}

TEST_F(KafkaFaultChaos, MultiLockRidesOutAFrozenBroker) {
  FrozenThenThawed(
      {.primitive = Primitive::kMultiLock, .locks = 3, .prefix = "multi"},
      "multi-lock of 2 of 3 names, broker frozen (SIGSTOP) then thawed");
}

// rd_kafka_mock_broker_set_down on an in-process broker, while one more node
// releases locks as fast as it can: the producer queue must stay bounded by
// queue_max_messages (overflow is dropped and counted) and by
// message_timeout (the rest fails and is counted), and the process's memory
// with it; every publish is accounted for in the end.
TEST_F(KafkaFaultChaos, BrokerSetDownKeepsThePublishQueueBounded) {
  notifier::EmbeddedBroker broker;
  ASSERT_NO_FATAL_FAILURE(StartNodes(broker.bootstrap()));
  constexpr int kQueueMax = 2000;
  FaultNode small({.redis_url = redis_.url(),
                   .bootstrap = broker.bootstrap(),
                   .kafka_queue_max_messages = kQueueMax,
                   .kafka_message_timeout = milliseconds(2000)});
  FaultNode standard({.redis_url = redis_.url(),
                      .bootstrap = broker.bootstrap()});  // the defaults
  ASSERT_TRUE(small.notifier()->WaitUntilReady(kLong));
  ASSERT_TRUE(standard.notifier()->WaitUntilReady(kLong));

  // Uncontended acquire + release as fast as possible: one unlock event per
  // round, far more than a real process publishes.
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> releases{0};
  auto in_flight = [](FaultNode& node) {
    const notifier::NotifierStats s = node.notifier()->stats();
    return static_cast<int64_t>(s.published - s.delivered - s.delivery_failed);
  };
  const long rss_before = RssKib();
  long rss_max = rss_before;
  int64_t small_max = 0, standard_max = 0;
  std::vector<std::thread> threads;
  struct Joiner {  // also on a failed assertion
    std::atomic<bool>& stop;
    std::vector<std::thread>& threads;
    ~Joiner() {
      stop.store(true);
      for (std::thread& t : threads) t.join();
    }
  } joiner{stop, threads};
  for (FaultNode* node : {&small, &standard}) {
    for (int t = 0; t < 2; ++t) {
      threads.emplace_back([&, node, t] {
        const std::string name =
            "churn:" + node->locks().client_id() + ":" + std::to_string(t);
        while (!stop.load()) {
          AcquireResult r = node->locks().TryAcquire(name);
          if (r) {
            r.lease.Release();
            releases.fetch_add(1);
          }
        }
      });
    }
  }
  threads.emplace_back([&] {
    while (!stop.load()) {
      small_max = std::max(small_max, in_flight(small));
      standard_max = std::max(standard_max, in_flight(standard));
      rss_max = std::max(rss_max, RssKib());
      std::this_thread::sleep_for(milliseconds(20));
    }
  });
  const uint64_t releases_before = releases.load();
  const uint64_t during = RideOut([&] { broker.SetDown(); });
  std::this_thread::sleep_for(seconds(4));  // still down: steady state
  const uint64_t churned = releases.load() - releases_before;
  stop.store(true);
  for (std::thread& t : threads) t.join();
  threads.clear();

  const notifier::NotifierStats down = small.notifier()->stats();
  EXPECT_LE(small_max, kQueueMax);
  EXPECT_GT(down.publish_dropped, 0u) << "a full queue must count its drops";
  EXPECT_GT(down.delivery_failed, 0u);
  EXPECT_LE(standard_max, 100000);  // KafkaOptions::queue_max_messages
  EXPECT_LT(rss_max - rss_before, 256 * 1024) << "KiB";

  broker.SetUp();
  const double recovery = Recovery(Steady::now());
  // Nothing disappears silently: every accepted publish ends up delivered
  // or counted as failed.
  for (FaultNode* node : {&small, &standard}) {
    EXPECT_TRUE(WaitUntil([&] { return in_flight(*node) == 0; }, kLong))
        << in_flight(*node);
  }
  const SafetyReport report = Finish();
  Print("broker set down in-process (rd_kafka_mock_broker_set_down)", during,
        recovery, report);
  const notifier::NotifierStats s = small.notifier()->stats();
  const notifier::NotifierStats d = standard.notifier()->stats();
  std::printf(
      "  churn while down: %llu releases in ~%lld s\n"
      "  queue_max_messages=%d, message_timeout=2s: in flight max %lld; "
      "published %llu, dropped (queue full) %llu, delivery failed %llu\n"
      "  defaults (100000, 5s): in flight max %lld; published %llu, dropped "
      "%llu, delivery failed %llu\n"
      "  process RSS %ld KiB before, max %ld KiB while down (+%ld KiB)\n",
      static_cast<unsigned long long>(churned),
      static_cast<long long>(kOutage.count() + 4), kQueueMax,
      static_cast<long long>(small_max),
      static_cast<unsigned long long>(s.published),
      static_cast<unsigned long long>(s.publish_dropped),
      static_cast<unsigned long long>(s.delivery_failed),
      static_cast<long long>(standard_max),
      static_cast<unsigned long long>(d.published),
      static_cast<unsigned long long>(d.publish_dropped),
      static_cast<unsigned long long>(d.delivery_failed), rss_before, rss_max,
      rss_max - rss_before);
  std::fflush(stdout);
}

}  // namespace
}  // namespace lockfleet::testing
