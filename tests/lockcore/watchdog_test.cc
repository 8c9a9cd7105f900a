// The lease watchdog: renewal keeps a lock past its lease; a lost lease is
// reported (callback, lost(), counter); cancellation at release is race-free.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "lock_fixture.h"
#include "support/loopback_bus.h"
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
  AcquireResult r = holder->TryAcquire(
      "brief", {.lease = milliseconds(100), .on_lost = probe.callback()});
  ASSERT_TRUE(r);
  ASSERT_TRUE(WaitUntil([&] { return probe.calls.load() == 1; }));
  EXPECT_TRUE(r.lease.lost());
}

TEST_F(Watchdog, TellsTheHolderWhenRedisIsGoneForLongerThanTheLease) {
  auto holder = NewClient({.default_lease = milliseconds(300)});
  LostProbe probe;
  AcquireResult r =
      holder->TryAcquire("unreachable", {.on_lost = probe.callback()});
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
  LockClient holder(std::make_shared<RedisClient>(ro),
                    {.default_lease = milliseconds(300)});
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

// Review finding: a lost-callback that destroys the client and the last
// Lease made the watchdog thread return into freed memory (ASan caught it).
TEST_F(Watchdog, LostCallbackMayDestroyTheClientAndTheLease) {
  // Everything the callback touches lives on the heap, owned by the
  // callback itself: it outlives this test body.
  struct State {
    std::mutex mu;
    std::unique_ptr<LockClient> client;
    Lease lease;
    std::atomic<bool> done{false};
  };
  auto state = std::make_shared<State>();
  state->client = NewClient({.default_lease = milliseconds(300)});
  AcquireResult r = state->client->TryAcquire(
      "doomed", {.on_lost = [state](const std::string&, int64_t) {
        std::lock_guard lock(state->mu);
        state->lease = Lease();  // the last Lease ...
        state->client.reset();   // ... and the client, on its own thread
        state->done.store(true);
      }});
  ASSERT_TRUE(r);
  {
    std::lock_guard lock(state->mu);
    state->lease = std::move(r.lease);
  }
  redis_->Execute({"DEL", LockKey("doomed")});
  ASSERT_TRUE(WaitUntil([&] { return state->done.load(); }));
}

// Review finding: a throwing callback of a stale grant ran inline in
// TryAcquire, after the new grant was registered, so no Lease was returned
// and the new grant was renewed forever.
TEST_F(Watchdog, ThrowingLostCallbackCannotLeakAGrant) {
  auto client = NewClient({.default_lease = milliseconds(300)});
  AcquireResult old_grant = client->TryAcquire(
      "leak", {.owner = "o", .on_lost = [](const std::string&, int64_t) {
                 throw std::runtime_error("callback failure");
               }});
  ASSERT_TRUE(old_grant);
  NewClient()->ForceUnlock("leak");  // remote: this client is not told
  AcquireResult new_grant = client->TryAcquire("leak", {.owner = "o"});
  ASSERT_TRUE(new_grant);  // returned, despite the stale callback throwing
  EXPECT_TRUE(old_grant.lease.lost());
  EXPECT_EQ(new_grant.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(client->Inspect("leak").locked);
}

// Review finding: a remote force-unlock was only noticed at the next
// renewal, which an explicit lease never has. The kForce event says so now.
TEST_F(Watchdog, RemoteForceUnlockEventMarksTheHolderLost) {
  LoopbackBus bus;
  auto bus_ptr =
      std::shared_ptr<UnlockPublisher>(&bus, [](UnlockPublisher*) {});
  auto holder = NewClient({.publisher = bus_ptr});
  auto admin = NewClient({.publisher = bus_ptr});
  bus.Subscribe(holder.get());
  LostProbe probe;
  AcquireResult r = holder->TryAcquire(
      "ops", {.lease = milliseconds(600000), .on_lost = probe.callback()});
  ASSERT_TRUE(r);
  admin->ForceUnlock("ops");
  EXPECT_TRUE(r.lease.lost());
  EXPECT_TRUE(WaitUntil([&] { return probe.calls.load() == 1; }));
  bus.Unsubscribe(holder.get());
}

TEST_F(Watchdog, ForceUnlockInTheSameClientMarksTheLeaseLostAtOnce) {
  auto client = NewClient();
  LostProbe probe;
  AcquireResult r = client->TryAcquire("now", {.on_lost = probe.callback()});
  client->ForceUnlock("now");
  EXPECT_TRUE(r.lease.lost());
  // The callback runs on the watchdog thread, never on the caller's.
  EXPECT_TRUE(WaitUntil([&] { return probe.calls.load() == 1; }));
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
    AcquireResult other =
        rival->TryAcquire("churn", {.lease = milliseconds(60000)});
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
    leases.push_back(
        std::move(client->TryAcquire("batch:" + std::to_string(i)).lease));
    ASSERT_TRUE(leases.back().held());
  }
  uint64_t trips_before = client->redis().round_trips();
  uint64_t renewals_before = client->stats().renewals;
  std::this_thread::sleep_for(milliseconds(1300));  // about six renewal rounds
  uint64_t renewals = client->stats().renewals - renewals_before;
  uint64_t trips = client->redis().round_trips() - trips_before;
  EXPECT_GE(renewals, 200u);
  ASSERT_GT(trips, 0u);
  EXPECT_GE(renewals / trips, 20u)
      << renewals << " renewals in " << trips << " round trips";
  for (Lease& l : leases) EXPECT_FALSE(l.lost());
}

}  // namespace
}  // namespace lockfleet::testing
