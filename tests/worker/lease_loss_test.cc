// A job whose lease is lost while its handler runs, against a real
// redis-server: the handler's stop token fires, the run is counted as
// lease_lost, the job is not marked done (unless its fenced done marker is
// accepted), and it then runs exactly once more — by this runner's
// redelivery or by another worker.
//
// The leases here are watchdog leases of 3 s (renewed every second), lost
// by force-unlocking the lock from another client (an unlock event makes the
// holder check at once) or by deleting its key (the next renewal finds it
// gone). Every wait is condition-based (WaitUntil): a slow or sanitizer
// build only takes longer. Handlers wait for their token with a generous
// limit and carry on if it never fires, so the tests fail rather than hang
// on code that does not stop handlers when their lease is lost.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "counting_observer.h"
#include "lockcore/lock_fixture.h"
#include "lockfleet/lockcore/fenced_resource.h"
#include "lockfleet/worker/builtin_handlers.h"
#include "lockfleet/worker/runner.h"
#include "support/loopback_bus.h"
#include "support/wait_until.h"

namespace lockfleet::worker {
namespace {

using std::chrono::milliseconds;
using testing::WaitUntil;

// How long a handler waits for its token before carrying on as if it had
// never been told (what handlers did before the token covered lease loss).
constexpr milliseconds kTokenPatience{30000};

using testing::CountingObserver;

class RunnerLeaseLossTest : public testing::LockTest {
 protected:
  void SetUp() override {
    LockTest::SetUp();
    handlers_ = std::make_shared<HandlerRegistry>();
    RegisterBuiltinHandlers(*handlers_);
  }

  void TearDown() override {
    for (const auto& locks : clients_) bus_->Unsubscribe(locks.get());
  }

  // A client as another worker process would have it, on the loopback bus
  // that carries unlock events between the "processes".
  std::shared_ptr<LockClient> NewLocks(std::shared_ptr<RedisClient> redis) {
    auto locks = std::make_shared<LockClient>(
        std::move(redis), LockClientOptions{.default_lease = milliseconds(3000),
                                            .publisher = bus_});
    bus_->Subscribe(locks.get());
    clients_.push_back(locks);
    return locks;
  }

  std::shared_ptr<JobRunner> NewRunner(std::string id) {
    auto redis = NewRedis();
    return std::make_shared<JobRunner>(
        NewLocks(redis), redis, handlers_,
        RunnerOptions{.retry_backoff = milliseconds(1),
                      .worker_id = std::move(id),
                      .observer = observer_});
  }

  bool Exists(const std::string& key) {
    return redis_->Execute({"EXISTS", key}).integer == 1;
  }

  // Waits for `context.stop`, up to kTokenPatience. Records whether it fired.
  bool AwaitStop(JobContext& context) {
    const bool fired = WaitUntil([&] { return context.stop.stop_requested(); },
                                 kTokenPatience);
    token_fired_ = fired;
    return fired;
  }

  std::shared_ptr<HandlerRegistry> handlers_;
  std::shared_ptr<CountingObserver> observer_ =
      std::make_shared<CountingObserver>();
  std::shared_ptr<testing::LoopbackBus> bus_ =
      std::make_shared<testing::LoopbackBus>();
  std::vector<std::shared_ptr<LockClient>> clients_;  // unsubscribed last
  std::atomic<int> runs_{0};
  std::atomic<bool> started_{false};
  std::atomic<bool> token_fired_{false};
  std::atomic<bool> claimed_{false};
};

// Fails before lease loss reached handlers: the token never fired, the run
// finished "ok" on a lock another client held, and the job was marked done.
TEST_F(RunnerLeaseLossTest,
       ALostLeaseStopsTheHandlerAndTheJobRunsOnceElsewhere) {
  // The first run waits for its token and stops; later runs finish at once.
  handlers_->Register("hold", {.run = [this](JobContext& c) -> JobResult {
                        if (++runs_ == 1) {
                          started_ = true;
                          if (AwaitStop(c)) throw JobCancelled();
                        }
                        return JobResult::kOk;
                      }});
  const Job job{.id = "j1", .lock = "res", .type = "hold"};
  auto a = NewRunner("a");
  auto b = NewRunner("b");
  const std::string done_key = a->DoneKey("res", "j1");

  std::atomic<JobResult> result_a{JobResult::kFailed};
  std::jthread run_a([&] { result_a = a->Run(job, JobSource::kKafka, {}); });
  ASSERT_TRUE(WaitUntil([&] { return started_.load(); }));

  // Another client takes the lock away and holds it.
  auto thief = NewLocks(NewRedis());
  thief->ForceUnlock("res");
  Lease stolen = thief->Acquire("res");

  EXPECT_TRUE(
      WaitUntil([&] { return observer_->count(JobResult::kLeaseLost) == 1; },
                kTokenPatience + milliseconds(5000)));
  EXPECT_TRUE(token_fired_.load());
  EXPECT_FALSE(Exists(done_key));  // not done: it stopped before its effect

  // A second worker gets the job (a redelivery) while the first one's own
  // redelivery waits for the lock too: once the lock is free, exactly one of
  // them runs it and the other finds it done.
  std::atomic<JobResult> result_b{JobResult::kFailed};
  std::jthread run_b([&] { result_b = b->Run(job, JobSource::kKafka, {}); });
  stolen.Release();
  run_a.join();
  run_b.join();

  std::vector<JobResult> results = {result_a.load(), result_b.load()};
  std::sort(results.begin(), results.end());
  EXPECT_EQ(results,
            (std::vector<JobResult>{JobResult::kOk, JobResult::kDuplicate}));
  EXPECT_EQ(runs_.load(), 2);  // stopped once, then ran exactly once
  EXPECT_EQ(observer_->count(JobResult::kLeaseLost), 1);
  EXPECT_EQ(observer_->count(JobResult::kOk), 1);
  EXPECT_EQ(observer_->count(JobResult::kDuplicate), 1);
  EXPECT_EQ(redis_->Execute({"GET", done_key}).str, "ok");
  EXPECT_EQ(redis_->Execute({"LLEN", a->DeadLetterKey()}).integer, 0);
}

// A handler that ignores its token and returns ok after a newer grant wrote
// to the resource is not recorded done: the runner writes the marker through
// the fence, which refuses it. Fails before: marked done (unfenced), ok.
TEST_F(RunnerLeaseLossTest, AFinishedRunWhoseMarkerIsRefusedIsNotMarkedDone) {
  handlers_->Register("ignore", {.run = [this](JobContext& c) -> JobResult {
                        if (++runs_ == 1) {
                          started_ = true;
                          AwaitStop(c);  // and carries on regardless,
                          // returning once the newer grant has written
                          WaitUntil([&] { return claimed_.load(); });
                        }
                        return JobResult::kOk;
                      }});
  const Job job{.id = "j2", .lock = "res", .type = "ignore"};
  auto runner = NewRunner("a");
  const std::string done_key = runner->DoneKey("res", "j2");

  std::atomic<JobResult> result{JobResult::kFailed};
  std::jthread run([&] { result = runner->Run(job, JobSource::kKafka, {}); });
  ASSERT_TRUE(WaitUntil([&] { return started_.load(); }));

  // The lock's key vanishes (no event: the watchdog's renewal finds out) and
  // a newer holder claims the resource.
  redis_->Execute({"DEL", LockKey("res")});
  auto newer_redis = NewRedis();
  auto newer = NewLocks(newer_redis);
  Lease held = newer->Acquire("res");
  ASSERT_TRUE(FencedResource(newer_redis, "res").Claim(held).accepted);
  claimed_ = true;

  EXPECT_TRUE(
      WaitUntil([&] { return observer_->count(JobResult::kLeaseLost) == 1; },
                kTokenPatience + milliseconds(5000)));
  EXPECT_TRUE(token_fired_.load());
  EXPECT_FALSE(Exists(done_key));
  held.Release();  // the redelivery may run now
  run.join();
  EXPECT_EQ(result.load(), JobResult::kOk);
  EXPECT_EQ(runs_.load(), 2);
  EXPECT_EQ(observer_->count(JobResult::kOk), 1);
  EXPECT_TRUE(Exists(done_key));
}

// With no newer grant in between, a run that finished after its lease was
// lost stands: its fenced done marker is accepted. Fails before: the token
// never fired.
TEST_F(RunnerLeaseLossTest, AFinishedRunWithNoNewerGrantStaysDone) {
  handlers_->Register("ignore", {.run = [this](JobContext& c) -> JobResult {
                        ++runs_;
                        started_ = true;
                        AwaitStop(c);
                        return JobResult::kOk;
                      }});
  auto runner = NewRunner("a");
  std::atomic<JobResult> result{JobResult::kFailed};
  std::jthread run([&] {
    result = runner->Run({.id = "j3", .lock = "res", .type = "ignore"},
                         JobSource::kKafka, {});
  });
  ASSERT_TRUE(WaitUntil([&] { return started_.load(); }));
  redis_->Execute({"DEL", LockKey("res")});
  run.join();
  EXPECT_TRUE(token_fired_.load());
  EXPECT_EQ(result.load(), JobResult::kOk);
  EXPECT_EQ(runs_.load(), 1);
  EXPECT_EQ(observer_->count(JobResult::kLeaseLost), 0);
  EXPECT_EQ(redis_->Execute({"GET", runner->DoneKey("res", "j3")}).str, "ok");
}

// The built-in handlers honour the token. `sleep` ends at once; shutdown
// then hands the job back. Fails before: the sleep ran on (the test stops it
// by shutdown after waiting for the lease_lost report in vain).
TEST_F(RunnerLeaseLossTest, BuiltinSleepStopsWhenItsLeaseIsLost) {
  handlers_->Register("watched.sleep", {.run = [this](JobContext& c) {
                        ++runs_;
                        started_ = true;
                        return handlers_->Find("sleep")->run(c);
                      }});
  Job job{.id = "s1", .lock = "res", .type = "watched.sleep"};
  job.payload["ms"] = {config::Scalar::Type::kInteger, "3600000"};
  auto runner = NewRunner("a");
  std::atomic<JobResult> result{JobResult::kFailed};
  // The thread's own stop token plays shutdown (also on an early return).
  std::jthread run([&](std::stop_token shutdown) {
    result = runner->Run(job, JobSource::kKafka, shutdown);
  });
  ASSERT_TRUE(WaitUntil([&] { return started_.load(); }));
  redis_->Execute({"DEL", LockKey("res")});
  EXPECT_TRUE(
      WaitUntil([&] { return observer_->count(JobResult::kLeaseLost) == 1; },
                kTokenPatience));
  // Its redelivery sleeps again (an hour): shutdown hands it back.
  EXPECT_TRUE(WaitUntil([&] { return runs_.load() == 2; }, kTokenPatience));
  run.request_stop();
  run.join();
  EXPECT_EQ(result.load(), JobResult::kCancelled);
  EXPECT_FALSE(Exists(runner->DoneKey("res", "s1")));
}

// `inventory.purchase` checks its token before its one fenced script: a
// purchase told to stop sells nothing, and its redelivery sells once. Fails
// before: no token, no lease_lost (it sold on the lost lease's run).
TEST_F(RunnerLeaseLossTest, BuiltinPurchaseDoesNotStartOnALostLease) {
  SeedStock(*redis_, "lockfleet", "product:1", 5);
  handlers_->Register("late.purchase", {.run = [this](JobContext& c) {
                        if (++runs_ == 1) {
                          started_ = true;
                          AwaitStop(c);  // its slow preparation, say
                        }
                        return handlers_->Find("inventory.purchase")->run(c);
                      }});
  Job job{.id = "o1", .lock = "product:1", .type = "late.purchase"};
  auto runner = NewRunner("a");
  std::atomic<JobResult> result{JobResult::kFailed};
  std::jthread run([&] { result = runner->Run(job, JobSource::kKafka, {}); });
  ASSERT_TRUE(WaitUntil([&] { return started_.load(); }));
  redis_->Execute({"DEL", LockKey("product:1")});
  run.join();
  EXPECT_TRUE(token_fired_.load());
  EXPECT_EQ(result.load(), JobResult::kOk);
  EXPECT_EQ(observer_->count(JobResult::kLeaseLost), 1);
  EXPECT_EQ(runs_.load(), 2);
  const StockAudit audit = AuditStock(*redis_, "lockfleet", "product:1");
  EXPECT_EQ(audit.stock, 4);  // sold exactly once
  EXPECT_EQ(audit.sold, 1);
}

// A scheduled occurrence whose lease is lost is neither recorded (marker,
// history) nor reported as run: it is tried again, and the retry runs it
// once. Fails before: the stopped run was recorded (as ok or failed).
TEST_F(RunnerLeaseLossTest,
       AnOccurrenceWhoseLeaseIsLostIsNotRecordedAndRunsAgain) {
  handlers_->Register("hold", {.run = [this](JobContext& c) -> JobResult {
                        if (++runs_ == 1) {
                          started_ = true;
                          if (AwaitStop(c)) throw JobCancelled();
                        }
                        return JobResult::kOk;
                      }});
  const config::ScheduleConfig schedule{.name = "report",
                                        .lock = "report",
                                        .every = std::chrono::seconds(1),
                                        .handler = "hold"};
  const SysMillis due{milliseconds(1'700'000'000'000)};
  auto runner = NewRunner("a");
  OccurrenceResult first;
  std::jthread run([&] { first = runner->RunOccurrence(schedule, due, {}); });
  ASSERT_TRUE(WaitUntil([&] { return started_.load(); }));
  redis_->Execute({"DEL", LockKey("report")});
  run.join();
  EXPECT_TRUE(token_fired_.load());
  EXPECT_FALSE(first.result.has_value());  // try again
  EXPECT_GT(first.retry_after, milliseconds(0));
  EXPECT_EQ(observer_->count(JobResult::kLeaseLost), 1);
  const std::string history = runner->ScheduleHistoryKey(schedule);
  EXPECT_EQ(redis_->Execute({"LLEN", history}).integer, 0);

  EXPECT_EQ(runner->RunOccurrence(schedule, due, {}).result, JobResult::kOk);
  EXPECT_EQ(runs_.load(), 2);
  EXPECT_EQ(redis_->Execute({"LLEN", history}).integer, 1);
  EXPECT_EQ(runner->RunOccurrence(schedule, due, {}).result,
            JobResult::kDuplicate);
}

// A job whose limit's permit set is taken away while its handler runs (an
// operator released it by id; the holder's next renewal finds it gone):
// the handler is stopped, the run counts as lease_lost (no attempt), and the
// job runs again — under new permits — and is done once.
TEST_F(RunnerLeaseLossTest, LostPermitsStopTheHandlerAndTheJobRunsAgain) {
  handlers_->Register("hold", {.run = [this](JobContext& c) -> JobResult {
                        if (++runs_ == 1) {
                          started_ = true;
                          if (AwaitStop(c)) throw JobCancelled();
                        }
                        return JobResult::kOk;
                      }});
  Job job{.id = "p1", .lock = "order:1", .type = "hold"};
  job.limit = config::LimitConfig{.name = "partner", .permits = 1};
  auto a = NewRunner("a");
  std::atomic<JobResult> result{JobResult::kFailed};
  std::jthread run([&] { result = a->Run(job, JobSource::kKafka, {}); });
  ASSERT_TRUE(WaitUntil([&] { return started_.load(); }));
  const Reply ids = redis_->Execute(
      {"ZRANGE", "lockfleet:{partner}:semaphore:expiry", "0", "-1"});
  ASSERT_EQ(ids.elements.size(), 1u);
  auto operator_client = NewLocks(NewRedis());
  EXPECT_EQ(operator_client->Semaphore("partner").Release(ids.elements[0].str),
            ReleaseStatus::kReleased);
  run.join();
  EXPECT_TRUE(token_fired_.load());
  EXPECT_EQ(result.load(), JobResult::kOk);
  EXPECT_EQ(runs_.load(), 2);
  EXPECT_EQ(observer_->count(JobResult::kLeaseLost), 1);
  EXPECT_EQ(observer_->count(JobResult::kFailed), 0) << "no attempt spent";
  EXPECT_TRUE(Exists(a->DoneKey("order:1", "p1")));
  EXPECT_EQ(operator_client->Semaphore("partner").Inspect().used, 0);
}

// --- read-write holds (lock_mode)
// ---------------------------------------------

// The keys of read-write lock `name` that hold its sets: deleting them loses
// every hold (the next renewal finds its set gone).
void DeleteRwLock(RedisClient& redis, const std::string& name) {
  redis.Execute({"DEL", "lockfleet:{" + name + "}:rwlock",
                 "lockfleet:{" + name + "}:rwlock:expiry"});
}

// A read hold lost while its handler runs stops the handler as a lost lease
// does: counted as lease_lost, not done, run again (no attempt spent).
TEST_F(RunnerLeaseLossTest, ALostReadHoldStopsTheHandlerAndTheJobRunsAgain) {
  handlers_->Register("hold", {.run = [this](JobContext& c) -> JobResult {
                        if (++runs_ == 1) {
                          started_ = true;
                          if (AwaitStop(c)) throw JobCancelled();
                        }
                        return JobResult::kOk;
                      }});
  const Job job{.id = "r1",
                .lock = "catalogue",
                .type = "hold",
                .lock_mode = config::LockMode::kRead};
  auto a = NewRunner("a");
  std::atomic<JobResult> result{JobResult::kFailed};
  std::jthread run([&] { result = a->Run(job, JobSource::kKafka, {}); });
  ASSERT_TRUE(WaitUntil([&] { return started_.load(); }));
  DeleteRwLock(*redis_, "catalogue");
  run.join();
  EXPECT_TRUE(token_fired_.load());
  EXPECT_EQ(result.load(), JobResult::kOk);
  EXPECT_EQ(runs_.load(), 2);
  EXPECT_EQ(observer_->count(JobResult::kLeaseLost), 1);
  EXPECT_EQ(observer_->count(JobResult::kFailed), 0) << "no attempt spent";
  EXPECT_TRUE(Exists(a->DoneKey("catalogue", "r1")));
}

// A read job that returns normally after its hold was lost is not done: a
// read hold cannot fence its done marker (its token is shared), and a writer
// may have run beside it. It runs again. (A write hold's finished run stands
// when no newer grant wrote, as a lease's does.)
TEST_F(RunnerLeaseLossTest, AReadJobFinishedAfterItsHoldWasLostRunsAgain) {
  handlers_->Register("ignore", {.run = [this](JobContext& c) -> JobResult {
                        if (++runs_ == 1) {
                          started_ = true;
                          AwaitStop(c);  // and carries on regardless
                        }
                        return JobResult::kOk;
                      }});
  auto runner = NewRunner("a");
  for (const config::LockMode mode :
       {config::LockMode::kRead, config::LockMode::kWrite}) {
    runs_ = 0;
    started_ = false;
    token_fired_ = false;
    const std::string id = config::LockModeName(mode);
    std::atomic<JobResult> result{JobResult::kFailed};
    std::jthread run([&] {
      result = runner->Run(
          {.id = id, .lock = "catalogue", .type = "ignore", .lock_mode = mode},
          JobSource::kKafka, {});
    });
    ASSERT_TRUE(WaitUntil([&] { return started_.load(); })) << id;
    DeleteRwLock(*redis_, "catalogue");
    run.join();
    EXPECT_TRUE(token_fired_.load()) << id;
    EXPECT_EQ(result.load(), JobResult::kOk) << id;
    EXPECT_EQ(runs_.load(), mode == config::LockMode::kRead ? 2 : 1) << id;
    EXPECT_TRUE(Exists(runner->DoneKey("catalogue", id))) << id;
  }
  EXPECT_EQ(observer_->count(JobResult::kLeaseLost), 1) << "the read run's";
}

}  // namespace
}  // namespace lockfleet::worker
