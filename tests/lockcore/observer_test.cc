// The LockObserver hooks metrics are built on.
#include "lockfleet/lockcore/observer.h"

#include <gtest/gtest.h>

#include <future>
#include <mutex>

#include "lock_fixture.h"
#include "lockfleet/lockcore/error.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

struct Recorder : LockObserver {
  std::mutex mu;
  std::vector<std::string> log;
  int waiting = 0;
  uint64_t renewed = 0;
  Clock::Duration last_waited{}, last_held{};
  int last_attempts = 0;
  bool last_contended = false;

  void Add(std::string s) {
    std::lock_guard lock(mu);
    log.push_back(std::move(s));
  }
  bool Has(const std::string& s) {
    std::lock_guard lock(mu);
    return std::find(log.begin(), log.end(), s) != log.end();
  }
  void OnAcquire(std::string_view name, AcquireStatus status,
                 Clock::Duration waited, int attempts,
                 bool contended) noexcept override {
    {
      std::lock_guard lock(mu);
      last_waited = waited;
      last_attempts = attempts;
      last_contended = contended;
    }
    Add("acquire " + std::string(name) + " " + AcquireStatusName(status));
  }
  void OnRelease(std::string_view name, ReleaseStatus status,
                 Clock::Duration held) noexcept override {
    {
      std::lock_guard lock(mu);
      last_held = held;
    }
    Add("release " + std::string(name) + " " + ReleaseStatusName(status));
  }
  void OnWakeup(std::string_view name, WakeCause cause) noexcept override {
    Add("wake " + std::string(name) + " " + WakeCauseName(cause));
  }
  void OnWaiting(int delta) noexcept override {
    std::lock_guard lock(mu);
    waiting += delta;
  }
  void OnRenewal(uint64_t n, bool failed) noexcept override {
    std::lock_guard lock(mu);
    renewed += n;
    if (failed) log.push_back("renewal failed");
  }
  void OnLeaseLost(std::string_view name) noexcept override {
    Add("lost " + std::string(name));
  }
  void OnError(ErrorCode code) noexcept override {
    Add("error " + std::string(ErrorCodeName(code)));
  }
};

class Observer : public LockTest {};

TEST_F(Observer, SeesWaitsWakeupsHoldsAndLosses) {
  auto rec = std::make_shared<Recorder>();
  // A 3 s lease: its renewal (due at 1 s) cannot miss on a loaded machine
  // and let the lock expire under the holder. Every park bound is far
  // beyond the test (park_cap; a fair waiter's refresh at presence / 3), so
  // the waiter is woken by the release alone, on its second attempt.
  auto client = NewClient({.default_lease = milliseconds(3000),
                           .park_cap = seconds(600),
                           .presence_window = seconds(90),
                           .claim_window = seconds(90),
                           .observer = rec});
  AcquireResult held = client->TryAcquire("obs");
  ASSERT_TRUE(rec->Has("acquire obs acquired"));
  auto waiter = std::async(std::launch::async, [&] {
    return client->AcquireFor("obs", seconds(60));
  });
  ASSERT_TRUE(
      WaitUntil([&] { return client->stats().contended_attempts >= 1; }));
  std::this_thread::sleep_for(milliseconds(20));
  (void)held.lease.Release();
  AcquireResult got = waiter.get();
  ASSERT_TRUE(got);
  EXPECT_TRUE(rec->Has("release obs released"));
  EXPECT_TRUE(rec->Has("wake obs local"));
  {
    std::lock_guard lock(rec->mu);
    EXPECT_TRUE(rec->last_contended);
    EXPECT_EQ(rec->last_attempts, 2);
    EXPECT_GE(rec->last_waited, milliseconds(20));
    EXPECT_GE(rec->last_held, milliseconds(20));
    EXPECT_EQ(rec->waiting, 0);
  }
  ASSERT_TRUE(WaitUntil([&] {
    std::lock_guard lock(rec->mu);
    return rec->renewed >= 1;
  }));
  redis_->Execute({"DEL", LockKey("obs")});
  EXPECT_TRUE(WaitUntil([&] { return rec->Has("lost obs"); }));
}

TEST_F(Observer, CountsErrorsByCode) {
  auto rec = std::make_shared<Recorder>();
  RedisOptions o;
  o.url = "unix:///nonexistent/x.sock";
  LockClient client(std::make_shared<RedisClient>(o), {.observer = rec});
  EXPECT_THROW(client.TryAcquire("x"), Error);
  EXPECT_TRUE(rec->Has("error redis_unavailable"));
}

}  // namespace
}  // namespace lockfleet::testing
