// The worker's scheduler against a real redis-server, on a wall clock the
// test steps: a backlog of missed occurrences (a suspend, SIGSTOP or clock
// step) is coalesced to the latest `catch_up`, and workers that fell behind
// together run each of those once fleet-wide.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "lockcore/lock_fixture.h"
#include "lockfleet/worker/builtin_handlers.h"
#include "lockfleet/worker/worker.h"
#include "support/loopback_bus.h"
#include "support/wait_until.h"

namespace lockfleet::worker {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
using testing::WaitUntil;

// Wall time that moves only when the test steps it.
class FakeWallClock final : public WallClock {
 public:
  explicit FakeWallClock(SysMillis start)
      : now_ms_(start.time_since_epoch().count()) {}
  SysMillis Now() const override { return SysMillis(milliseconds(now_ms_)); }
  void Step(milliseconds d) { now_ms_ += d.count(); }

 private:
  std::atomic<int64_t> now_ms_;
};

// A whole minute (and second): 2023-11-14T22:13:00Z.
constexpr SysMillis kT0{seconds(1'699'999'980)};

class ScheduleTest : public testing::LockTest {
 protected:
  void SetUp() override {
    LockTest::SetUp();
    handlers_ = std::make_shared<HandlerRegistry>();
    handlers_->Register("counted", {.run = [this](JobContext& c) {
                          std::lock_guard lock(mu_);
                          ran_.push_back(c.job.id);
                          return JobResult::kOk;
                        }});
  }

  void TearDown() override {
    workers_.clear();  // shut down before their clients go
    for (const auto& locks : clients_) bus_->Unsubscribe(locks.get());
  }

  // A worker as a separate process would have it (own connections and
  // LockClient), on `clock`, running `schedule` with one thread.
  Worker& StartWorker(const config::ScheduleConfig& schedule,
                      std::shared_ptr<WallClock> clock, std::string id) {
    auto redis = NewRedis();
    auto locks = std::make_shared<LockClient>(
        redis, LockClientOptions{.publisher = bus_});
    bus_->Subscribe(locks.get());
    clients_.push_back(locks);
    auto runner = std::make_shared<JobRunner>(
        locks, redis, handlers_, RunnerOptions{.worker_id = std::move(id)});
    workers_.push_back(std::make_unique<Worker>(
        runner, WorkerOptions{.threads = 1,
                              .schedules = {schedule},
                              .wall_clock = std::move(clock)}));
    workers_.back()->Start();
    return *workers_.back();
  }

  // Waits until `worker` has dealt with `due` occurrences (run or skipped)
  // and none is left pending.
  static bool Settled(const Worker& worker, uint64_t due) {
    return WaitUntil(
        [&] {
          const WorkerStats stats = worker.stats();
          return stats.taken + stats.skipped >= due &&
                 stats.schedule_pending == 0;
        },
        std::chrono::seconds(60));
  }

  std::vector<std::string> Ran() {
    std::lock_guard lock(mu_);
    return ran_;
  }

  // The due times (ms) in the schedule's history, oldest first.
  std::vector<int64_t> History(const config::ScheduleConfig& schedule) {
    JobRunner runner(std::make_shared<LockClient>(redis_), redis_, handlers_,
                     {});
    const Reply list = redis_->Execute(
        {"LRANGE", runner.ScheduleHistoryKey(schedule), "0", "-1"});
    std::vector<int64_t> out;
    for (auto it = list.elements.rbegin(); it != list.elements.rend(); ++it) {
      out.push_back(std::stoll(it->str));
    }
    return out;
  }

  std::shared_ptr<HandlerRegistry> handlers_;
  std::shared_ptr<testing::LoopbackBus> bus_ =
      std::make_shared<testing::LoopbackBus>();
  std::vector<std::shared_ptr<LockClient>> clients_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::mutex mu_;
  std::vector<std::string> ran_;  // job ids, guarded by mu_
};

config::ScheduleConfig EverySecond(int catch_up) {
  return {.name = "tick",
          .lock = "tick",
          .every = seconds(1),
          .handler = "counted",
          .catch_up = catch_up};
}

config::ScheduleConfig EveryMinuteCron(int catch_up) {
  return {.name = "tick",
          .lock = "tick",
          .cron = config::CronSchedule::Parse("* * * * *"),
          .handler = "counted",
          .catch_up = catch_up};
}

int64_t Ms(SysMillis t) { return t.time_since_epoch().count(); }

// The `n` latest of the occurrences `step` apart ending at `last`.
std::vector<int64_t> Latest(SysMillis last, milliseconds step, int n) {
  std::vector<int64_t> out;
  for (int k = n - 1; k >= 0; --k) out.push_back(Ms(last - k * step));
  return out;
}

// (cron?, catch_up)
class CatchUpTest
    : public ScheduleTest,
      public ::testing::WithParamInterface<std::tuple<bool, int>> {};

// Paused for an hour: `every: 1s` finds 3,600 occurrences due, a per-minute
// cron 60. Only the latest catch_up of them run, oldest first.
TEST_P(CatchUpTest, AnHourStepRunsOnlyTheLatestCatchUp) {
  const auto [cron, catch_up] = GetParam();
  const config::ScheduleConfig schedule =
      cron ? EveryMinuteCron(catch_up) : EverySecond(catch_up);
  const milliseconds period = cron ? milliseconds(minutes(1)) : seconds(1);
  const uint64_t due = cron ? 60 : 3600;
  // Started between two occurrences; stepped an hour on.
  const SysMillis start =
      kT0 + (cron ? milliseconds(30'000) : milliseconds(300));
  auto clock = std::make_shared<FakeWallClock>(start);
  Worker& worker = StartWorker(schedule, clock, "w0");
  clock->Step(hours(1));
  ASSERT_TRUE(Settled(worker, due));

  const SysMillis last = kT0 + hours(1);  // the latest occurrence due
  const std::vector<int64_t> expected = Latest(last, period, catch_up);
  EXPECT_EQ(History(schedule), expected);
  EXPECT_EQ(Ran().size(), expected.size());
  const WorkerStats stats = worker.stats();
  EXPECT_EQ(stats.taken, expected.size());
  EXPECT_EQ(stats.skipped, due - expected.size());
}

INSTANTIATE_TEST_SUITE_P(
    EveryAndCron, CatchUpTest,
    ::testing::Combine(::testing::Bool(), ::testing::Values(1, 0, 3)),
    [](const auto& info) {
      return std::string(std::get<0>(info.param) ? "Cron" : "Every") +
             "CatchUp" + std::to_string(std::get<1>(info.param));
    });

// catch_up 0 skips the backlog and waits: the next occurrence, seen on time,
// runs.
TEST_F(ScheduleTest, CatchUpZeroRunsTheNextOccurrenceOnTime) {
  const config::ScheduleConfig schedule = EverySecond(0);
  auto clock = std::make_shared<FakeWallClock>(kT0 + milliseconds(300));
  Worker& worker = StartWorker(schedule, clock, "w0");
  clock->Step(hours(1));
  ASSERT_TRUE(Settled(worker, 3600));
  EXPECT_TRUE(History(schedule).empty());
  clock->Step(seconds(1));  // 300 ms after the next one: on time
  ASSERT_TRUE(Settled(worker, 3601));
  EXPECT_EQ(History(schedule),
            std::vector<int64_t>{Ms(kT0 + hours(1) + seconds(1))});
  EXPECT_EQ(worker.stats().skipped, 3600u);
}

// Two workers paused together (one clock, stepped once) pick the same
// occurrence, and it runs once fleet-wide: one worker runs it, the other
// finds it done.
TEST_F(ScheduleTest, WorkersSteppedTogetherRunTheLatestOnceFleetWide) {
  const config::ScheduleConfig schedule = EverySecond(1);
  auto clock = std::make_shared<FakeWallClock>(kT0 + milliseconds(300));
  Worker& a = StartWorker(schedule, clock, "a");
  Worker& b = StartWorker(schedule, clock, "b");
  clock->Step(hours(1));
  // A worker that found the lock held tries again later on the wall clock:
  // nudge it forward, but never up to the next occurrence (kT0 + 1h + 1s).
  const SysMillis before_next = kT0 + hours(1) + milliseconds(950);
  ASSERT_TRUE(WaitUntil(
      [&] {
        const WorkerStats sa = a.stats(), sb = b.stats();
        if (sa.taken + sa.skipped >= 3600 && sb.taken + sb.skipped >= 3600 &&
            sa.schedule_pending == 0 && sb.schedule_pending == 0) {
          return true;
        }
        if (clock->Now() < before_next) clock->Step(milliseconds(5));
        return false;
      },
      std::chrono::seconds(60)));

  EXPECT_EQ(History(schedule), std::vector<int64_t>{Ms(kT0 + hours(1))});
  EXPECT_EQ(Ran(), std::vector<std::string>{
                       "tick@" + std::to_string(Ms(kT0 + hours(1)))});
  EXPECT_EQ(a.stats().skipped, 3599u);
  EXPECT_EQ(b.stats().skipped, 3599u);
}

}  // namespace
}  // namespace lockfleet::worker
