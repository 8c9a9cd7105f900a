// `lockfleet worker`, `lockfleet jobs produce` and `lockfleet demo` end to
// end: every worker is a real process, Kafka is the embedded broker (here in
// the test process), Redis a private redis-server. Assertions are about
// outcomes (what ran, how often, which locks are free), never about speed;
// waits are generous so a loaded machine only makes them slower.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli_process.h"
#include "cli/worker_process.h"
#include "lockfleet/lockcore/fenced_resource.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/rwlock.h"
#include "lockfleet/metrics/http.h"
#include "lockfleet/metrics/scrape.h"
#include "lockfleet/notifier/embedded_broker.h"
#include "lockfleet/notifier/event_auth.h"
#include "lockfleet/notifier/job_topic.h"
#include "lockfleet/worker/builtin_handlers.h"
#include "lockfleet/worker/job.h"
#include "support/promtool.h"
#include "support/redis_server.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr seconds kLong{60};  // bounds for things that take ~1 s normally

class WorkerCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    redis_ = std::make_shared<RedisClient>(RedisOptions{.url = server_.url()});
  }

  // Writes a config for this test's redis (and broker, if started).
  std::string WriteConfig(const std::string& worker_section,
                          const std::string& name = "fleet.yaml") {
    std::string text = "redis:\n  url: " + server_.url() + "\n";
    if (broker_) {
      text += "kafka:\n  bootstrap: " + broker_->bootstrap() +
              "\n  fetch_wait: 1ms\n" + kafka_extra_;
    }
    text += "locks:\n  lease: 2s\n" + worker_section +
            "metrics:\n  listen: 127.0.0.1:0\nlogging:\n  level: debug\n";
    const std::string path = dir_.File(name);
    std::ofstream(path) << text;
    return path;
  }

  void StartBroker() {
    broker_ = std::make_unique<notifier::EmbeddedBroker>(
        notifier::EmbeddedBrokerOptions{
            .partitions = 1, .topics = {"lockfleet.unlock", "lockfleet.jobs"}});
  }

  static double Jobs(CliProcess& worker, const std::string& result) {
    return metrics::SumSamples(ScrapeWorker(worker), "lockfleet_jobs_total",
                               {{"result", result}});
  }

  void Produce(const std::vector<worker::Job>& jobs) {
    notifier::JobProducer producer({.bootstrap = broker_->bootstrap()});
    for (const worker::Job& job : jobs) {
      producer.Produce(job.lock, worker::EncodeJob(job));
    }
    ASSERT_EQ(producer.Flush(seconds(30)), 0u);
  }

  static worker::Job Sleep(std::string id, std::string lock, int ms) {
    worker::Job job{
        .id = std::move(id), .lock = std::move(lock), .type = "sleep"};
    job.payload["ms"] = {config::Scalar::Type::kInteger, std::to_string(ms)};
    return job;
  }

  static worker::Job Purchase(int i) {
    return {.id = "order-" + std::to_string(i),
            .lock = "product:1",
            .type = "inventory.purchase"};
  }

  bool Done(const worker::Job& job) {
    return redis_
               ->Execute({"EXISTS", FencedResource::KeyOf("lockfleet", job.lock,
                                                          "job:" + job.id)})
               .integer == 1;
  }

  TempDir dir_;
  RedisServer server_;
  std::shared_ptr<RedisClient> redis_;
  std::unique_ptr<notifier::EmbeddedBroker> broker_;
  std::string kafka_extra_;  // more lines of the kafka section
};

const char kScheduled[] = R"(worker:
  threads: 2
  grace_period: 5s
  sources:
    schedules:
      - name: report
        every: 1s
        handler: sleep
        payload: {ms: 100}
)";

TEST_F(WorkerCliTest, AScheduledSingletonRunsOncePerOccurrenceAcross3Workers) {
  const std::string config = WriteConfig(kScheduled);
  std::vector<std::unique_ptr<CliProcess>> workers;
  for (int i = 1; i <= 3; ++i) {
    workers.push_back(StartWorker(config, "w" + std::to_string(i)));
  }
  const std::string history =
      FencedResource::KeyOf("lockfleet", "report", "schedule:report:history");
  ASSERT_TRUE(WaitUntil(
      [&] {
        return redis_->Execute({"LLEN", history}).integer >= 4;
      },
      kLong));
  // The workers that did not run an occurrence found it done: none gave
  // up on one as timed out (the holder's lease, 2 s, outlasts the 1 s
  // interval, so they must come back before the next occurrence).
  for (auto& worker : workers) {
    EXPECT_EQ(
        metrics::SumSamples(ScrapeWorker(*worker), "lockfleet_jobs_total",
                            {{"source", "schedule"}, {"result", "timeout"}}),
        0)
        << worker->Stderr();
  }
  for (auto& worker : workers) worker->Signal(SIGTERM);
  for (auto& worker : workers) {
    EXPECT_EQ(worker->Wait(kLong), 0) << worker->Stderr();
  }
  const Reply entries = redis_->Execute({"LRANGE", history, "0", "-1"});
  std::map<std::string, int> runs;  // occurrence -> runs
  std::set<std::string> runners;
  for (const Reply& entry : entries.elements) {
    // "<due ms> <worker> <result> <duration ms>"
    const std::string due = entry.str.substr(0, entry.str.find(' '));
    ++runs[due];
    runners.insert(entry.str.substr(
        due.size() + 1, entry.str.find(' ', due.size() + 1) - due.size() - 1));
    EXPECT_NE(entry.str.find(" ok "), std::string::npos) << entry.str;
    EXPECT_EQ(std::stoll(due) % 1000, 0) << entry.str;  // on the second
  }
  ASSERT_GE(runs.size(), 4u);
  for (const auto& [due, count] : runs) EXPECT_EQ(count, 1) << due;
  EXPECT_FALSE(LockClient(redis_).Inspect("report").locked);
}

TEST_F(WorkerCliTest, WorkersGivenTheSameIdStillExcludeEachOther) {
  // A copied --id must not make two processes one lock owner.
  const std::string config = WriteConfig(kScheduled);
  auto a = StartWorker(config, "same");
  auto b = StartWorker(config, "same");
  const std::string history =
      FencedResource::KeyOf("lockfleet", "report", "schedule:report:history");
  ASSERT_TRUE(WaitUntil(
      [&] {
        return redis_->Execute({"LLEN", history}).integer >= 3;
      },
      kLong));
  a->Signal(SIGTERM);
  b->Signal(SIGTERM);
  EXPECT_EQ(a->Wait(kLong), 0) << a->Stderr();
  EXPECT_EQ(b->Wait(kLong), 0) << b->Stderr();
  std::map<std::string, int> runs;
  for (const Reply& entry :
       redis_->Execute({"LRANGE", history, "0", "-1"}).elements) {
    ++runs[entry.str.substr(0, entry.str.find(' '))];
  }
  for (const auto& [due, count] : runs) EXPECT_EQ(count, 1) << due;
}

TEST_F(WorkerCliTest, ACrashRedeliversUnfinishedJobsAndSkipsFinishedOnes) {
  StartBroker();
  worker::SeedStock(*redis_, "lockfleet", "product:1", 1000);
  const std::string config = WriteConfig(R"(worker:
  threads: 2
  grace_period: 0
  sources:
    kafka_jobs: {enabled: true, group: crash-test}
)");
  // Offset 0 is a long job on its own lock; 1..20 are purchases. While the
  // long job runs, the purchases finish but their offsets cannot be
  // committed (the partition's committed offset stays at 0, below the
  // unfinished record): a crash must redeliver all 21.
  std::vector<worker::Job> jobs{Sleep("long", "report", 600'000)};
  for (int i = 1; i <= 20; ++i) jobs.push_back(Purchase(i));
  Produce(jobs);

  auto first = StartWorker(config, "first");
  ASSERT_TRUE(WaitUntil(
      [&] {
        return worker::AuditStock(*redis_, "lockfleet", "product:1").sold == 20;
      },
      kLong))
      << first->Stderr();
  first->Signal(SIGKILL);
  first->Wait(kLong);

  auto second = StartWorker(config, "second");
  // The redelivered purchases are recognised as done and skipped.
  ASSERT_TRUE(
      WaitUntil([&] { return Jobs(*second, "duplicate") == 20; }, kLong))
      << second->Stderr();
  EXPECT_EQ(Jobs(*second, "ok"), 0);  // the long job is still running
  {
    // What a real worker serves after real work passes promtool's lint.
    ASSERT_TRUE(FindPromtool().has_value()) << kNoPromtool;
    const std::string out = second->Stdout();
    const size_t at = out.find("metrics=http://127.0.0.1:");
    const metrics::HttpResponse scrape = metrics::HttpGet(
        "127.0.0.1", static_cast<uint16_t>(std::stoi(out.substr(at + 25))),
        "/metrics", seconds(5));
    const PromtoolResult lint = PromtoolCheckMetrics(scrape.body);
    EXPECT_EQ(lint.status, 0) << lint.output;
    EXPECT_EQ(lint.output, "") << lint.output;
  }
  const worker::StockAudit audit =
      worker::AuditStock(*redis_, "lockfleet", "product:1");
  EXPECT_EQ(audit.sold, 20);  // each purchase happened exactly once
  EXPECT_EQ(audit.stock, 980);
  // And the long job was redelivered too: `second` runs it now.
  EXPECT_TRUE(WaitUntil(
      [&] { return LockClient(redis_).Inspect("report").locked; }, kLong));
  second->Signal(SIGTERM);  // grace 0: cancelled, handed back
  EXPECT_EQ(second->Wait(kLong), 0) << second->Stderr();
  EXPECT_FALSE(Done(jobs[0]));
  EXPECT_FALSE(LockClient(redis_).Inspect("report").locked);
}

// Jobs from the topic with "lock_mode": "read" on one lock run side by side
// (one worker, two threads: both read holds at once); a record with an
// unknown lock_mode is refused, dead-lettered with the reason and counted.
TEST_F(WorkerCliTest, ReadJobsShareTheirLockAndABadLockModeIsDeadLettered) {
  StartBroker();
  const std::string config = WriteConfig(R"(worker:
  threads: 2
  grace_period: 0
  sources:
    kafka_jobs: {enabled: true, group: rw-test}
)");
  worker::Job r1 = Sleep("r1", "catalogue", 600'000);
  r1.lock_mode = lockfleet::config::LockMode::kRead;
  worker::Job r2 = r1;
  r2.id = "r2";
  {
    notifier::JobProducer producer({.bootstrap = broker_->bootstrap()});
    producer.Produce("catalogue",
                     R"({"id":"bad","lock":"catalogue","type":"sleep",)"
                     R"("lock_mode":"sideways"})");
    producer.Produce(r1.lock, worker::EncodeJob(r1));
    producer.Produce(r2.lock, worker::EncodeJob(r2));
    ASSERT_EQ(producer.Flush(seconds(30)), 0u);
  }
  auto w = StartWorker(config, "w");
  LockClient locks(redis_);
  ReadWriteLock catalogue = locks.ReadWriteLock("catalogue");
  ASSERT_TRUE(
      WaitUntil([&] { return catalogue.Inspect().holders.size() == 2; }, kLong))
      << w->Stderr();
  EXPECT_FALSE(catalogue.Inspect().write_locked());
  ASSERT_TRUE(WaitUntil([&] { return Jobs(*w, "failed") == 1; }, kLong))
      << w->Stderr();
  const std::string letter =
      redis_->Execute({"LINDEX", "lockfleet:jobs:dead", "0"}).str;
  EXPECT_TRUE(letter.starts_with(
      R"(malformed: field 'lock_mode': expected "read" or "write")"))
      << letter;
  w->Signal(SIGTERM);  // grace 0: cancelled, handed back
  EXPECT_EQ(w->Wait(kLong), 0) << w->Stderr();
  EXPECT_TRUE(catalogue.Inspect().holders.empty()) << "both holds given back";
}

TEST_F(WorkerCliTest, GracefulShutdownFinishesRunningJobsAndLosesNone) {
  StartBroker();
  const std::string config = WriteConfig(R"(worker:
  threads: 2
  grace_period: 30s
  sources:
    kafka_jobs: {enabled: true, group: shutdown-test}
)");
  std::vector<worker::Job> jobs;
  for (int i = 0; i < 8; ++i) {
    jobs.push_back(
        Sleep("s" + std::to_string(i), "lock" + std::to_string(i), 400));
  }
  Produce(jobs);
  auto first = StartWorker(config, "first");
  LockClient probe(redis_);
  // Stop it while it is running jobs.
  ASSERT_TRUE(WaitUntil(
      [&] {
        for (const worker::Job& job : jobs) {
          if (probe.Inspect(job.lock).locked) return true;
        }
        return false;
      },
      kLong));
  first->Signal(SIGTERM);
  EXPECT_EQ(first->Wait(kLong), 0) << first->Stderr();
  // It finished what it had started and released every lock.
  for (const worker::Job& job : jobs) {
    EXPECT_FALSE(probe.Inspect(job.lock).locked) << job.lock;
  }
  const long finished_by_first =
      std::count_if(jobs.begin(), jobs.end(),
                    [&](const worker::Job& job) { return Done(job); });
  EXPECT_GE(finished_by_first, 1);
  // What it had not started goes to the next worker; nothing is lost.
  auto second = StartWorker(config, "second");
  EXPECT_TRUE(WaitUntil(
      [&] {
        return std::all_of(jobs.begin(), jobs.end(),
                           [&](const worker::Job& job) { return Done(job); });
      },
      kLong))
      << second->Stderr();
  // Nothing ran twice: the jobs `first` finished are not run again. (A
  // job's result is counted just after its done marker is written: the
  // count may trail the markers by a moment.)
  const double expected =
      static_cast<double>(jobs.size()) - static_cast<double>(finished_by_first);
  WaitUntil([&] { return Jobs(*second, "ok") >= expected; }, kLong);
  EXPECT_EQ(Jobs(*second, "ok"), expected);
  second->Signal(SIGTERM);
  EXPECT_EQ(second->Wait(kLong), 0) << second->Stderr();
  EXPECT_EQ(redis_->Execute({"LLEN", "lockfleet:jobs:dead"}).integer, 0);
}

TEST_F(WorkerCliTest, HealthEndpointReportsRedisTrouble) {
  const std::string config = WriteConfig(kScheduled);
  auto worker = std::make_unique<CliProcess>(
      std::vector<std::string>{"worker", "--config", config, "--id", "h",
                               "--health-listen", "127.0.0.1:0"});
  ASSERT_TRUE(WaitUntil(
      [&] { return worker->Stdout().find("ready ") != std::string::npos; },
      kLong))
      << worker->Stderr();
  const std::string out = worker->Stdout();
  const size_t at = out.find("health=http://127.0.0.1:");
  ASSERT_NE(at, std::string::npos) << out;
  const auto port = static_cast<uint16_t>(std::stoi(out.substr(at + 24)));
  const metrics::HttpResponse healthy =
      metrics::HttpGet("127.0.0.1", port, "/healthz", seconds(5));
  EXPECT_EQ(healthy.status, 200) << healthy.body << healthy.error;
  server_.Pause();  // Redis stops answering: unhealthy, not hung
  const metrics::HttpResponse unhealthy =
      metrics::HttpGet("127.0.0.1", port, "/healthz", seconds(30));
  server_.Resume();
  EXPECT_EQ(unhealthy.status, 503) << unhealthy.body << unhealthy.error;
  EXPECT_NE(unhealthy.body.find("redis"), std::string::npos) << unhealthy.body;
  worker->Signal(SIGTERM);
  EXPECT_EQ(worker->Wait(kLong), 0) << worker->Stderr();
}

TEST_F(WorkerCliTest, UnlockEventsAreSignedCheckedAndTheKeyNeverShown) {
  StartBroker();
  const std::string key = "worker-cli-SECRET-0123456789";
  WriteFile(dir_.File("event-key"), key + "\n");
  kafka_extra_ = "  event_key_file: " + dir_.File("event-key") + "\n";
  std::unique_ptr<CliProcess> worker =
      StartWorker(WriteConfig(kScheduled), "signer");
  const auto metric = [&](const std::string& name,
                          const metrics::LabelMatch& labels) {
    return metrics::SumSamples(ScrapeWorker(*worker), name, labels);
  };
  // Its own scheduled jobs release locks: signed events, which it accepts.
  EXPECT_TRUE(WaitUntil(
      [&] { return metric("lockfleet_unlock_events_consumed_total", {}) > 0; },
      kLong));

  // Someone else writes to the unlock topic: unsigned, and signed with
  // another key.
  UnlockEvent forged{.lock = "report", .client_id = "forger"};
  notifier::JobProducer forger(
      {.bootstrap = broker_->bootstrap(), .topic = "lockfleet.unlock"});
  forger.Produce("report", notifier::EncodeUnlockEvent(forged));
  forger.Produce(
      "report",
      notifier::EventAuthenticator({"another-key-0123456"}).Encode(forged));
  ASSERT_EQ(forger.Flush(seconds(30)), 0u);
  EXPECT_TRUE(WaitUntil(
      [&] {
        return metric("lockfleet_unlock_events_malformed_total",
                      {{"reason", "unsigned"}}) == 1 &&
               metric("lockfleet_unlock_events_malformed_total",
                      {{"reason", "bad_signature"}}) == 1;
      },
      kLong));
  EXPECT_EQ(metric("lockfleet_unlock_events_malformed_total", {}), 2);

  worker->Signal(SIGTERM);
  EXPECT_EQ(worker->Wait(kLong), 0) << worker->Stderr();
  const std::string log = worker->Stderr() + worker->Stdout();
  EXPECT_NE(log.find("unlock events signed and checked (1 key from file "),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("dropped an unauthenticated unlock event"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find(key), std::string::npos) << log;
}

TEST_F(WorkerCliTest, ShortEventKeyFailsFastWithoutShowingIt) {
  StartBroker();
  kafka_extra_ = "  event_key_env: LOCKFLEET_EVENT_KEY\n";
  const CliResult result =
      RunCli({"worker", "--config", WriteConfig(kScheduled)},
             {"LOCKFLEET_EVENT_KEY=short-SECRET"});
  EXPECT_EQ(result.status, 2);
  EXPECT_NE(result.err.find(":6:18: kafka.event_key_env: the event key on "
                            "line 1 of environment variable "
                            "LOCKFLEET_EVENT_KEY has 12 bytes"),
            std::string::npos)
      << result.err;
  EXPECT_EQ(result.err.find("SECRET"), std::string::npos) << result.err;
}

TEST_F(WorkerCliTest, BadConfigFailsFastNamingTheProblem) {
  const std::string config = WriteConfig(R"(worker:
  threads: 0
  handlers:
    sleep: {defalt_ms: 5}
)");
  const CliResult result = RunCli({"worker", "--config", config});
  EXPECT_EQ(result.status, 2);
  EXPECT_NE(result.err.find("worker.threads"), std::string::npos) << result.err;

  const std::string typo = WriteConfig(R"(worker:
  handlers:
    sleep: {defalt_ms: 5}
)",
                                       "typo.yaml");
  const CliResult typo_result = RunCli({"worker", "--config", typo});
  EXPECT_EQ(typo_result.status, 2);
  EXPECT_NE(typo_result.err.find("worker.handlers.sleep.defalt_ms: unknown "
                                 "setting (known: default_ms)"),
            std::string::npos)
      << typo_result.err;
}

// A worker id long enough to push its lock owners past the hold journal's
// limit is refused up front, not found out at the first journaled hold.
TEST_F(WorkerCliTest, AnOverlongWorkerIdIsAUsageError) {
  const CliResult result =
      RunCli({"worker", "--config", WriteConfig(kScheduled), "--id",
              std::string(129, 'w')});
  EXPECT_EQ(result.status, 2);
  EXPECT_NE(result.err.find("--id must be 1 to 128 bytes (got 129)"),
            std::string::npos)
      << result.err;
}

// Issue 14 item 3: worker.state_dir serves one worker at a time, and a
// worker restarted on it after a SIGKILL gives back the lock its crashed
// predecessor held, instead of the fleet waiting out its 60 s lease.
TEST_F(WorkerCliTest, AStateDirServesOneWorkerAndARestartGivesBackItsLocks) {
  const std::string config = dir_.File("state.yaml");
  std::ofstream(config)
      << "redis:\n  url: " << server_.url()
      << "\nlocks:\n  lease: 60s\nworker:\n  grace_period: 1s\n  state_dir: "
      << dir_.File("state")
      << "\n  sources:\n    schedules:\n"
         "      - {name: long, lock: long-job, every: 1s, "
         "handler: sleep, payload: {ms: 600000}}\n"
         "metrics:\n  listen: 127.0.0.1:0\n";
  const std::string key = "lockfleet:{long-job}:lock";
  auto owner = [&] {
    const Reply r = redis_->Execute({"HGET", key, "owner"});
    return r.type == Reply::Type::kString ? r.str : std::string();
  };
  auto first = StartWorker(config, "crashy");
  ASSERT_TRUE(WaitUntil([&] { return !owner().empty(); }, seconds(30)))
      << first->Stderr();
  const std::string crashed_owner = owner();

  const CliResult second = RunCli({"worker", "--config", config});
  EXPECT_EQ(second.status, 2) << second.err;
  EXPECT_NE(second.err.find("in use by another running worker"),
            std::string::npos)
      << second.err;

  first->Signal(SIGKILL);
  first->Wait();
  EXPECT_GT(redis_->Execute({"PTTL", key}).integer, 30000);
  auto restarted = StartWorker(config, "crashy");
  // Given back at start, then taken again by the restarted worker's own
  // schedule: a new owner long before the old lease could run out.
  EXPECT_TRUE(
      WaitUntil([&] { return !owner().empty() && owner() != crashed_owner; },
                seconds(20)))
      << restarted->Stderr();
  EXPECT_NE(restarted->Stderr().find("gave back lock 'long-job'"),
            std::string::npos)
      << restarted->Stderr();
  restarted->Signal(SIGTERM);
  EXPECT_EQ(restarted->Wait(seconds(60)), 0) << restarted->Stderr();
}

// systemd's side of Type=notify + WatchdogSec: a datagram socket named by
// $NOTIFY_SOCKET, read here as systemd would.
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path) : path_(path) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    bound_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~NotifySocket() { ::close(fd_); }
  bool bound() const { return bound_; }

  // The next message, or "" after `timeout`.
  std::string Next(milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) != 1) return "";
    char buffer[4096];
    const ssize_t n = ::recv(fd_, buffer, sizeof(buffer), 0);
    return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : "";
  }

  // Messages until one contains `what` (returned), or "" after `timeout`;
  // every message seen is appended to `seen`.
  std::string Until(const std::string& what, milliseconds timeout,
                    std::vector<std::string>* seen) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      const std::string message = Next(milliseconds(200));
      if (message.empty()) continue;
      seen->push_back(message);
      if (message.find(what) != std::string::npos) return message;
    }
    return "";
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool bound_ = false;
};

TEST_F(WorkerCliTest, UnderSystemdItNotifiesReadyPingsTheWatchdogAndStops) {
  NotifySocket systemd(dir_.File("notify"));
  ASSERT_TRUE(systemd.bound());
  const std::string config = WriteConfig(
      "worker:\n  threads: 1\n  grace_period: 2s\n  health_listen: "
      "127.0.0.1:0\n");
  CliProcess worker(
      {"worker", "--config", config, "--id", "w1"},
      {"NOTIFY_SOCKET=" + dir_.File("notify"), "WATCHDOG_USEC=400000"});
  std::vector<std::string> seen;
  const std::string ready = systemd.Until("READY=1", kLong, &seen);
  ASSERT_FALSE(ready.empty()) << worker.Stderr();
  EXPECT_NE(ready.find("STATUS=serving with 1 threads"), std::string::npos)
      << ready;
  // Pings at half the watchdog's 400 ms: several within a few seconds.
  int pings = 0;
  for (int i = 0; i < 3; ++i) {
    pings += !systemd.Until("WATCHDOG=1", seconds(10), &seen).empty();
  }
  EXPECT_EQ(pings, 3);
  worker.Signal(SIGTERM);
  EXPECT_FALSE(systemd.Until("STOPPING=1", kLong, &seen).empty());
  EXPECT_EQ(worker.Wait(kLong), 0) << worker.Stderr();

  // WATCHDOG_PID naming another process: that process pings, not this one.
  std::vector<std::string> other_seen;
  NotifySocket other(dir_.File("notify2"));
  CliProcess second({"worker", "--config", config, "--id", "w2"},
                    {"NOTIFY_SOCKET=" + dir_.File("notify2"),
                     "WATCHDOG_USEC=400000", "WATCHDOG_PID=1"});
  ASSERT_FALSE(other.Until("READY=1", kLong, &other_seen).empty());
  EXPECT_TRUE(other.Until("WATCHDOG=1", seconds(2), &other_seen).empty());
  second.Signal(SIGTERM);
  EXPECT_EQ(second.Wait(kLong), 0) << second.Stderr();
}

TEST_F(WorkerCliTest, RedisDownAtStartExitsUnavailable) {
  std::ofstream(dir_.File("down.yaml"))
      << "redis:\n  url: redis://127.0.0.1:1\n  connect_timeout: 200ms\n";
  const CliResult result =
      RunCli({"worker", "--config", dir_.File("down.yaml")});
  EXPECT_EQ(result.status, 69) << result.err;
  EXPECT_NE(result.err.find("127.0.0.1:1"), std::string::npos) << result.err;
}

TEST_F(WorkerCliTest, JobsProduceValidatesEveryLineFirst) {
  StartBroker();
  std::ofstream(dir_.File("jobs.jsonl"))
      << "# two jobs\n"
      << R"({"id":"a","lock":"l","type":"sleep"})"
      << "\n\n"
      << R"({"id":"b","lock":"","type":"sleep"})"
      << "\n";
  const CliResult bad = RunCli({"jobs", "produce", "--bootstrap",
                                broker_->bootstrap(), dir_.File("jobs.jsonl")});
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("jobs.jsonl:4: field 'lock': expected a non-empty "
                         "string"),
            std::string::npos)
      << bad.err;
  const CliResult good =
      RunCli({"jobs", "produce", "--bootstrap", broker_->bootstrap(),
              "--flash-sale", "25", "--products", "5"});
  EXPECT_EQ(good.status, 0) << good.err;
  EXPECT_NE(good.out.find("produced 25 jobs"), std::string::npos) << good.out;
}

TEST(DemoCliTest, ShortDemoHoldsEveryInvariant) {
  const CliResult result =
      RunCli({"demo", "--workers", "2", "--threads", "2", "--jobs", "200",
              "--products", "4", "--units", "25", "--timeout", "240"},
             {}, std::chrono::seconds(300));
  EXPECT_EQ(result.status, 0) << result.out << result.err;
  EXPECT_NE(
      result.out.find("jobs done       200 of 200: sold 100, sold out 100"),
      std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("oversold        0"), std::string::npos);
  EXPECT_NE(result.out.find("invariants: all hold"), std::string::npos);
  EXPECT_NE(result.out.find("metrics http://127.0.0.1:"), std::string::npos);
}

}  // namespace
}  // namespace lockfleet::testing
