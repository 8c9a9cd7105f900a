// JobRunner against a real redis-server: dedup, retries, fencing, dead
// letters, cancellation, the flash sale and scheduled occurrences.
#include "lockfleet/worker/runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "counting_observer.h"
#include "lockcore/lock_fixture.h"
#include "lockfleet/lockcore/fenced_resource.h"
#include "lockfleet/lockcore/rwlock.h"
#include "lockfleet/lockcore/semaphore.h"
#include "lockfleet/worker/builtin_handlers.h"
#include "support/loopback_bus.h"
#include "support/wait_until.h"

namespace lockfleet::worker {
namespace {

using std::chrono::milliseconds;

using testing::CountingObserver;

Job Purchase(std::string id, std::string product, std::string buyer = "") {
  Job job{.id = std::move(id),
          .lock = std::move(product),
          .type = "inventory.purchase"};
  if (!buyer.empty())
    job.payload["buyer"] = {config::Scalar::Type::kString, buyer};
  return job;
}

// One private redis-server for the suite, flushed before each test
// (lockcore's fixture).
class RunnerTest : public testing::LockTest {
 protected:
  void SetUp() override {
    LockTest::SetUp();
    handlers_ = std::make_shared<HandlerRegistry>();
    RegisterBuiltinHandlers(*handlers_);
  }

  void TearDown() override {
    for (const auto& locks : clients_) bus_->Unsubscribe(locks.get());
  }

  // A runner as a separate worker process would have it: its own
  // connections and LockClient, with unlock events carried between the
  // "processes" by a loopback bus (Kafka's role).
  std::shared_ptr<JobRunner> NewRunner(RunnerOptions options = {}) {
    auto redis = NewRedis();
    auto locks = std::make_shared<LockClient>(
        redis, LockClientOptions{.publisher = bus_});
    bus_->Subscribe(locks.get());
    clients_.push_back(locks);
    if (!options.observer) options.observer = observer_;
    options.retry_backoff = milliseconds(1);
    return std::make_shared<JobRunner>(locks, redis, handlers_, options);
  }

  int64_t DeadLetters() {
    return redis_->Execute({"LLEN", "lockfleet:jobs:dead"}).integer;
  }

  std::shared_ptr<HandlerRegistry> handlers_;
  std::shared_ptr<CountingObserver> observer_ =
      std::make_shared<CountingObserver>();
  std::shared_ptr<testing::LoopbackBus> bus_ =
      std::make_shared<testing::LoopbackBus>();
  std::vector<std::shared_ptr<LockClient>> clients_;  // unsubscribed last
};

TEST_F(RunnerTest, PurchaseSellsOneUnitAndRecordsTheBuyer) {
  SeedStock(*redis_, "lockfleet", "product:1", 2);
  auto runner = NewRunner();
  EXPECT_EQ(
      runner->Run(Purchase("o1", "product:1", "alice"), JobSource::kKafka, {}),
      JobResult::kOk);
  const StockAudit audit = AuditStock(*redis_, "lockfleet", "product:1");
  EXPECT_EQ(audit.stock, 1);
  EXPECT_EQ(audit.sold, 1);
  EXPECT_TRUE(audit.consistent());
  EXPECT_EQ(
      redis_
          ->Execute({"HGET",
                     FencedResource::KeyOf("lockfleet", "product:1", "sales"),
                     "o1"})
          .str,
      "alice");
  // The lock is free again.
  EXPECT_FALSE(LockClient(redis_).Inspect("product:1").locked);
}

TEST_F(RunnerTest, ARedeliveredJobDoesNotRunTwice) {
  SeedStock(*redis_, "lockfleet", "product:1", 5);
  auto first = NewRunner();
  auto second = NewRunner();  // another worker gets the redelivery
  EXPECT_EQ(first->Run(Purchase("o1", "product:1"), JobSource::kKafka, {}),
            JobResult::kOk);
  EXPECT_EQ(second->Run(Purchase("o1", "product:1"), JobSource::kKafka, {}),
            JobResult::kDuplicate);
  EXPECT_EQ(AuditStock(*redis_, "lockfleet", "product:1").stock, 4);
  EXPECT_EQ(observer_->count(JobResult::kDuplicate), 1);
}

TEST_F(RunnerTest, DoneMarkerExpiresAfterDedupTtl) {
  auto runner = NewRunner({.dedup_ttl = std::chrono::seconds(5)});
  Job job{.id = "s1", .lock = "l", .type = "sleep"};
  job.payload["ms"] = {config::Scalar::Type::kInteger, "0"};
  ASSERT_EQ(runner->Run(job, JobSource::kKafka, {}), JobResult::kOk);
  const long long ttl =
      redis_->Execute({"PTTL", runner->DoneKey("l", "s1")}).integer;
  EXPECT_GT(ttl, 0);
  EXPECT_LE(ttl, 5000);
}

TEST_F(RunnerTest, SoldOutIsRejectedAndFinal) {
  SeedStock(*redis_, "lockfleet", "product:1", 1);
  auto runner = NewRunner();
  EXPECT_EQ(runner->Run(Purchase("o1", "product:1"), JobSource::kKafka, {}),
            JobResult::kOk);
  EXPECT_EQ(runner->Run(Purchase("o2", "product:1"), JobSource::kKafka, {}),
            JobResult::kRejected);
  EXPECT_EQ(runner->Run(Purchase("o2", "product:1"), JobSource::kKafka, {}),
            JobResult::kDuplicate);
  const StockAudit audit = AuditStock(*redis_, "lockfleet", "product:1");
  EXPECT_EQ(audit.stock, 0);
  EXPECT_EQ(audit.sold, 1);
  EXPECT_EQ(audit.oversold(), 0);
}

TEST_F(RunnerTest, FlashSaleAcrossWorkersNeverOversells) {
  constexpr int kProducts = 3, kUnits = 40, kJobs = 300, kWorkers = 4,
                kThreadsPerWorker = 3;
  for (int p = 0; p < kProducts; ++p) {
    SeedStock(*redis_, "lockfleet", "product:" + std::to_string(p), kUnits);
  }
  std::vector<std::shared_ptr<JobRunner>> runners;
  for (int w = 0; w < kWorkers; ++w) runners.push_back(NewRunner());
  std::atomic<int> next{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kWorkers * kThreadsPerWorker; ++t) {
    threads.emplace_back([&, t] {
      for (int i; (i = next++) < kJobs;) {
        // Every job is delivered twice, to different workers.
        for (int copy = 0; copy < 2; ++copy) {
          runners[(t + copy) % kWorkers]->Run(
              Purchase("o" + std::to_string(i),
                       "product:" + std::to_string(i % kProducts)),
              JobSource::kKafka, {});
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int p = 0; p < kProducts; ++p) {
    const StockAudit audit =
        AuditStock(*redis_, "lockfleet", "product:" + std::to_string(p));
    EXPECT_EQ(audit.sold, kUnits) << p;
    EXPECT_EQ(audit.stock, 0) << p;
    EXPECT_EQ(audit.oversold(), 0) << p;
  }
  EXPECT_EQ(observer_->count(JobResult::kOk), kProducts * kUnits);
  EXPECT_EQ(observer_->count(JobResult::kRejected), kJobs - kProducts * kUnits);
  EXPECT_EQ(observer_->count(JobResult::kDuplicate), kJobs);
  EXPECT_EQ(observer_->count(JobResult::kFailed), 0);
}

TEST_F(RunnerTest, AStaleHolderIsFencedOffAndRetries) {
  SeedStock(*redis_, "lockfleet", "product:1", 10);
  auto other_redis = NewRedis();
  LockClient other(other_redis);
  std::atomic<int> calls{0};
  // The first attempt behaves like a holder paused past its lease: while it
  // "sleeps", the lock is taken from it and a newer holder writes.
  handlers_->Register(
      "paused.purchase", {.run = [&](JobContext& context) {
        if (calls++ == 0) {
          other.ForceUnlock(context.job.lock);
          Lease newer = other.Acquire(context.job.lock);
          FencedResource(other_redis, context.job.lock)
              .Write(newer.fence(),
                     {{"SET", context.resource.Key("touched"), "1"}});
        }
        return handlers_->Find("inventory.purchase")->run(context);
      }});
  auto runner = NewRunner();
  Job job = Purchase("o1", "product:1");
  job.type = "paused.purchase";
  EXPECT_EQ(runner->Run(job, JobSource::kKafka, {}), JobResult::kOk);
  EXPECT_EQ(calls.load(), 2);  // the stale attempt was refused, then retried
  const StockAudit audit = AuditStock(*redis_, "lockfleet", "product:1");
  EXPECT_EQ(audit.stock, 9);  // sold exactly once
  EXPECT_EQ(audit.sold, 1);
}

TEST_F(RunnerTest, AFailingHandlerIsRetriedThenDeadLettered) {
  std::atomic<int> calls{0};
  handlers_->Register("flaky", {.run = [&](JobContext&) -> JobResult {
                        ++calls;
                        throw std::runtime_error("boom");
                      }});
  auto runner = NewRunner({.max_attempts = 3});
  const Job job{.id = "f1", .lock = "l", .type = "flaky"};
  EXPECT_EQ(runner->Run(job, JobSource::kKafka, {}), JobResult::kFailed);
  EXPECT_EQ(calls.load(), 3);
  EXPECT_EQ(DeadLetters(), 1);
  const std::string letter =
      redis_->Execute({"LINDEX", "lockfleet:jobs:dead", "0"}).str;
  EXPECT_NE(letter.find("failed 3 times; last: boom"), std::string::npos)
      << letter;
  EXPECT_NE(letter.find("\"id\":\"f1\""), std::string::npos) << letter;
  // Not marked done: sending it again runs it again.
  EXPECT_EQ(redis_->Execute({"EXISTS", runner->DoneKey("l", "f1")}).integer, 0);
  EXPECT_FALSE(LockClient(redis_).Inspect("l").locked);
}

// An error *reply* where the runner reads a value — here EXISTS of the
// done marker refused by the ACL — fails the attempt; it is never read as
// "not done" (which would run a job that may be done). A cluster that is
// down answers such replies too (CLUSTERDOWN): those are waited out.
TEST_F(RunnerTest, AnErrorReplyToTheDoneMarkerCheckNeverRunsTheJob) {
  ASSERT_EQ(redis_
                ->Execute({"ACL", "SETUSER", "noexists", "on", ">pw", "~*",
                           "&*", "+@all", "-exists"})
                .str,
            "OK");
  RedisOptions o;
  o.url = server_->url();
  o.url.insert(o.url.find("://") + 3, "noexists:pw@");
  auto redis = std::make_shared<RedisClient>(o);
  auto locks = std::make_shared<LockClient>(redis);
  std::atomic<int> calls{0};
  handlers_->Register("counted", {.run = [&](JobContext&) -> JobResult {
                        ++calls;
                        return JobResult::kOk;
                      }});
  JobRunner runner(locks, redis, handlers_,
                   {.max_attempts = 2, .retry_backoff = milliseconds(1)});
  const Job job{.id = "e1", .lock = "l", .type = "counted"};
  EXPECT_EQ(runner.Run(job, JobSource::kKafka, {}), JobResult::kFailed);
  EXPECT_EQ(calls.load(), 0);
  EXPECT_EQ(DeadLetters(), 1);
  const std::string letter =
      redis_->Execute({"LINDEX", "lockfleet:jobs:dead", "0"}).str;
  EXPECT_NE(letter.find("EXISTS done marker answered an error: NOPERM"),
            std::string::npos)
      << letter;
  EXPECT_FALSE(LockClient(redis_).Inspect("l").locked);
}

TEST_F(RunnerTest, AHandlersOwnCancellationWithoutShutdownIsAFailure) {
  handlers_->Register("quitter", {.run = [](JobContext&) -> JobResult {
                        throw JobCancelled();
                      }});
  auto runner = NewRunner({.max_attempts = 2});
  EXPECT_EQ(runner->Run({.id = "q1", .lock = "l", .type = "quitter"},
                        JobSource::kKafka, {}),
            JobResult::kFailed);  // not kCancelled: that would stall its
                                  // partition's commits for good
  EXPECT_EQ(DeadLetters(), 1);
}

TEST_F(RunnerTest, ARedisOutageCostsNoAttemptAndLosesNoJob) {
  SeedStock(*redis_, "lockfleet", "product:1", 5);
  // A runner with short timeouts, so the outage shows as errors quickly.
  auto redis = std::make_shared<RedisClient>(
      RedisOptions{.url = server_->url(),
                   .connect_timeout = milliseconds(200),
                   .command_timeout = milliseconds(200)});
  auto locks = std::make_shared<LockClient>(redis);
  JobRunner runner(locks, redis, handlers_,
                   {.max_attempts = 1,
                    .retry_backoff = milliseconds(10),
                    .observer = observer_});
  server_->Pause();  // SIGSTOP: every command times out
  std::thread resume([&] {
    std::this_thread::sleep_for(milliseconds(1500));
    server_->Resume();
  });
  const JobResult result =
      runner.Run(Purchase("o1", "product:1"), JobSource::kKafka, {});
  resume.join();
  EXPECT_EQ(result, JobResult::kOk);  // one attempt allowed, and it sold
  EXPECT_EQ(AuditStock(*redis_, "lockfleet", "product:1").sold, 1);
  EXPECT_EQ(DeadLetters(), 0);
}

TEST_F(RunnerTest, ShutdownDuringARedisOutageHandsTheJobBack) {
  auto redis = std::make_shared<RedisClient>(
      RedisOptions{.url = server_->url(),
                   .connect_timeout = milliseconds(100),
                   .command_timeout = milliseconds(100)});
  JobRunner runner(std::make_shared<LockClient>(redis), redis, handlers_,
                   {.retry_backoff = milliseconds(10)});
  server_->Pause();
  std::stop_source stop;
  std::thread stopper([&] {
    std::this_thread::sleep_for(milliseconds(500));
    stop.request_stop();
  });
  // An unknown type must be dead-lettered, which needs Redis: handed back.
  EXPECT_EQ(runner.Run({.id = "u1", .lock = "l", .type = "nope"},
                       JobSource::kKafka, stop.get_token()),
            JobResult::kCancelled);
  EXPECT_FALSE(runner.RejectMalformed("{x", "not JSON", stop.get_token()));
  stopper.join();
  server_->Resume();
  // (No assertion on the dead-letter list: a write that timed out may still
  // sit in the paused server's socket buffer and be applied on resume. The
  // job is redelivered either way, which is what matters.)
}

TEST_F(RunnerTest, AHandlerThatRecoversSucceeds) {
  std::atomic<int> calls{0};
  handlers_->Register("once-flaky", {.run = [&](JobContext&) {
                        if (calls++ == 0) throw std::runtime_error("transient");
                        return JobResult::kOk;
                      }});
  auto runner = NewRunner();
  EXPECT_EQ(runner->Run({.id = "r1", .lock = "l", .type = "once-flaky"},
                        JobSource::kKafka, {}),
            JobResult::kOk);
  EXPECT_EQ(DeadLetters(), 0);
}

TEST_F(RunnerTest, UnknownTypeAndMalformedRecordsAreDeadLettered) {
  auto runner = NewRunner();
  EXPECT_EQ(runner->Run({.id = "u1", .lock = "l", .type = "nope"},
                        JobSource::kKafka, {}),
            JobResult::kFailed);
  EXPECT_TRUE(runner->RejectMalformed("{garbage", "not JSON", {}));
  EXPECT_EQ(DeadLetters(), 2);
  EXPECT_EQ(observer_->count(JobResult::kFailed), 2);
}

TEST_F(RunnerTest, AHugeMalformedRecordIsDeadLetteredClipped) {
  // Regression (chaos scenario 6): a 2 MB bad record used to be stored
  // whole in the dead-letter list (up to 10,000 of them) and logged whole.
  std::vector<std::string> logged;
  RunnerOptions options;
  options.log = [&](config::LogLevel, std::string_view line) {
    logged.emplace_back(line);
  };
  auto runner = NewRunner(options);
  const std::string huge = "{" + std::string(2 * 1024 * 1024, 'x');
  EXPECT_TRUE(runner->RejectMalformed(huge, "not JSON", {}));
  const std::string letter =
      redis_->Execute({"LINDEX", "lockfleet:jobs:dead", "0"}).str;
  EXPECT_LT(letter.size(), 65 * 1024u);
  EXPECT_EQ(letter.rfind("malformed: not JSON\t", 0), 0u)
      << letter.substr(0, 80);
  EXPECT_NE(letter.find("... (2097153 bytes in all)"), std::string::npos);
  ASSERT_EQ(logged.size(), 1u);
  EXPECT_LT(logged[0].size(), 2048u);
}

// Jobs on different locks that share a limit of 2: at most 2 handlers run
// at once across 4 workers of 3 threads each, and every job runs.
TEST_F(RunnerTest, ALimitCapsHowManyJobsRunAtOnceAcrossWorkers) {
  std::atomic<int> running{0}, most{0};
  handlers_->Register(
      "busy", {.run = [&](JobContext&) {
        const int now = ++running;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(milliseconds(20));
        --running;
        return JobResult::kOk;
      }});
  constexpr int kJobs = 48, kWorkers = 4, kThreadsPerWorker = 3;
  std::vector<std::shared_ptr<JobRunner>> runners;
  for (int w = 0; w < kWorkers; ++w) runners.push_back(NewRunner());
  std::atomic<int> next{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kWorkers * kThreadsPerWorker; ++t) {
    threads.emplace_back([&, t] {
      for (int i; (i = next++) < kJobs;) {
        Job job{.id = "j" + std::to_string(i),
                .lock = "order:" + std::to_string(i),
                .type = "busy",
                .limit = config::LimitConfig{.name = "partner", .permits = 2}};
        runners[t % kWorkers]->Run(job, JobSource::kKafka, {});
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_LE(most.load(), 2);
  EXPECT_EQ(most.load(), 2) << "the limit lets 2 run at once, not fewer";
  EXPECT_EQ(observer_->count(JobResult::kOk), kJobs);
  const SemaphoreInfo info = LockClient(redis_).Semaphore("partner").Inspect();
  EXPECT_EQ(info.permits, 2) << "set from the job's limit";
  EXPECT_EQ(info.used, 0) << "every permit given back";
}

TEST_F(RunnerTest, ALimitWaitTimeoutIsReportedAndDeadLettered) {
  LockClient holder(NewRedis());
  Semaphore partner = holder.Semaphore("partner");
  partner.SetPermits(1);
  PermitResult held = partner.TryAcquire(1);
  ASSERT_TRUE(held);
  auto runner = NewRunner({.lock_wait = milliseconds(50)});
  Job job{.id = "t1",
          .lock = "free",
          .type = "sleep",
          .limit = config::LimitConfig{.name = "partner", .permits = 1}};
  EXPECT_EQ(runner->Run(job, JobSource::kKafka, {}), JobResult::kTimeout);
  EXPECT_EQ(DeadLetters(), 1);
  EXPECT_FALSE(LockClient(redis_).Inspect("free").locked)
      << "the lock is given back with the job";
}

// The permits gauges' source: every limit the runner has used, as Redis
// has it now (permits out, free, waiters), and only those.
TEST_F(RunnerTest, SampleLimitsReportsEveryLimitUsedAsRedisHasIt) {
  auto runner = NewRunner();
  runner->SampleLimits();
  EXPECT_TRUE(observer_->limits().empty()) << "no limit used yet";
  Job job{.id = "s1",
          .lock = "free",
          .type = "sleep",
          .limit = config::LimitConfig{.name = "partner", .permits = 3}};
  job.payload["ms"] = {config::Scalar::Type::kInteger, "0"};
  ASSERT_EQ(runner->Run(job, JobSource::kKafka, {}), JobResult::kOk);
  LockClient holder(NewRedis());
  Semaphore partner = holder.Semaphore("partner");
  PermitResult two = partner.TryAcquire(2);
  ASSERT_TRUE(two);
  holder.Semaphore("elsewhere").SetPermits(5);  // not this runner's limit
  runner->SampleLimits();
  using Sample = CountingObserver::LimitSample;
  EXPECT_EQ(observer_->limits(),
            (std::map<std::string, Sample>{
                {"partner", Sample{.in_use = 2, .available = 1}}}));
  two.permits.Release();
  runner->SampleLimits();
  EXPECT_EQ(observer_->limits().at("partner"),
            (Sample{.in_use = 0, .available = 3}));
  // Gone (deleted by an operator, a Redis restart without its data): not
  // known any more, until a job sets it again.
  redis_->Execute({"DEL", "lockfleet:{partner}:semaphore"});
  ASSERT_FALSE(holder.Semaphore("partner").Inspect().exists)
      << "the test deletes the wrong key";
  runner->SampleLimits();
  EXPECT_TRUE(observer_->limits().empty());
  EXPECT_EQ(observer_->unknown(), 1);
}

TEST_F(RunnerTest, LockWaitTimeoutIsReportedAndDeadLettered) {
  LockClient holder(NewRedis());
  Lease held = holder.Acquire("busy");
  auto runner = NewRunner({.lock_wait = milliseconds(50)});
  EXPECT_EQ(runner->Run({.id = "t1", .lock = "busy", .type = "sleep"},
                        JobSource::kKafka, {}),
            JobResult::kTimeout);
  EXPECT_EQ(DeadLetters(), 1);
}

TEST_F(RunnerTest, CancellationWhileWaitingHandsTheJobBack) {
  LockClient holder(NewRedis());
  Lease held = holder.Acquire("busy");
  auto runner = NewRunner();
  std::stop_source stop;
  std::thread canceller([&] {
    std::this_thread::sleep_for(milliseconds(50));
    stop.request_stop();
  });
  EXPECT_EQ(runner->Run({.id = "c1", .lock = "busy", .type = "sleep"},
                        JobSource::kKafka, stop.get_token()),
            JobResult::kCancelled);
  canceller.join();
  EXPECT_EQ(DeadLetters(), 0);
  EXPECT_EQ(redis_->Execute({"EXISTS", runner->DoneKey("busy", "c1")}).integer,
            0);
}

TEST_F(RunnerTest, CancellationWhileRunningReleasesTheLock) {
  auto runner = NewRunner();
  std::stop_source stop;
  Job job{.id = "c2", .lock = "l", .type = "sleep"};
  job.payload["ms"] = {config::Scalar::Type::kInteger, "600000"};
  std::thread canceller([&] {
    LockClient probe(NewRedis());
    while (!probe.Inspect("l").locked)
      std::this_thread::sleep_for(milliseconds(1));
    stop.request_stop();
  });
  EXPECT_EQ(runner->Run(job, JobSource::kKafka, stop.get_token()),
            JobResult::kCancelled);
  canceller.join();
  EXPECT_FALSE(LockClient(redis_).Inspect("l").locked);
  EXPECT_EQ(redis_->Execute({"EXISTS", runner->DoneKey("l", "c2")}).integer, 0);
}

config::ScheduleConfig Every(std::string name, std::string handler = "sleep") {
  config::ScheduleConfig schedule{.name = name,
                                  .lock = name,
                                  .every = std::chrono::seconds(1),
                                  .handler = std::move(handler)};
  schedule.payload["ms"] = {config::Scalar::Type::kInteger, "20"};
  return schedule;
}

// A schedule only tries its limit, as it only tries its lock: busy permits
// give the lock back and ask to be tried again, no thread waits.
TEST_F(RunnerTest, AnOccurrenceWhoseLimitIsBusyTriesAgainWithoutWaiting) {
  LockClient holder(NewRedis());
  Semaphore partner = holder.Semaphore("partner");
  partner.SetPermits(1);
  PermitResult held = partner.TryAcquire(1);
  ASSERT_TRUE(held);
  auto runner = NewRunner();
  config::ScheduleConfig schedule = Every("limited");
  schedule.limit = config::LimitConfig{.name = "partner", .permits = 1};
  const SysMillis due{milliseconds(1'700'000'000'000)};
  OccurrenceResult busy = runner->RunOccurrence(schedule, due, {});
  EXPECT_FALSE(busy.result.has_value());
  EXPECT_EQ(busy.retry_after, JobRunner::kLimitRetry);
  EXPECT_FALSE(holder.Inspect("limited").locked) << "the lock given back";
  ASSERT_EQ(held.permits.Release(), ReleaseStatus::kReleased);
  EXPECT_EQ(runner->RunOccurrence(schedule, due, {}).result, JobResult::kOk);
  EXPECT_EQ(partner.Inspect().used, 0);
}

TEST_F(RunnerTest, AnOccurrenceRunsOnceAcrossWorkers) {
  const config::ScheduleConfig schedule = Every("report");
  const SysMillis due{milliseconds(1'700'000'000'000)};
  std::vector<std::shared_ptr<JobRunner>> runners;
  for (int i = 0; i < 3; ++i) {
    runners.push_back(NewRunner({.worker_id = "w" + std::to_string(i)}));
  }
  std::vector<std::thread> threads;
  std::atomic<int> ran{0}, duplicate{0};
  for (auto& runner : runners) {
    threads.emplace_back([&, runner] {
      while (true) {
        const OccurrenceResult result =
            runner->RunOccurrence(schedule, due, {});
        if (!result.result) {  // another worker holds it: come back later
          std::this_thread::sleep_for(
              std::min(result.retry_after, milliseconds(5)));
          continue;
        }
        if (*result.result == JobResult::kOk) ++ran;
        if (*result.result == JobResult::kDuplicate) ++duplicate;
        return;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(ran.load(), 1);
  EXPECT_EQ(duplicate.load(), 2);
  const Reply history = redis_->Execute(
      {"LRANGE", runners[0]->ScheduleHistoryKey(schedule), "0", "-1"});
  ASSERT_EQ(history.elements.size(), 1u);
  EXPECT_EQ(history.elements[0].str.rfind("1700000000000 w", 0), 0u)
      << history.elements[0].str;
  // An older occurrence arriving late is not run either.
  EXPECT_EQ(
      runners[0]->RunOccurrence(schedule, due - milliseconds(1000), {}).result,
      JobResult::kDuplicate);
  // The next one is.
  EXPECT_EQ(
      runners[1]->RunOccurrence(schedule, due + milliseconds(1000), {}).result,
      JobResult::kOk);
}

TEST_F(RunnerTest, AnOccurrenceWhoseRunnerDiedIsRunByAnother) {
  const config::ScheduleConfig schedule = Every("report");
  const SysMillis due{milliseconds(1'700'000'000'000)};
  // A runner that took the lock and died: its lease (no watchdog) runs out.
  LockClient dead(NewRedis());
  AcquireResult taken = dead.TryAcquire("report", {.lease = milliseconds(300)});
  ASSERT_TRUE(taken);
  // It never renews nor releases (kept alive here so that it is not released
  // early): the process "died".
  auto runner = NewRunner();
  OccurrenceResult result = runner->RunOccurrence(schedule, due, {});
  EXPECT_FALSE(result.result.has_value());
  EXPECT_GT(result.retry_after, milliseconds(0));
  EXPECT_LE(result.retry_after, milliseconds(300));
  std::this_thread::sleep_for(result.retry_after + milliseconds(20));
  result = runner->RunOccurrence(schedule, due, {});
  while (!result.result) {  // a loaded machine may need another go
    std::this_thread::sleep_for(result.retry_after);
    result = runner->RunOccurrence(schedule, due, {});
  }
  EXPECT_EQ(result.result, JobResult::kOk);
}

TEST_F(RunnerTest, AFailedOccurrenceIsRecordedNotRepeated) {
  handlers_->Register("broken", {.run = [](JobContext&) -> JobResult {
                        throw std::runtime_error("report generator crashed");
                      }});
  const config::ScheduleConfig schedule = Every("nightly", "broken");
  const SysMillis due{milliseconds(1'700'000'000'000)};
  auto a = NewRunner();
  auto b = NewRunner();
  EXPECT_EQ(a->RunOccurrence(schedule, due, {}).result, JobResult::kFailed);
  EXPECT_EQ(b->RunOccurrence(schedule, due, {}).result, JobResult::kDuplicate);
  const Reply history =
      redis_->Execute({"LRANGE", a->ScheduleHistoryKey(schedule), "0", "-1"});
  ASSERT_EQ(history.elements.size(), 1u);
  EXPECT_NE(history.elements[0].str.find(" failed "), std::string::npos);
}

// --- keys and grants (issue 13, items 3 and 5) -------------------------------

// A job id with '}' and ':' used to write its done marker over the stock of
// another product: lock "A", id "1}:stock" gave
// "lockfleet:res:{A}:job:1}:stock", the stock key of product "A}:job:1".
TEST_F(RunnerTest, AJobIdCannotReachAnotherProductsStock) {
  SeedStock(*redis_, "lockfleet", "A", 5);
  SeedStock(*redis_, "lockfleet", "A}:job:1", 5);
  auto runner = NewRunner();
  EXPECT_EQ(runner->Run(Purchase("1}:stock", "A"), JobSource::kKafka, {}),
            JobResult::kOk);
  EXPECT_EQ(redis_
                ->Execute({"GET", FencedResource::KeyOf("lockfleet", "A}:job:1",
                                                        {"stock"})})
                .str,
            "5");
  EXPECT_TRUE(AuditStock(*redis_, "lockfleet", "A}:job:1").consistent());
  EXPECT_EQ(AuditStock(*redis_, "lockfleet", "A").sold, 1);
}

// Two jobs on different locks used to share a done marker, and the second
// was skipped as a duplicate of the first.
TEST_F(RunnerTest, JobsOnDifferentLocksNeverShareADoneMarker) {
  auto runner = NewRunner();
  Job first{.id = "y", .lock = "A}:job:x", .type = "sleep"};
  first.payload["ms"] = {config::Scalar::Type::kInteger, "0"};
  Job second = first;
  second.id = "x}:job:y";
  second.lock = "A";
  EXPECT_NE(runner->DoneKey(first.lock, first.id),
            runner->DoneKey(second.lock, second.id));
  EXPECT_EQ(runner->Run(first, JobSource::kKafka, {}), JobResult::kOk);
  EXPECT_EQ(runner->Run(second, JobSource::kKafka, {}), JobResult::kOk);
  EXPECT_EQ(runner->Run(second, JobSource::kKafka, {}), JobResult::kDuplicate);
  EXPECT_EQ(runner->DoneKey("A", "x}:job:y"),
            "lockfleet:res:{A}:job:x%7D%3Ajob%3Ay");
}

// Schedule "x:history" used to read the history list of schedule "x" (on
// the same lock) as its marker, and failed on it for ever.
TEST_F(RunnerTest, SchedulesOnOneLockKeepTheirOwnMarkersAndHistories) {
  config::ScheduleConfig x = Every("x");
  x.lock = "shared";
  config::ScheduleConfig x_history = Every("x:history");
  x_history.lock = "shared";
  const SysMillis due{milliseconds(1'700'000'000'000)};
  auto runner = NewRunner();
  EXPECT_EQ(runner->RunOccurrence(x, due, {}).result, JobResult::kOk);
  EXPECT_EQ(runner->RunOccurrence(x_history, due, {}).result, JobResult::kOk);
  EXPECT_NE(runner->ScheduleHistoryKey(x),
            runner->ScheduleHistoryKey(x_history));
  for (const auto* schedule : {&x, &x_history}) {
    EXPECT_EQ(redis_->Execute({"LLEN", runner->ScheduleHistoryKey(*schedule)})
                  .integer,
              1)
        << schedule->name;
  }
}

// The runner that gets a schedule's lock claims the schedule's resource
// before it runs anything: a grant older than one the resource has seen (a
// rolled-back token, a stale lease) runs nothing and comes back later.
TEST_F(RunnerTest, AnOccurrenceWhoseGrantIsStaleRunsNothing) {
  std::atomic<int> calls{0};
  handlers_->Register("counted", {.run = [&](JobContext&) {
                        ++calls;
                        return JobResult::kOk;
                      }});
  const config::ScheduleConfig schedule = Every("report", "counted");
  FencedResource resource(redis_, schedule.lock);
  ASSERT_TRUE(
      resource.Claim({.fence = FencedResource::kMaxFence, .owner = "future"})
          .accepted);
  auto runner = NewRunner();
  const OccurrenceResult result = runner->RunOccurrence(
      schedule, SysMillis{milliseconds(1'700'000'000'000)}, {});
  EXPECT_FALSE(result.result.has_value());
  EXPECT_GT(result.retry_after, milliseconds(0));
  EXPECT_EQ(calls.load(), 0);
  EXPECT_EQ(
      redis_->Execute({"LLEN", runner->ScheduleHistoryKey(schedule)}).integer,
      0);
  EXPECT_FALSE(LockClient(redis_).Inspect(schedule.lock).locked);
  EXPECT_EQ(resource.HighestFence(), FencedResource::kMaxFence);
}

// A runner's claim is its lease's grant: a second claim or write with the
// same token from another owner is refused while the occurrence runs.
TEST_F(RunnerTest, AnOccurrenceClaimsTheScheduleResourceForItsGrant) {
  std::optional<FenceGrant> seen;
  std::optional<FenceGrant> highest;
  handlers_->Register("peek", {.run = [&](JobContext& context) {
                        seen = FenceGrant::Of(context.lease);
                        highest = context.resource.HighestGrant();
                        return JobResult::kOk;
                      }});
  const config::ScheduleConfig schedule = Every("report", "peek");
  auto runner = NewRunner();
  EXPECT_EQ(runner
                ->RunOccurrence(schedule,
                                SysMillis{milliseconds(1'700'000'000'000)}, {})
                .result,
            JobResult::kOk);
  ASSERT_TRUE(seen && highest);
  EXPECT_EQ(*highest, *seen);  // claimed before the handler ran
}

// --- read-write locks (lock_mode; issue 17, item 5) --------------------------

Job RwJob(std::string id, std::string lock, config::LockMode mode,
          std::string type = "probe") {
  return Job{.id = std::move(id),
             .lock = std::move(lock),
             .type = std::move(type),
             .lock_mode = mode};
}

// The handler "probe" of the read-write tests: counts the readers and
// writers inside, notes any overlap a read-write lock forbids, and holds a
// job until the test lets its kind go (so overlaps are made to happen, not
// hoped for).
class RwProbe {
 public:
  JobResult Run(JobContext& context) {
    const bool write = context.rw_lease != nullptr &&
                       context.rw_lease->mode() == RwMode::kWrite;
    {
      std::lock_guard lock(mu_);
      if (context.rw_lease == nullptr) bad_ = true;  // not a read-write hold
      if (write ? readers_ + writers_ > 0 : writers_ > 0) violation_ = true;
      (write ? writers_ : readers_)++;
      most_readers_ = std::max(most_readers_, readers_);
      started_.push_back(context.job.id);
    }
    const std::atomic<bool>& go = write ? writers_go_ : readers_go_;
    testing::WaitUntil([&] { return go.load(); }, std::chrono::seconds(30));
    {
      std::lock_guard lock(mu_);
      (write ? writers_ : readers_)--;
    }
    return JobResult::kOk;
  }

  void LetReadersGo() { readers_go_ = true; }
  void LetWritersGo() { writers_go_ = true; }
  int inside() {
    std::lock_guard lock(mu_);
    return readers_ + writers_;
  }
  int readers() {
    std::lock_guard lock(mu_);
    return readers_;
  }
  int writers() {
    std::lock_guard lock(mu_);
    return writers_;
  }
  bool started(const std::string& id) {
    std::lock_guard lock(mu_);
    return std::find(started_.begin(), started_.end(), id) != started_.end();
  }
  bool violation() {
    std::lock_guard lock(mu_);
    return violation_ || bad_;
  }
  int most_readers() {
    std::lock_guard lock(mu_);
    return most_readers_;
  }

 private:
  std::mutex mu_;
  int readers_ = 0, writers_ = 0, most_readers_ = 0;
  bool violation_ = false, bad_ = false;
  std::vector<std::string> started_;
  std::atomic<bool> readers_go_{false}, writers_go_{false};
};

// Two read jobs on one lock (on two workers) run at the same time; a write
// job queued behind them starts only once both ended; a read job arriving
// while the write job runs waits for it. Every job runs once, and the lock
// is free at the end.
TEST_F(RunnerTest, ReadJobsOverlapAndAWriteJobOverlapsNone) {
  RwProbe probe;
  handlers_->Register("probe",
                      {.run = [&](JobContext& c) { return probe.Run(c); }});
  auto a = NewRunner();
  auto b = NewRunner();
  auto c = NewRunner();
  LockClient inspector(NewRedis());
  ReadWriteLock catalogue = inspector.ReadWriteLock("catalogue");
  std::vector<std::jthread> runs;
  std::map<std::string, std::atomic<JobResult>> results;
  for (const char* id : {"r1", "r2", "w1", "r3"})
    results[id] = JobResult::kFailed;
  const auto run = [&](JobRunner& runner, Job job) {
    runs.emplace_back([&runner, &results, job] {
      results.at(job.id) = runner.Run(job, JobSource::kKafka, {});
    });
  };
  run(*a, RwJob("r1", "catalogue", config::LockMode::kRead));
  run(*b, RwJob("r2", "catalogue", config::LockMode::kRead));
  ASSERT_TRUE(testing::WaitUntil([&] { return probe.readers() == 2; }))
      << "two readers at once";
  run(*c, RwJob("w1", "catalogue", config::LockMode::kWrite));
  ASSERT_TRUE(testing::WaitUntil([&] {
    return catalogue.Inspect().waiters == 1;
  })) << "the writer queues behind the readers";
  EXPECT_FALSE(probe.started("w1"));
  probe.LetReadersGo();
  ASSERT_TRUE(testing::WaitUntil([&] { return probe.writers() == 1; }));
  EXPECT_EQ(probe.readers(), 0);
  EXPECT_TRUE(catalogue.Inspect().write_locked());
  // A reader now waits for the writer.
  run(*a, RwJob("r3", "catalogue", config::LockMode::kRead));
  ASSERT_TRUE(testing::WaitUntil([&] {
    return catalogue.Inspect().waiters == 1;
  })) << "the reader queues behind the writer";
  EXPECT_FALSE(probe.started("r3"));
  probe.LetWritersGo();
  runs.clear();  // joins
  for (const auto& [id, result] : results) {
    EXPECT_EQ(result.load(), JobResult::kOk) << id;
  }
  EXPECT_FALSE(probe.violation());
  EXPECT_EQ(probe.most_readers(), 2);
  EXPECT_TRUE(catalogue.Inspect().holders.empty()) << "every hold given back";
  EXPECT_EQ(observer_->count(JobResult::kOk), 4);
}

// Many read and write jobs on one lock across 3 workers of 2 threads: never
// a writer beside anyone, every job runs once.
TEST_F(RunnerTest, MixedReadAndWriteJobsNeverOverlapAWriter) {
  RwProbe probe;
  probe.LetReadersGo();
  probe.LetWritersGo();
  std::atomic<int> runs{0};
  handlers_->Register("probe", {.run = [&](JobContext& c) {
                        ++runs;
                        const JobResult result = probe.Run(c);
                        std::this_thread::sleep_for(milliseconds(2));
                        return result;
                      }});
  constexpr int kJobs = 40, kWorkers = 3, kThreadsPerWorker = 2;
  std::vector<std::shared_ptr<JobRunner>> runners;
  for (int w = 0; w < kWorkers; ++w) runners.push_back(NewRunner());
  std::atomic<int> next{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kWorkers * kThreadsPerWorker; ++t) {
    threads.emplace_back([&, t] {
      for (int i; (i = next++) < kJobs;) {
        runners[t % kWorkers]->Run(RwJob("j" + std::to_string(i), "catalogue",
                                         i % 4 == 0 ? config::LockMode::kWrite
                                                    : config::LockMode::kRead),
                                   JobSource::kKafka, {});
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_FALSE(probe.violation());
  EXPECT_EQ(runs.load(), kJobs);
  EXPECT_EQ(observer_->count(JobResult::kOk), kJobs);
  EXPECT_TRUE(
      LockClient(redis_).ReadWriteLock("catalogue").Inspect().holders.empty());
}

// The plain lock and the read-write lock of one name are two locks: a plain
// job runs while a writer holds the read-write lock.
TEST_F(RunnerTest, ThePlainLockAndTheReadWriteLockOfOneNameAreTwoLocks) {
  LockClient holder(NewRedis());
  RwLease held = holder.ReadWriteLock("x").Acquire(RwMode::kWrite);
  auto runner = NewRunner({.lock_wait = milliseconds(50)});
  Job plain{.id = "p", .lock = "x", .type = "sleep"};
  plain.payload["ms"] = {config::Scalar::Type::kInteger, "0"};
  EXPECT_EQ(runner->Run(plain, JobSource::kKafka, {}), JobResult::kOk);
  Job read = plain;
  read.id = "r";
  read.lock_mode = config::LockMode::kRead;
  EXPECT_EQ(runner->Run(read, JobSource::kKafka, {}), JobResult::kTimeout);
}

// A write hold fences as a lease does: the flash sale's fenced script takes
// its grant, and a stale write grant is refused and retried.
TEST_F(RunnerTest, APurchaseUnderAWriteLockIsFenced) {
  SeedStock(*redis_, "lockfleet", "product:1", 2);
  auto runner = NewRunner();
  Job job = Purchase("o1", "product:1", "alice");
  job.lock_mode = config::LockMode::kWrite;
  EXPECT_EQ(runner->Run(job, JobSource::kKafka, {}), JobResult::kOk);
  EXPECT_EQ(runner->Run(job, JobSource::kKafka, {}), JobResult::kDuplicate);
  const StockAudit audit = AuditStock(*redis_, "lockfleet", "product:1");
  EXPECT_EQ(audit.stock, 1);
  EXPECT_EQ(audit.sold, 1);
  // The resource saw the write grant's token, and its owner is the hold's.
  FencedResource resource(redis_, "product:1");
  const FenceGrant highest = resource.HighestGrant();
  EXPECT_GT(highest.fence, 0);
  EXPECT_NE(highest.owner.find(":job:"), std::string::npos) << highest.owner;
}

TEST_F(RunnerTest, AReadWriteLockWaitTimeoutNamesTheHolders) {
  LockClient holder(NewRedis());
  RwLease held = holder.ReadWriteLock("cat").Acquire(RwMode::kWrite,
                                                     {.owner = "exporter"});
  auto runner = NewRunner({.lock_wait = milliseconds(50)});
  Job job = RwJob("t1", "cat", config::LockMode::kRead, "sleep");
  EXPECT_EQ(runner->Run(job, JobSource::kKafka, {}), JobResult::kTimeout);
  ASSERT_EQ(DeadLetters(), 1);
  const std::string letter =
      redis_->Execute({"LINDEX", "lockfleet:jobs:dead", "0"}).str;
  EXPECT_TRUE(
      letter.starts_with("the read lock of read-write lock 'cat' not "
                         "acquired within 50 ms (held by writer "
                         "'exporter')"))
      << letter;
  EXPECT_NE(letter.find(R"("lock_mode":"read")"), std::string::npos)
      << "the record keeps its lock_mode";
}

// A schedule with lock_mode write takes the read-write lock's write lock: a
// reader holding it makes the occurrence come back later; read is refused.
TEST_F(RunnerTest, AWriteModeScheduleWaitsForReadersAndReadModeIsRefused) {
  LockClient holder(NewRedis());
  RwResult reader = holder.ReadWriteLock("catalogue").TryAcquire(RwMode::kRead);
  ASSERT_TRUE(reader);
  config::ScheduleConfig schedule = Every("rebuild");
  schedule.lock = "catalogue";
  schedule.lock_mode = config::LockMode::kWrite;
  auto runner = NewRunner();
  const SysMillis due{milliseconds(1'700'000'000'000)};
  const OccurrenceResult busy = runner->RunOccurrence(schedule, due, {});
  EXPECT_FALSE(busy.result.has_value());
  EXPECT_GT(busy.retry_after, milliseconds(50)) << "the reader's lease left";
  EXPECT_FALSE(LockClient(redis_).Inspect("catalogue").locked)
      << "the plain lock is not involved";
  ASSERT_EQ(reader.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_EQ(runner->RunOccurrence(schedule, due, {}).result, JobResult::kOk);
  EXPECT_EQ(runner->RunOccurrence(schedule, due, {}).result,
            JobResult::kDuplicate);
  EXPECT_TRUE(
      LockClient(redis_).ReadWriteLock("catalogue").Inspect().holders.empty());
  schedule.name = "reader";
  schedule.lock_mode = config::LockMode::kRead;
  EXPECT_EQ(runner->RunOccurrence(schedule, due, {}).result,
            JobResult::kFailed);
}

}  // namespace
}  // namespace lockfleet::worker
