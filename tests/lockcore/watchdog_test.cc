// The lease watchdog: renewal keeps a lock past its lease; a lost lease is
// reported (callback, lost(), counter); cancellation at release is race-free.
//
// Time: a test about *when* the watchdog acts (a renewal falls due, a lease
// runs out) drives a FakeClock and gives Redis a 30 s lease, so no renewal
// or expiry depends on how fast a loaded machine runs: moving the fake clock
// past lease/3 makes a renewal due (the watchdog notices within its 1 s idle
// wait, or at once when an acquisition finds its wake-up passed), and past
// the lease makes it run out. Only a test that needs Redis itself to keep the
// key past its lease uses a real lease, of several seconds.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "lock_fixture.h"
#include "support/fake_clock.h"
#include "support/loopback_bus.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// The lease of fake-clock tests: Redis keeps the key this long in real time,
// far beyond any test, while the fake clock decides renewals and expiry.
constexpr milliseconds kLease{30000};
constexpr auto kRenewalDue = kLease / 3 + milliseconds(1);

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

// Real time and a real Redis TTL: the renewal (due after 1 s) has 2 s to land
// before the 3 s lease would run out, even under TSan on a loaded machine.
TEST_F(Watchdog, KeepsTheLockPastItsLease) {
  constexpr milliseconds kRealLease{3000};
  auto holder = NewClient({.default_lease = kRealLease});
  auto rival = NewClient();
  AcquireResult r = holder->TryAcquire("long-job");
  ASSERT_TRUE(r);
  // Hold past the lease; the rival must never get in.
  auto until =
      std::chrono::steady_clock::now() + kRealLease + milliseconds(500);
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_FALSE(rival->TryAcquire("long-job")) << "lock expired while held";
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_FALSE(r.lease.lost());
  EXPECT_GE(holder->stats().renewals, 1u);
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
  auto clock = std::make_shared<FakeClock>();
  auto holder = NewClient({.default_lease = kLease, .clock = clock});
  LostProbe probe;
  AcquireResult r = holder->TryAcquire("victim", {.on_lost = probe.callback()});
  ASSERT_TRUE(r);
  // Somebody deletes the key behind our back (an operator, a failover).
  redis_->Execute({"DEL", LockKey("victim")});
  // A renewal falls due a third into the lease: only its "not ours" answer
  // can end the grant, the lease itself has 20 s left.
  clock->Advance(kRenewalDue);
  ASSERT_TRUE(WaitUntil([&] { return probe.calls.load() == 1; }));
  EXPECT_EQ(probe.fence.load(), r.lease.fence());
  EXPECT_TRUE(r.lease.lost());
  EXPECT_EQ(holder->stats().leases_lost, 1u);
  EXPECT_EQ(holder->stats().renewals, 0u);
  // Once per grant: the watchdog goes on (it renews another lock a round
  // later) without a second call.
  AcquireResult witness = holder->TryAcquire("witness");
  ASSERT_TRUE(witness);
  clock->Advance(kRenewalDue);
  ASSERT_TRUE(WaitUntil([&] { return holder->stats().renewals >= 1; }));
  EXPECT_EQ(probe.calls.load(), 1);
  EXPECT_EQ(holder->stats().leases_lost, 1u);
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
  auto clock = std::make_shared<FakeClock>();
  auto holder = NewClient({.default_lease = kLease, .clock = clock});
  LostProbe probe;
  AcquireResult r =
      holder->TryAcquire("unreachable", {.on_lost = probe.callback()});
  ASSERT_TRUE(r);
  server_->Stop();
  clock->Advance(kRenewalDue);
  ASSERT_TRUE(WaitUntil([&] { return holder->stats().renewal_failures >= 1; }));
  // Gone for less than the lease: a failed renewal alone loses nothing.
  EXPECT_FALSE(r.lease.lost());
  EXPECT_EQ(probe.calls.load(), 0);
  clock->Advance(kLease);  // gone for longer than the lease
  ASSERT_TRUE(WaitUntil([&] { return probe.calls.load() == 1; }));
  EXPECT_TRUE(r.lease.lost());
  EXPECT_EQ(holder->stats().leases_lost, 1u);
  server_->Start();
}

// A stalled Redis (not a refused connection) blocks the renewal round trip
// until the command timeout. The holder must still be told when its lease
// runs out, not when the stalled renewal finally gives up: by then another
// process may have held the lock for seconds.
TEST_F(Watchdog, TellsTheHolderOnTimeWhenRedisStalls) {
  auto clock = std::make_shared<FakeClock>();
  RedisOptions ro;
  ro.url = server_->url();
  ro.command_timeout = std::chrono::seconds(20);
  LockClient holder(std::make_shared<RedisClient>(ro),
                    {.default_lease = kLease, .clock = clock});
  LostProbe probe;
  AcquireResult r = holder.TryAcquire("stalled", {.on_lost = probe.callback()});
  ASSERT_TRUE(r);
  const uint64_t trips = holder.redis().round_trips();
  server_->Pause();
  clock->Advance(kRenewalDue);  // a renewal goes out, and hangs
  bool renewing =
      WaitUntil([&] { return holder.redis().round_trips() > trips; });
  auto ran_out = std::chrono::steady_clock::now();
  clock->Advance(kLease);  // the lease runs out while the renewal hangs
  bool told = WaitUntil([&] { return probe.calls.load() == 1; }, seconds(15));
  auto took = std::chrono::steady_clock::now() - ran_out;
  server_->Resume();
  ASSERT_TRUE(renewing);
  ASSERT_TRUE(told);
  EXPECT_TRUE(r.lease.lost());
  // The stalled renewal would only fail after 20 s.
  EXPECT_LT(took, seconds(8));
  std::printf(
      "lost-lease notice %.0f ms after the lease ran out (renewal stalled)\n",
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

// A Lease that outlives its client is renewed by nobody: it must not go on
// looking valid, and work tied to its stop token must stop.
TEST_F(Watchdog, DestroyingTheClientStopsItsLeasesTokens) {
  auto client = NewClient();
  AcquireResult renewed = client->TryAcquire("orphaned");
  AcquireResult explicit_lease =
      client->TryAcquire("timed", {.lease = seconds(60)});
  ASSERT_TRUE(renewed);
  ASSERT_TRUE(explicit_lease);
  std::stop_token token = renewed.lease.stop_token();
  std::atomic<bool> stopped{false};
  std::stop_callback on_stop(token, [&] { stopped.store(true); });
  EXPECT_FALSE(stopped.load());
  client.reset();
  EXPECT_TRUE(stopped.load());
  EXPECT_TRUE(renewed.lease.lost());
  EXPECT_TRUE(explicit_lease.lease.stop_token().stop_requested());
  EXPECT_TRUE(explicit_lease.lease.lost());
  // Still released in Redis (the core lives on with its leases).
  EXPECT_EQ(renewed.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_EQ(explicit_lease.lease.Release(), ReleaseStatus::kReleased);
  auto inspector = NewClient();
  EXPECT_FALSE(inspector->Inspect("orphaned").locked);
  EXPECT_FALSE(inspector->Inspect("timed").locked);
}

// Review finding: a throwing callback of a stale grant ran inline in
// TryAcquire, after the new grant was registered, so no Lease was returned
// and the new grant was renewed forever.
TEST_F(Watchdog, ThrowingLostCallbackCannotLeakAGrant) {
  // The default 30 s lease: no renewal (due at 10 s) notices the stale grant
  // first, and the new grant cannot expire before its release.
  auto client = NewClient();
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
  // The event makes the holder ask Redis at once (an explicit lease has no
  // renewal to find out otherwise); Redis's "not ours" marks it lost.
  EXPECT_TRUE(WaitUntil([&] { return r.lease.lost(); }));
  EXPECT_TRUE(WaitUntil([&] { return probe.calls.load() == 1; }));
  EXPECT_GE(holder->stats().forced_checks, 1u);
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
  // Each cycle makes the grant's renewal due on the fake clock and wakes the
  // watchdog (an acquisition of another lock does), then releases 0..2 ms
  // later: releases land before, during and after the renewal's round trip,
  // and no renewal is ever needed in real time (Redis keeps the key 30 s).
  auto clock = std::make_shared<FakeClock>();
  auto client = NewClient({.default_lease = kLease, .clock = clock});
  auto rival = NewClient();
  const uint64_t trips_before = client->redis().round_trips();
  auto until = std::chrono::steady_clock::now() + milliseconds(2000);
  int cycles = 0;
  while (std::chrono::steady_clock::now() < until) {
    AcquireResult r = client->TryAcquire("churn");
    ASSERT_TRUE(r);
    clock->Advance(kRenewalDue);
    AcquireResult kick = client->TryAcquire("kick", {.lease = kLease});
    ASSERT_TRUE(kick);
    std::this_thread::sleep_for(std::chrono::microseconds(cycles % 5 * 500));
    ASSERT_EQ(r.lease.Release(), ReleaseStatus::kReleased) << cycles;
    // Right after release the lock is free for anyone: no late renewal
    // resurrected it.
    AcquireResult other = rival->TryAcquire("churn", {.lease = kLease});
    ASSERT_TRUE(other) << "cycle " << cycles;
    ASSERT_EQ(other.lease.Release(), ReleaseStatus::kReleased);
    ASSERT_EQ(kick.lease.Release(), ReleaseStatus::kReleased);
    ++cycles;
  }
  EXPECT_EQ(client->stats().leases_lost, 0u);
  EXPECT_GT(cycles, 10);
  // Four round trips per cycle are the acquisitions and releases; the rest
  // are renewals that raced a release (and script loads).
  std::printf("%d cycles, %llu other round trips, %llu renewals counted\n",
              cycles,
              static_cast<unsigned long long>(client->redis().round_trips() -
                                              trips_before - 4ull * cycles),
              static_cast<unsigned long long>(client->stats().renewals));
}

TEST_F(Watchdog, RenewsManyLocksInBatches) {
  auto clock = std::make_shared<FakeClock>();
  auto client = NewClient({.default_lease = kLease, .clock = clock});
  std::vector<Lease> leases;
  for (int i = 0; i < 100; ++i) {
    leases.push_back(
        std::move(client->TryAcquire("batch:" + std::to_string(i)).lease));
    ASSERT_TRUE(leases.back().held());
  }
  // All 100 were taken at the same fake instant, so they fall due together
  // (the watchdog notices the moved fake clock within its idle second).
  const uint64_t trips_before = client->redis().round_trips();
  const uint64_t renewals_before = client->stats().renewals;
  constexpr int kRounds = 3;
  for (int round = 1; round <= kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    clock->Advance(kRenewalDue);
    auto renewed = [&] { return client->stats().renewals - renewals_before; };
    ASSERT_TRUE(WaitUntil([&] { return renewed() >= 100u * round; }));
  }
  uint64_t renewals = client->stats().renewals - renewals_before;
  uint64_t trips = client->redis().round_trips() - trips_before;
  EXPECT_EQ(renewals, 100u * kRounds);  // each lock once per round
  ASSERT_GT(trips, 0u);
  EXPECT_GE(renewals / trips, 20u)
      << renewals << " renewals in " << trips << " round trips";
  for (Lease& l : leases) EXPECT_FALSE(l.lost());
}

// The watchdog keeps a timetable of the held grants instead of scanning
// them all: every grant must be in it at its own time, a re-entry must not
// file it twice, and a released one must leave it. 600 grants taken one
// fake millisecond apart (some re-entered, every third released) are
// renewed exactly once per round each, the released ones never, and none
// is lost; an explicit lease among them still runs out on time.
TEST_F(Watchdog, EveryHeldGrantIsRenewedOnItsOwnTimeAndReleasedOnesNever) {
  auto clock = std::make_shared<FakeClock>();
  auto client = NewClient({.default_lease = kLease, .clock = clock});
  std::vector<Lease> leases;
  std::vector<Lease> reentries;
  for (int i = 0; i < 600; ++i) {
    leases.push_back(
        std::move(client->TryAcquire("table:" + std::to_string(i)).lease));
    ASSERT_TRUE(leases.back().held());
    if (i % 10 == 0) {
      reentries.push_back(
          std::move(client->TryAcquire("table:" + std::to_string(i)).lease));
      ASSERT_TRUE(reentries.back().held());
    }
    clock->Advance(milliseconds(1));
  }
  LostProbe probe;
  AcquireResult brief = client->TryAcquire(
      "table:brief", {.lease = kLease / 2, .on_lost = probe.callback()});
  ASSERT_TRUE(brief);
  size_t kept = 0;
  for (size_t i = 0; i < leases.size(); ++i) {
    if (i % 3 == 0) {
      ASSERT_EQ(leases[i].Release(), i % 10 == 0 ? ReleaseStatus::kStillHeld
                                                 : ReleaseStatus::kReleased);
      if (i % 10 == 0) ++kept;  // its re-entry still holds it
    } else {
      ++kept;
    }
  }
  ASSERT_EQ(kept, 420u);
  const uint64_t renewals_before = client->stats().renewals;
  for (int round = 1; round <= 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    clock->Advance(kRenewalDue);
    ASSERT_TRUE(WaitUntil([&] {
      return client->stats().renewals - renewals_before >= kept * round;
    })) << client->stats().renewals - renewals_before;
    // The explicit lease (half the watchdog's) runs out in round 2.
    if (round >= 2) {
      ASSERT_TRUE(WaitUntil([&] { return probe.calls.load() == 1; }));
    } else {
      EXPECT_EQ(probe.calls.load(), 0);
    }
  }
  EXPECT_EQ(client->stats().renewals - renewals_before, kept * 3);
  EXPECT_EQ(client->stats().leases_lost, 1u);  // the explicit lease only
  for (size_t i = 0; i < leases.size(); ++i) {
    if (i % 3 != 0) {
      EXPECT_FALSE(leases[i].lost()) << i;
    }
  }
  for (Lease& l : reentries) EXPECT_FALSE(l.lost());
}

// A released grant leaves the timetable: were it left there, the watchdog
// would find it past its validity and report a release as a lost lease.
// A witness whose explicit lease runs out in the same pass shows that the
// watchdog did look.
TEST_F(Watchdog, AReleasedGrantIsNeverReportedLost) {
  auto clock = std::make_shared<FakeClock>();
  auto client = NewClient({.default_lease = kLease, .clock = clock});
  LostProbe gone_probe;
  AcquireResult gone =
      client->TryAcquire("timetable:gone", {.on_lost = gone_probe.callback()});
  ASSERT_TRUE(gone);
  LostProbe witness_probe;
  AcquireResult witness = client->TryAcquire(
      "timetable:witness",
      {.lease = kLease, .on_lost = witness_probe.callback()});
  ASSERT_TRUE(witness);
  ASSERT_EQ(gone.lease.Release(), ReleaseStatus::kReleased);
  clock->Advance(kLease + seconds(1));
  ASSERT_TRUE(WaitUntil([&] { return witness_probe.calls.load() == 1; }));
  EXPECT_EQ(gone_probe.calls.load(), 0);
  EXPECT_EQ(client->stats().leases_lost, 1u);
}

// A forced check of an explicit lease (a force event named it; Redis said
// "still yours") puts the grant back in the timetable: its lease must still
// be reported lost when it runs out.
TEST_F(Watchdog, AnExplicitLeaseCheckedByAForceEventStillRunsOut) {
  auto clock = std::make_shared<FakeClock>();
  auto client = NewClient({.default_lease = kLease, .clock = clock});
  LostProbe probe;
  AcquireResult r = client->TryAcquire(
      "checked", {.lease = kLease, .on_lost = probe.callback()});
  ASSERT_TRUE(r);
  AcquireResult behind = client->TryAcquire("checked:behind");
  ASSERT_TRUE(behind);
  const uint64_t checks = client->stats().forced_checks;
  const uint64_t renewals = client->stats().renewals;
  const UnlockEvent forged = ForceEventFor("checked", r.lease);
  client->DeliverUnlockEvent(forged);
  ASSERT_TRUE(
      WaitUntil([&] { return client->stats().forced_checks > checks; }));
  // A renewal queued behind the check: once it is counted, the check's
  // answer has been applied (the renewer takes its batches in order).
  clock->Advance(kRenewalDue);
  ASSERT_TRUE(WaitUntil([&] { return client->stats().renewals > renewals; }));
  EXPECT_FALSE(r.lease.lost());
  EXPECT_EQ(probe.calls.load(), 0);
  ASSERT_EQ(behind.lease.Release(), ReleaseStatus::kReleased);
  clock->Advance(kLease);
  ASSERT_TRUE(WaitUntil([&] { return probe.calls.load() == 1; }));
  EXPECT_TRUE(r.lease.lost());
}

}  // namespace
}  // namespace lockfleet::testing
