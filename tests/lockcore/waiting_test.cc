// Timed, blocking and cancellable acquisition; parking, wake-ups and their
// bounds. Wherever a test must prove that a *wake-up* (not a bound) got the
// waiter the lock, its parks are bounded far beyond the test's time scale
// (Unbounded(): a huge park_cap, and presence windows so long that a fair
// waiter's presence refresh, every presence_window / 3, comes after 30 s),
// so "woken, not by a bound" cannot depend on how loaded the machine is.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "lock_fixture.h"
#include "lockfleet/lockcore/error.h"
#include "support/loopback_bus.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Steady = std::chrono::steady_clock;

constexpr milliseconds kNoCap{600000};  // parks end only by wake-up or TTL

// Options whose every park bound is at least 30 s: park_cap, and the fair
// presence refresh (presence_window / 3). The claim window must lie in
// (presence / 3, presence].
LockClientOptions Unbounded(LockClientOptions o = {}) {
  o.park_cap = kNoCap;
  o.presence_window = seconds(90);
  o.claim_window = seconds(90);
  return o;
}

class Waiting : public LockTest {
 protected:
  struct EventRun {
    AcquireStatus status = AcquireStatus::kTimedOut;
    int attempts = 0;
    LockStats stats;  // the waiter's
    std::chrono::nanoseconds waited{0};
  };

  // One AcquireFor(name, timeout) by a fresh waiter (barging, every park
  // bound beyond 30 s) while another client, which publishes nothing, holds
  // the lock. In the window between the waiter's failed attempt and its
  // park, the holder releases and an unlock event for `name` is delivered to
  // the waiter, carrying the waiter's own client_id (`own_event`) or another
  // one. A wake that event causes is kept by the waiter's slot and ends the
  // park at once; nothing else can wake it before `timeout`. An event for
  // another lock is delivered first, and must not wake it either.
  static EventRun AcquireWithAnEventInTheWindow(const std::string& name,
                                                bool own_event,
                                                milliseconds timeout) {
    auto holder = NewClient();
    auto waiter = NewClient(Unbounded());
    AcquireResult held = holder->TryAcquire(name, {.lease = seconds(60)});
    EXPECT_TRUE(held);
    UnlockEvent event;
    event.lock = name;
    event.owner = held.lease.owner();
    event.fence = held.lease.fence();
    event.client_id = own_event ? waiter->client_id() : "another-client";
    UnlockEvent elsewhere = event;
    elsewhere.lock = name + ":other";
    elsewhere.client_id = "another-client";
    waiter->SetAfterFailedAttemptHookForTesting([&](std::string_view) {
      if (!held.lease.held()) return;  // first failed attempt only
      (void)held.lease.Release();
      waiter->DeliverUnlockEvent(elsewhere);
      waiter->DeliverUnlockEvent(event);
    });
    EventRun run;
    auto start = Steady::now();
    AcquireResult r = waiter->AcquireFor(name, timeout, {.fair = false});
    run.waited = Steady::now() - start;
    waiter->SetAfterFailedAttemptHookForTesting(nullptr);
    run.status = r.status;
    run.attempts = r.attempts;
    run.stats = waiter->stats();
    if (r) (void)r.lease.Release();
    return run;
  }
};

TEST_F(Waiting, TimedWaitReturnsAtItsDeadline) {
  auto holder = NewClient();
  auto waiter = NewClient();
  AcquireResult held = holder->TryAcquire("busy");
  ASSERT_TRUE(held);
  auto start = Steady::now();
  AcquireResult r = waiter->AcquireFor("busy", milliseconds(300));
  auto elapsed = Steady::now() - start;
  EXPECT_EQ(r.status, AcquireStatus::kTimedOut);
  EXPECT_FALSE(r.lease.held());
  EXPECT_EQ(r.holder, holder->DefaultOwner());
  EXPECT_GT(r.holder_ttl, milliseconds(0));
  EXPECT_GE(elapsed, milliseconds(300));
  EXPECT_LT(elapsed, seconds(10));  // generous: only catches a hang
  EXPECT_EQ(waiter->stats().timeouts, 1u);
  EXPECT_EQ(waiter->stats().waiting, 0);
}

TEST_F(Waiting, DeadlineFormIsEquivalent) {
  auto holder = NewClient();
  auto waiter = NewClient();
  AcquireResult held = holder->TryAcquire("busy");
  auto deadline = SteadyClock()->Now() + milliseconds(200);
  AcquireResult r = waiter->AcquireUntil("busy", deadline);
  EXPECT_EQ(r.status, AcquireStatus::kTimedOut);
  EXPECT_GE(Steady::now(), deadline);
}

TEST_F(Waiting, ZeroTimeoutMakesExactlyOneAttempt) {
  auto holder = NewClient();
  auto waiter = NewClient();
  AcquireResult held = holder->TryAcquire("busy");
  AcquireResult r = waiter->AcquireFor("busy", milliseconds(0));
  EXPECT_EQ(r.status, AcquireStatus::kTimedOut);
  EXPECT_EQ(r.attempts, 1);
}

TEST_F(Waiting, SameProcessReleaseWakesAParkedWaiterDirectly) {
  auto client = NewClient(Unbounded());
  AcquireResult held = client->TryAcquire("hot");
  ASSERT_TRUE(held);
  auto waiter = std::async(std::launch::async, [&] {
    return client->AcquireFor("hot", seconds(60));
  });
  ASSERT_TRUE(
      WaitUntil([&] { return client->stats().contended_attempts >= 1; }));
  EXPECT_EQ(held.lease.Release(), ReleaseStatus::kReleased);
  AcquireResult r = waiter.get();
  ASSERT_TRUE(r);
  LockStats s = client->stats();
  EXPECT_EQ(s.wakeups_local, 1u);
  EXPECT_EQ(s.wakeups_bound, 0u);  // no park reached its 30 s bound
}

TEST_F(Waiting, ReleaseWakesOneWaiterAtATimeAndEveryoneGetsATurn) {
  auto client = NewClient(Unbounded());
  AcquireResult held = client->TryAcquire("q");
  ASSERT_TRUE(held);
  constexpr int kWaiters = 4;
  std::atomic<int> inside{0}, done{0}, overlap{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&] {
      AcquireResult r = client->AcquireFor("q", seconds(120));
      if (!r) return;
      if (inside.fetch_add(1) != 0) overlap.fetch_add(1);
      std::this_thread::sleep_for(milliseconds(5));
      inside.fetch_sub(1);
      done.fetch_add(1);
    });
  }
  ASSERT_TRUE(WaitUntil([&] { return client->stats().waiting == kWaiters; }));
  (void)held.lease.Release();
  for (auto& t : threads) t.join();
  EXPECT_EQ(done.load(), kWaiters);
  EXPECT_EQ(overlap.load(), 0);
  EXPECT_EQ(client->stats().wakeups_bound, 0u);  // hand-offs were all wake-ups
}

TEST_F(Waiting, UnlockEventWakesAWaiterInAnotherClient) {
  LoopbackBus bus;
  auto bus_ptr =
      std::shared_ptr<UnlockPublisher>(&bus, [](UnlockPublisher*) {});
  auto a = NewClient(Unbounded({.publisher = bus_ptr}));
  auto b = NewClient(Unbounded({.publisher = bus_ptr}));
  bus.Subscribe(a.get());
  bus.Subscribe(b.get());
  AcquireResult held = a->TryAcquire("x");
  ASSERT_TRUE(held);
  auto waiter = std::async(std::launch::async,
                           [&] { return b->AcquireFor("x", seconds(60)); });
  ASSERT_TRUE(WaitUntil([&] { return b->stats().contended_attempts >= 1; }));
  (void)held.lease.Release();
  ASSERT_TRUE(waiter.get());
  EXPECT_EQ(b->stats().wakeups_event, 1u);
  EXPECT_EQ(b->stats().wakeups_bound, 0u);
  EXPECT_EQ(a->stats().events_published, 1u);
  bus.Unsubscribe(a.get());
  bus.Unsubscribe(b.get());
}

// An event this client published itself must not wake its own waiters
// (they were woken directly when it released). The control shows that the
// very same event from another client does wake the parked waiter, so the
// first case fails if own events are not ignored: the wake would end the
// park at once instead of at its 300 ms bound.
TEST_F(Waiting, OwnEventsAreIgnored) {
  EventRun foreign =
      AcquireWithAnEventInTheWindow("ev:foreign", false, seconds(60));
  EXPECT_EQ(foreign.status, AcquireStatus::kAcquired);
  EXPECT_EQ(foreign.attempts, 2);
  EXPECT_EQ(foreign.stats.wakeups_event, 1u);
  EXPECT_EQ(foreign.stats.wakeups_bound, 0u);

  EventRun own =
      AcquireWithAnEventInTheWindow("ev:own", true, milliseconds(300));
  EXPECT_EQ(own.stats.events_received, 2u);  // delivered ...
  EXPECT_EQ(own.stats.wakeups_event, 0u);    // ... and ignored:
  EXPECT_EQ(own.stats.wakeups_bound, 1u);    // parked until its bound
  EXPECT_GE(own.waited, milliseconds(300));
}

TEST_F(Waiting, LostEventCostsLatencyBoundedByTheHoldersTtl) {
  auto waiter = NewClient(Unbounded());
  // A holder that crashed: its lock has 300 ms left and nobody will release
  // it or publish anything.
  redis_->Execute({"HSET", LockKey("crashed"), "owner", "dead", "count", "1",
                   "fence", "1"});
  redis_->Execute({"PEXPIRE", LockKey("crashed"), "300"});
  auto start = Steady::now();
  AcquireResult r = waiter->AcquireFor("crashed", seconds(60));
  ASSERT_TRUE(r);
  // Neither the 10-minute cap nor the 30 s presence refresh: the TTL.
  EXPECT_LT(Steady::now() - start, seconds(20));
  EXPECT_GE(waiter->stats().wakeups_bound, 1u);
}

// A barging waiter wakes at the cap and tries again, repeatedly. A queued
// fair waiter is checked for at the cap instead: its client's watchdog
// refreshes its place and looks for a grant (lockcore.md, "Presence").
TEST_F(Waiting, ParkCapBoundsEveryPark) {
  auto holder = NewClient();
  auto barging = NewClient({.park_cap = milliseconds(20), .fair = false});
  auto fair = NewClient({.park_cap = milliseconds(20)});
  AcquireResult held = holder->TryAcquire("capped");  // 30 s lease
  AcquireResult r = barging->AcquireFor("capped", milliseconds(300));
  EXPECT_FALSE(r);
  EXPECT_GE(r.attempts, 3);  // woke at the cap and retried, repeatedly
  const auto start = std::chrono::steady_clock::now();
  r = fair->AcquireFor("capped", milliseconds(300));
  EXPECT_FALSE(r);
  EXPECT_GE(fair->stats().presence_refreshes, 3u);
  // Its own parks, and the last attempt at the deadline: on time.
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(5));
}

// Listen-first: a release that lands between the failed attempt and the
// park must not be lost. The hook releases the holder exactly there; with an
// unbounded park, a lost wake-up would leave the waiter parked until the
// 60 s timeout and the test would fail.
TEST_F(Waiting, ReleaseBetweenFailedAttemptAndParkIsNotLost) {
  auto client = NewClient(Unbounded());
  for (int i = 0; i < 50; ++i) {
    std::string name = "race:" + std::to_string(i);
    AcquireResult held = client->TryAcquire(name);
    ASSERT_TRUE(held);
    std::mutex mu;
    Lease to_release = std::move(held.lease);
    client->SetAfterFailedAttemptHookForTesting([&](std::string_view) {
      std::lock_guard lock(mu);
      if (to_release.held()) (void)to_release.Release();
    });
    AcquireResult r;
    std::thread waiter([&] { r = client->AcquireFor(name, seconds(60)); });
    waiter.join();
    client->SetAfterFailedAttemptHookForTesting(nullptr);
    ASSERT_TRUE(r) << i;
    EXPECT_EQ(r.attempts, 2);
  }
  EXPECT_EQ(client->stats().wakeups_bound, 0u);
}

// The same race through the transport: the event arrives in the window.
TEST_F(Waiting, EventBetweenFailedAttemptAndParkIsNotLost) {
  LoopbackBus bus;
  auto bus_ptr =
      std::shared_ptr<UnlockPublisher>(&bus, [](UnlockPublisher*) {});
  auto holder = NewClient(Unbounded({.publisher = bus_ptr}));
  auto waiter = NewClient(Unbounded());
  bus.Subscribe(waiter.get());
  for (int i = 0; i < 30; ++i) {
    std::string name = "erace:" + std::to_string(i);
    Lease held;
    std::thread([&] {
      held = std::move(holder->TryAcquire(name).lease);
    }).join();
    ASSERT_TRUE(held.held());
    waiter->SetAfterFailedAttemptHookForTesting([&](std::string_view) {
      if (held.held()) (void)held.Release();
    });
    AcquireResult r = waiter->AcquireFor(name, seconds(60));
    waiter->SetAfterFailedAttemptHookForTesting(nullptr);
    ASSERT_TRUE(r) << i;
  }
  EXPECT_EQ(waiter->stats().wakeups_bound, 0u);
  EXPECT_EQ(waiter->stats().wakeups_event, 30u);
  bus.Unsubscribe(waiter.get());
}

TEST_F(Waiting, CancellationStopsATimedWait) {
  auto holder = NewClient();
  auto waiter = NewClient(Unbounded());
  AcquireResult held = holder->TryAcquire("c");
  std::stop_source stop;
  auto fut = std::async(std::launch::async, [&] {
    return waiter->AcquireFor("c", seconds(600), {.stop = stop.get_token()});
  });
  ASSERT_TRUE(WaitUntil([&] { return waiter->stats().waiting == 1; }));
  auto start = Steady::now();
  stop.request_stop();
  AcquireResult r = fut.get();
  EXPECT_EQ(r.status, AcquireStatus::kCancelled);
  EXPECT_FALSE(r.lease.held());
  EXPECT_LT(Steady::now() - start, seconds(10));
  EXPECT_EQ(holder->Inspect("c").owner, holder->DefaultOwner());  // untouched
  EXPECT_EQ(waiter->stats().cancellations, 1u);
}

TEST_F(Waiting, CancellationStopsABlockingAcquire) {
  auto holder = NewClient();
  auto waiter = NewClient(Unbounded());
  AcquireResult held = holder->TryAcquire("c");
  std::stop_source stop;
  auto fut = std::async(std::launch::async, [&] {
    try {
      waiter->Acquire("c", {.stop = stop.get_token()});
      return ErrorCode::kInternal;
    } catch (const Error& e) {
      return e.code();
    }
  });
  ASSERT_TRUE(WaitUntil([&] { return waiter->stats().waiting == 1; }));
  stop.request_stop();
  EXPECT_EQ(fut.get(), ErrorCode::kCancelled);
}

TEST_F(Waiting, CancelledWaiterPassesItsWakeOn) {
  auto client = NewClient(Unbounded());
  AcquireResult held = client->TryAcquire("p");
  std::stop_source stop_first;
  auto first = std::async(std::launch::async, [&] {
    return client->AcquireFor("p", seconds(60),
                              {.stop = stop_first.get_token()});
  });
  ASSERT_TRUE(WaitUntil([&] { return client->stats().waiting == 1; }));
  auto second = std::async(
      std::launch::async, [&] { return client->AcquireFor("p", seconds(60)); });
  ASSERT_TRUE(WaitUntil([&] { return client->stats().waiting == 2; }));
  stop_first.request_stop();
  EXPECT_EQ(first.get().status, AcquireStatus::kCancelled);
  (void)held.lease.Release();
  ASSERT_TRUE(second.get());
  EXPECT_EQ(client->stats().wakeups_bound, 0u);
}

TEST_F(Waiting, ForceUnlockWakesWaiters) {
  auto holder = NewClient();
  auto admin_and_waiter = NewClient(Unbounded());
  AcquireResult held = holder->TryAcquire("stuck");
  ASSERT_TRUE(held);
  auto waiter = std::async(std::launch::async, [&] {
    return admin_and_waiter->AcquireFor("stuck", seconds(60));
  });
  ASSERT_TRUE(WaitUntil(
      [&] { return admin_and_waiter->stats().contended_attempts >= 1; }));
  ForceUnlockResult f = admin_and_waiter->ForceUnlock("stuck");
  EXPECT_TRUE(f.was_locked);
  EXPECT_EQ(f.previous_owner, holder->DefaultOwner());
  EXPECT_EQ(f.previous_fence, held.lease.fence());
  AcquireResult r = waiter.get();
  ASSERT_TRUE(r);
  EXPECT_GT(r.lease.fence(), held.lease.fence());
  EXPECT_EQ(admin_and_waiter->stats().wakeups_local, 1u);
  EXPECT_FALSE(admin_and_waiter->ForceUnlock("nothing-here").was_locked);
}

TEST_F(Waiting, ForceUnlockPublishesAForceEvent) {
  auto recorder = std::make_shared<RecordingPublisher>();
  auto client = NewClient({.publisher = recorder, .client_id = "me"});
  AcquireResult r = client->TryAcquire("f", {.owner = "w1"});
  client->ForceUnlock("f");
  AcquireResult r2 = client->TryAcquire("f", {.owner = "w2"});
  (void)r2.lease.Release();
  ASSERT_EQ(recorder->events.size(), 2u);
  EXPECT_EQ(recorder->events[0].cause, UnlockCause::kForce);
  EXPECT_EQ(recorder->events[0].owner, "w1");
  EXPECT_EQ(recorder->events[0].fence, r.lease.fence());
  EXPECT_EQ(recorder->events[0].client_id, "me");
  EXPECT_EQ(recorder->events[1].cause, UnlockCause::kRelease);
  EXPECT_EQ(recorder->events[1].owner, "w2");
  EXPECT_GT(recorder->events[1].released_at_ns, 0);
}

}  // namespace
}  // namespace lockfleet::testing
