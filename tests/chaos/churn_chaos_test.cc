// Chaos scenario 7 (docs/RELIABILITY.md): a crash-looping worker must not
// freeze the fleet. Four `lockfleet worker` processes sell stock of 10
// products (one lock each, the default 30 s lease); one of them is SIGKILLed
// and restarted on its state directory every 2 s for 20 s, as a
// crash-looping pod would be. Run on the embedded broker and on a real
// Apache Kafka broker (kafka-local: the ctest run's shared one, on topics
// and a group of this test's own, created with 8 partitions each as the
// embedded broker makes them).
//
// Before the fix the fleet made no progress at all in that window: every
// killed process stranded the product locks it held for a whole lease, and
// its restarts kept the jobs group rebalancing with partitions stuck on dead
// members. Now a restart gives back what its crashed predecessor held
// (worker.state_dir), and a crash-looping worker waits before it joins the
// group. The figures (printed, and in the test's XML properties) go to
// docs/RELIABILITY.md; the assertions leave wide margins for a loaded
// machine.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli/broker_process.h"
#include "cli/cli_process.h"
#include "cli/worker_process.h"
#include "lockfleet/metrics/scrape.h"
#include "lockfleet/notifier/job_topic.h"
#include "lockfleet/worker/builtin_handlers.h"
#include "lockfleet/worker/job.h"
#include "support/kafka_admin.h"
#include "support/real_kafka.h"
#include "support/redis_server.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kProducts = 10;
constexpr int kPartitions = 8;
constexpr int kStable = 3;  // workers w0..w2; w3 crash-loops
constexpr auto kUndisturbed = seconds(8);
constexpr auto kKillWindow = seconds(20);
constexpr auto kKillEvery = seconds(2);
constexpr auto kAfterWindow = seconds(10);

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// WaitUntil, asking every 100 ms instead of every 2 ms: each StableDone() is
// three HTTP scrapes on new connections, and at 2 ms the wait for the first
// job left ~900 sockets per worker in TIME_WAIT, which slows any kafka-local
// start of the same ctest run (it reads /proc/net/tcp in bash); each Sold()
// is ten Redis calls beside the fleet's.
bool Poll(const std::function<bool()>& condition, Clock::duration timeout) {
  return WaitUntil(
      [&] {
        if (condition()) return true;
        std::this_thread::sleep_for(milliseconds(100));
        return false;
      },
      std::chrono::duration_cast<milliseconds>(timeout));
}

class ChurnChaos : public ::testing::TestWithParam<bool> {
 protected:
  bool real() const { return GetParam(); }

  void SetUp() override {
    if (real()) {
      LOCKFLEET_SKIP_UNLESS_REAL_KAFKA();
      // The shared broker (a private one when run by hand): names of this
      // test's own, so a group or topic of another test is never touched.
      real_ = RealKafka::Shared();
      bootstrap_ = real_->bootstrap();
      jobs_topic_ = RealKafka::UniqueName("churn.jobs");
      unlock_topic_ = RealKafka::UniqueName("churn.unlock");
      group_ = RealKafka::UniqueName("churn.workers");
      for (const std::string& topic : {jobs_topic_, unlock_topic_}) {
        const std::string error =
            CreateKafkaTopic(bootstrap_, topic, kPartitions);
        ASSERT_EQ(error, "") << topic;
      }
    } else {
      embedded_ = std::make_unique<BrokerProcess>(
          0,
          std::vector<std::string>{"--partitions", std::to_string(kPartitions),
                                   "--topic", jobs_topic_});
      bootstrap_ = embedded_->bootstrap();
    }
    redis_ = std::make_shared<RedisClient>(RedisOptions{.url = server_.url()});
    for (int p = 0; p < kProducts; ++p) {
      worker::SeedStock(*redis_, "lockfleet", "product:" + std::to_string(p),
                        100'000'000);
    }
  }

  // One config per worker: each has a state directory of its own.
  std::string Config(int worker) {
    // Real broker: a long-polling fetch and its minimum session (6 s). The
    // embedded one: 3 s (it makes a rebalance wait session - 1 s).
    const std::string kafka = real() ? "  fetch_wait: 100ms\n"
                                     : "  fetch_wait: 1ms\n  properties:\n"
                                       "    session.timeout.ms: 3000\n"
                                       "    heartbeat.interval.ms: 500\n";
    const std::string path = dir_.File("w" + std::to_string(worker) + ".yaml");
    WriteFile(
        path,
        "redis:\n  url: " + server_.url() + "\nkafka:\n  bootstrap: " +
            bootstrap_ + "\n  jobs_topic: " + jobs_topic_ +
            "\n  unlock_topic: " + unlock_topic_ + "\n" + kafka +
            "worker:\n  threads: 4\n  state_dir: " +
            dir_.File("state-" + std::to_string(worker)) +
            "\n  sources:\n    kafka_jobs: {enabled: true, group: " + group_ +
            "}\n"
            "metrics:\n  listen: 127.0.0.1:0\n"
            "logging:\n  level: warning\n");
    return path;
  }

  // Jobs the stable workers finished (their own counters).
  double StableDone() {
    double done = 0;
    for (int w = 0; w < kStable; ++w) {
      done += metrics::SumSamples(ScrapeWorker(*workers_[w]),
                                  "lockfleet_jobs_total", {{"result", "ok"}});
    }
    return done;
  }

  int StablePartitions() {
    double partitions = 0;
    for (int w = 0; w < kStable; ++w) {
      partitions += metrics::SumSamples(ScrapeWorker(*workers_[w]),
                                        "lockfleet_jobs_consumer_partitions");
    }
    return static_cast<int>(partitions);
  }

  // Jobs done by the whole fleet: the sales recorded in Redis.
  int64_t Sold() {
    int64_t sold = 0;
    for (int p = 0; p < kProducts; ++p) {
      sold += worker::AuditStock(*redis_, "lockfleet",
                                 "product:" + std::to_string(p))
                  .sold;
    }
    return sold;
  }

  // Keeps at least `backlog` jobs ahead of the fleet until stopped;
  // `produced` counts them. Counted against every sale, not the stable
  // workers' counters: the jobs waiting on the crash-looping worker's
  // partitions would otherwise stop the feeding and starve the others.
  void FeedUntil(const std::atomic<bool>& stop, int backlog) {
    notifier::JobProducer producer(
        {.bootstrap = bootstrap_, .topic = jobs_topic_});
    while (!stop.load()) {
      // A Redis call that fails (a timeout on a loaded machine) skips a
      // round: an exception must not escape this thread.
      int64_t sold = produced_;
      try {
        sold = Sold();
      } catch (const std::exception& e) {
        std::cerr << "[chaos] feeder: " << e.what() << "\n";
      }
      if (produced_ - sold < backlog) {
        for (int i = 0; i < 5000; ++i, ++produced_) {
          const worker::Job job = worker::FlashSaleJob(produced_, kProducts);
          producer.Produce(job.lock, worker::EncodeJob(job));
        }
        producer.Flush(seconds(30));
      }
      std::this_thread::sleep_for(milliseconds(200));
    }
    ASSERT_EQ(producer.Flush(seconds(60)), 0u);
  }

  RedisServer server_;
  TempDir dir_;
  std::unique_ptr<RealKafka> real_;
  std::unique_ptr<BrokerProcess> embedded_;
  std::string bootstrap_;
  // The embedded broker's are the defaults; the real one's are unique.
  std::string jobs_topic_ = "lockfleet.jobs";
  std::string unlock_topic_ = "lockfleet.unlock";
  std::string group_ = "lockfleet-workers";
  std::shared_ptr<RedisClient> redis_;
  std::vector<std::unique_ptr<CliProcess>> workers_;
  int produced_ = 0;  // by the feeder thread; read after it ended
};

TEST_P(ChurnChaos, ACrashLoopingWorkerDoesNotFreezeTheFleet) {
  const std::string broker = real() ? "real broker" : "embedded broker";
  std::vector<std::string> configs;
  for (int w = 0; w <= kStable; ++w) configs.push_back(Config(w));
  for (int w = 0; w <= kStable; ++w) {
    workers_.push_back(StartWorker(configs[w], "w" + std::to_string(w)));
  }
  std::atomic<bool> stop_feeding{false};
  std::thread feeder([&] { FeedUntil(stop_feeding, 20000); });
  // Undisturbed: from the first job the stable workers finish.
  ASSERT_TRUE(Poll([&] { return StableDone() > 0; }, seconds(60)));
  const double before = StableDone();
  std::this_thread::sleep_for(kUndisturbed);
  const double undisturbed = (StableDone() - before) / Seconds(kUndisturbed);

  // The kill window: SIGKILL w3 and start it again on its state directory.
  // A sampler measures the longest stretch in which the stable workers
  // finished nothing, from the window's start to kAfterWindow after it
  // (before the fix: from 8 s into the window to 15 s after it).
  CliProcess* looping = workers_[kStable].get();
  const double window_start = StableDone();
  const Clock::time_point window_end = Clock::now() + kKillWindow;
  Clock::duration longest_stall{};
  std::thread sampler([&] {
    double last = window_start;
    Clock::time_point progressed = Clock::now();
    while (Clock::now() < window_end + kAfterWindow) {
      std::this_thread::sleep_for(milliseconds(250));
      const double done = StableDone();
      const Clock::time_point now = Clock::now();
      if (done > last) {
        last = done;
        progressed = now;
      }
      longest_stall = std::max(longest_stall, now - progressed);
    }
  });
  int kills = 0;
  while (Clock::now() < window_end) {
    looping->Signal(SIGKILL);
    looping->Wait(seconds(30));
    ++kills;
    // Not StartWorker: it waits for the ready line, and the kill may come
    // first. A config error would show in every restart's stderr.
    workers_[kStable] = std::make_unique<CliProcess>(std::vector<std::string>{
        "worker", "--config", configs[kStable], "--id", "w3"});
    looping = workers_[kStable].get();
    std::this_thread::sleep_for(kKillEvery);
  }
  const double during = (StableDone() - window_start) / Seconds(kKillWindow);
  const int partitions = StablePartitions();
  sampler.join();  // the feeder keeps the backlog up meanwhile
  stop_feeding = true;
  feeder.join();

  // Every job is finished once the churn stops (the last w3 runs on).
  ASSERT_TRUE(Poll([&] { return Sold() == produced_; }, seconds(120)))
      << "jobs left unfinished; " << looping->Stderr();
  for (int p = 0; p < kProducts; ++p) {
    const worker::StockAudit audit = worker::AuditStock(
        *redis_, "lockfleet", "product:" + std::to_string(p));
    EXPECT_TRUE(audit.consistent()) << "product " << p;
    EXPECT_EQ(audit.oversold(), 0) << "product " << p;
  }

  const double ratio = undisturbed > 0 ? during / undisturbed : 0;
  std::cout << "[chaos] crash loop on the " << broker << ": " << kills
            << " SIGKILLs in " << Seconds(kKillWindow)
            << " s; the 3 other workers finished " << undisturbed
            << " jobs/s undisturbed, " << during << " jobs/s during the kills ("
            << static_cast<int>(ratio * 100) << "%), longest stall "
            << Seconds(longest_stall) << " s; partitions with them at"
            << " the end of the window: " << partitions << " of " << kPartitions
            << "; " << produced_
            << " jobs, none lost, none run twice, 0 oversold\n";
  RecordProperty("undisturbed_jobs_per_s", std::to_string(undisturbed));
  RecordProperty("during_kills_jobs_per_s", std::to_string(during));
  RecordProperty("partitions_at_end", std::to_string(partitions));
  RecordProperty("longest_stall_s", std::to_string(Seconds(longest_stall)));
  // Before the fix: no job from 8 s into the window until 15 s after it
  // (the report; stranded locks ran out their 30 s lease): a stall
  // of 22 s within the sampled span. The target, >= 50% of the undisturbed
  // rate, is met on a quiet machine (121-144%), but neither a throughput ratio
  // nor a short stall bound is a test on a loaded CI machine: each kill strands
  // the dead worker's locks until its next start gives them back, and a start
  // slowed down by other tests running alongside lengthens that (a stall
  // of 8.5 s at 96% of the undisturbed rate was measured so). So the test
  // asks "never frozen": on the real broker no stretch of 15 s without a
  // finished job; on the embedded one (librdkafka's mock cluster can stop
  // answering for many seconds under this churn, "N request(s) timed out"
  // in the workers' logs) some progress in the window.
  EXPECT_GE(ratio, 0.1);
  if (real()) {
    EXPECT_LT(longest_stall, seconds(15));
  }
  // The crash-looping worker stayed out of the group: the others own every
  // partition (without the join delay they had 4 or 5 of 8 by then).
  EXPECT_EQ(partitions, kPartitions);

  for (auto& worker : workers_) worker->Signal(SIGTERM);
  for (auto& worker : workers_) worker->Wait(seconds(60));
}

INSTANTIATE_TEST_SUITE_P(Brokers, ChurnChaos, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "RealKafka" : "EmbeddedBroker";
                         });

}  // namespace
}  // namespace lockfleet::testing
