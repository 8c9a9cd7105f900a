// The lease watchdog: renewal keeps a lock past its lease; a lost lease is
// reported (callback, lost(), counter); cancellation at release is race-free.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "lock_fixture.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class Watchdog : public LockTest {};

struct LostProbe {
  std::atomic<int> calls{0};
  std::atomic<int64_t> fence{0};
  LostCallback callback() {
    return [this](const std::string&, int64_t f) {
      fence = f;
      calls.fetch_add(1);
    };
  }
};

TEST_F(Watchdog, KeepsTheLockPastItsLease) {
  auto holder = NewClient({.default_lease = milliseconds(500)});
  auto rival = NewClient();
  AcquireResult r = holder->TryAcquire("long-job");
  ASSERT_TRUE(r);
  // Hold for more than three leases; the rival must never get in.
  auto until = std::chrono::steady_clock::now() + milliseconds(1700);
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_FALSE(rival->TryAcquire("long-job")) << "lock expired while held";
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_FALSE(r.lease.lost());
  EXPECT_GE(holder->stats().renewals, 3u);
  EXPECT_EQ(holder->stats().leases_lost, 0u);
  EXPECT_EQ(r.lease.Release(), ReleaseStatus::kReleased);
}

TEST_F(Watchdog, ExplicitLeaseIsNotRenewed) {
  auto client = NewClient();
  AcquireResult r = client->TryAcquire("short", {.lease = milliseconds(150)});
  ASSERT_TRUE(r);
  ASSERT_TRUE(WaitUntil([&] { return !client->Inspect("short").locked; }));
  EXPECT_EQ(client->stats().renewals, 0u);
}

TEST_F(Watchdog, TellsTheHolderWhenTheLockIsTakenAway) {
  auto holder = NewClient({.default_lease = milliseconds(300)});
  LostProbe probe;
  AcquireResult r = holder->TryAcquire("victim", {.on_lost = probe.callback()});
  ASSERT_TRUE(r);
  // Somebody deletes the key behind our back (an operator, a failover).
  redis_->Execute({"DEL", LockKey("victim")});
  ASSERT_TRUE(WaitUntil([&] { return probe.calls.load() == 1; }));
  EXPECT_EQ(probe.fence.load(), r.lease.fence());
  EXPECT_TRUE(r.lease.lost());
  EXPECT_EQ(holder->stats().leases_lost, 1u);
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(probe.calls.load(), 1);  // once per grant
}

TEST_F(Watchdog, TellsTheHolderWhenTheExplicitLeaseRunsOut) {
  auto holder = NewClient();
  LostProbe probe;
  AcquireResult r = holder->TryAcquire("brief", {.lease = milliseconds(100), .on_lost = probe.callback()});
  ASSERT_TRUE(r);
  ASSERT_TRUE(WaitUntil([&] { return probe.calls.load() == 1; }));
  EXPECT_TRUE(r.lease.lost());
}

TEST_F(Watchdog, TellsTheHolderWhenRedisIsGoneForLongerThanTheLease) {
  auto holder = NewClient({.default_lease = milliseconds(300)});
  LostProbe probe;
  AcquireResult r = holder->TryAcquire("unreachable", {.on_lost = probe.callback()});
  ASSERT_TRUE(r);
  server_->Stop();
  ASSERT_TRUE(WaitUntil([&] { return probe.calls.load() == 1; }));
  EXPECT_TRUE(r.lease.lost());
  EXPECT_GE(holder->stats().renewal_failures, 1u);
  server_->Start();
}

// A stalled Redis (not a refused connection) blocks the renewal round trip
// until the command timeout. The holder must still be told when its lease
// runs out, not when the stalled renewal finally gives up: by then another
// process may have held the lock for seconds.
TEST_F(Watchdog, TellsTheHolderOnTimeWhenRedisStalls) {
  RedisOptions ro;
  ro.url = server_->url();
  ro.command_timeout = std::chrono::seconds(20);
  LockClient holder(std::make_shared<RedisClient>(ro), {.default_lease = milliseconds(300)});
  LostProbe probe;
  AcquireResult r = holder.TryAcquire("stalled", {.on_lost = probe.callback()});
  ASSERT_TRUE(r);
  std::this_thread::sleep_for(milliseconds(150));  // past the first renewal
  auto paused = std::chrono::steady_clock::now();
  server_->Pause();
  bool told = WaitUntil([&] { return probe.calls.load() == 1; }, seconds(15));
  auto took = std::chrono::steady_clock::now() - paused;
  server_->Resume();
  ASSERT_TRUE(told);
  EXPECT_TRUE(r.lease.lost());
  // The lease is 300 ms; the stalled renewal would only fail after 20 s.
  EXPECT_LT(took, seconds(8));
  std::printf("lost-lease notice %.0f ms after Redis stalled (lease 300 ms)\n",
              std::chrono::duration<double, std::milli>(took).count());
}

TEST_F(Watchdog, ForceUnlockInTheSameClientMarksTheLeaseLostAtOnce) {
  auto client = NewClient();
  LostProbe probe;
  AcquireResult r = client->TryAcquire("now", {.on_lost = probe.callback()});
  client->ForceUnlock("now");
  EXPECT_TRUE(r.lease.lost());
  EXPECT_EQ(probe.calls.load(), 1);
}

// Release racing the watchdog must never be mistaken for a lost lease, and a
// renewal must never outlive the release (Redisson #7272).
TEST_F(Watchdog, ReleaseRacingRenewalIsNeverALoss) {
  // Renewals come every ~70 ms; holds of 0..140 ms put releases all around
  // them.
  auto client = NewClient({.default_lease = milliseconds(300)});
  auto rival = NewClient();
  auto until = std::chrono::steady_clock::now() + milliseconds(2000);
  int cycles = 0;
  while (std::chrono::steady_clock::now() < until) {
    AcquireResult r = client->TryAcquire("churn");
    ASSERT_TRUE(r);
    std::this_thread::sleep_for(milliseconds(cycles % 5 * 35));
    ASSERT_EQ(r.lease.Release(), ReleaseStatus::kReleased);
    // Right after release the lock is free for anyone: no late renewal
    // resurrected it.
    AcquireResult other = rival->TryAcquire("churn", {.lease = milliseconds(60000)});
    ASSERT_TRUE(other) << "cycle " << cycles;
    ASSERT_EQ(other.lease.Release(), ReleaseStatus::kReleased);
    ++cycles;
  }
  EXPECT_EQ(client->stats().leases_lost, 0u);
  EXPECT_GT(cycles, 10);
}

TEST_F(Watchdog, RenewsManyLocksInBatches) {
  auto client = NewClient({.default_lease = milliseconds(600)});
  std::vector<Lease> leases;
  for (int i = 0; i < 100; ++i) {
    leases.push_back(std::move(client->TryAcquire("batch:" + std::to_string(i)).lease));
    ASSERT_TRUE(leases.back().held());
  }
  uint64_t trips_before = client->redis().round_trips();
  uint64_t renewals_before = client->stats().renewals;
  std::this_thread::sleep_for(milliseconds(1300));  // about six renewal rounds
  uint64_t renewals = client->stats().renewals - renewals_before;
  uint64_t trips = client->redis().round_trips() - trips_before;
  EXPECT_GE(renewals, 200u);
  ASSERT_GT(trips, 0u);
  EXPECT_GE(renewals / trips, 20u) << renewals << " renewals in " << trips << " round trips";
  for (Lease& l : leases) EXPECT_FALSE(l.lost());
}

}  // namespace
}  // namespace lockfleet::testing
