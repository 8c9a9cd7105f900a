// Fair mode: FIFO hand-off named in the unlock event, waiter liveness (dead,
// cancelled, timed-out waiters, lost grant events), reentrancy, barging.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>
#include <vector>

#include "lock_fixture.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Steady = std::chrono::steady_clock;

class Fair : public ConnectedLockTest {
 protected:
  // `holder` takes `name` (*held) and one waiting call of `waiter` (*fut)
  // queues behind it; returns its queue entry.
  QueuedWaiter HeldWithOneWaiter(LockClient& holder, LockClient& waiter,
                                 const std::string& name, AcquireResult* held,
                                 std::future<AcquireResult>* fut) {
    *held = holder.TryAcquire(name);
    EXPECT_TRUE(*held);
    *fut = std::async(std::launch::async, [&waiter, name] {
      return waiter.AcquireFor(name, seconds(60));
    });
    QueuedWaiter queued;
    EXPECT_TRUE(WaitUntil([&] {
      LockInfo info = holder.Inspect(name);
      if (info.queue.size() != 1) return false;
      queued = info.queue[0];
      return true;
    }));
    // Its refusal counted too (the counters move after Redis queued it).
    EXPECT_TRUE(
        WaitUntil([&] { return waiter.stats().contended_attempts >= 1; }));
    return queued;
  }
  // Windows short enough for a test to see an interval (I = 500 ms) pass,
  // and no spinning: what wakes a waiter is its watchdog's check.
  static LockClientOptions ShortWindowsNoSpin() {
    return {.presence_window = milliseconds(1500),
            .claim_window = milliseconds(1000),
            .spin_max_hold = milliseconds(0)};
  }
  int64_t ServerMs() {
    Reply t = redis_->Execute({"TIME"});
    return std::stoll(t.elements[0].str) * 1000 +
           std::stoll(t.elements[1].str) / 1000;
  }
};

TEST_F(Fair, HandsOffInArrivalOrderAndWakesOnlyTheGrantee) {
  auto holder = Connected();
  AcquireResult held = holder->TryAcquire("fifo");
  ASSERT_TRUE(held);
  constexpr int kWaiters = 5;
  std::vector<std::unique_ptr<LockClient>> clients;
  std::vector<std::thread> threads;
  std::mutex mu;
  std::vector<int> order;
  for (int i = 0; i < kWaiters; ++i) {
    clients.push_back(Connected());
    LockClient* c = clients.back().get();
    threads.emplace_back([&, c, i] {
      AcquireResult r = c->AcquireFor("fifo", seconds(60));
      ASSERT_TRUE(r);
      {
        std::lock_guard lock(mu);
        order.push_back(i);
      }
      std::this_thread::sleep_for(milliseconds(3));
    });
    // Arrival order is queue order: wait until this waiter is queued.
    ASSERT_TRUE(WaitUntil(
        [&] { return holder->Inspect("fifo").queue.size() == size_t(i + 1); }));
  }
  LockInfo queued = holder->Inspect("fifo");
  for (int i = 0; i < kWaiters; ++i) {
    EXPECT_EQ(queued.queue[i].owner.rfind(clients[i]->client_id(), 0), 0u) << i;
    EXPECT_GT(queued.queue[i].presence_left, milliseconds(0));
  }
  (void)held.lease.Release();
  for (auto& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  uint64_t attempts = 0, event_wakes = 0, bound_wakes = 0;
  for (auto& c : clients) {
    LockStats s = c->stats();
    attempts += s.attempts;
    event_wakes += s.wakeups_event;
    bound_wakes += s.wakeups_bound;
  }
  // Nobody raced: one refused attempt (which queued) and one claim each, one
  // wake-up per hand-off, no waiter woke for nothing.
  EXPECT_EQ(attempts, 2u * kWaiters);
  EXPECT_EQ(event_wakes, uint64_t(kWaiters));
  EXPECT_EQ(bound_wakes, 0u);
  LockInfo after = holder->Inspect("fifo");
  EXPECT_FALSE(after.locked);
  EXPECT_TRUE(after.queue.empty());
}

TEST_F(Fair, UnlockEventNamesTheGranteeAndItsToken) {
  auto recorder = std::make_shared<RecordingPublisher>();
  auto holder = NewClient({.publisher = recorder});
  auto waiter = NewClient({.park_cap = milliseconds(50)});  // no events: polls
  AcquireResult held = holder->TryAcquire("named");
  auto fut = std::async(std::launch::async, [&] {
    return waiter->AcquireFor("named", seconds(60));
  });
  ASSERT_TRUE(
      WaitUntil([&] { return holder->Inspect("named").queue.size() == 1; }));
  std::string queued_as = holder->Inspect("named").queue[0].waiter_id;
  (void)held.lease.Release();
  AcquireResult got = fut.get();
  ASSERT_TRUE(got);
  std::lock_guard lock(recorder->mu);
  ASSERT_EQ(recorder->events.size(), 1u);
  const UnlockEvent& e = recorder->events[0];
  EXPECT_EQ(e.next_waiter, queued_as);
  EXPECT_EQ(e.next_owner, got.lease.owner());
  EXPECT_EQ(e.next_fence, got.lease.fence());
  EXPECT_GT(e.next_fence, e.fence);
}

TEST_F(Fair, TryAcquireNeverQueuesAndDefersToQueuedWaiters) {
  auto a = Connected();
  auto b = Connected();
  AcquireResult held = a->TryAcquire("t");
  EXPECT_FALSE(b->TryAcquire("t"));
  EXPECT_TRUE(a->Inspect("t").queue.empty());
  // A live waiter is ahead (a crashed holder's lock just expired): a fair
  // newcomer defers to it, a barging one does not.
  (void)held.lease.Release();
  redis_->Execute({"RPUSH", "lockfleet:{t}:queue", "other:w1"});
  redis_->Execute({"HSET", "lockfleet:{t}:waiters", "other:w1",
                   std::to_string(ServerMs() + 60000) + "|other-owner"});
  EXPECT_FALSE(b->TryAcquire("t"));
  AcquireResult barged = b->TryAcquire("t", {.fair = false});
  EXPECT_TRUE(barged);
}

TEST_F(Fair, DeadWaiterAtTheHeadIsSkippedOnceItsPresenceLapses) {
  auto holder = Connected({.presence_window = milliseconds(300),
                           .claim_window = milliseconds(200)});
  auto waiter = Connected({.presence_window = milliseconds(300),
                           .claim_window = milliseconds(200)});
  AcquireResult held = holder->TryAcquire("dead");
  // A waiter that was killed: queued first, never refreshes again.
  redis_->Execute({"RPUSH", "lockfleet:{dead}:queue", "ghost:w1"});
  redis_->Execute({"HSET", "lockfleet:{dead}:waiters", "ghost:w1",
                   std::to_string(ServerMs() + 300) + "|ghost-owner"});
  auto fut = std::async(std::launch::async, [&] {
    return waiter->AcquireFor("dead", seconds(60));
  });
  ASSERT_TRUE(
      WaitUntil([&] { return holder->Inspect("dead").queue.size() == 2; }));
  auto released = Steady::now();
  (void)held.lease.Release();  // the ghost may still look present: it gets it
  AcquireResult got = fut.get();
  ASSERT_TRUE(got);
  // At most: the ghost's presence (300 ms) or its claim window (200 ms),
  // plus the waiter's refresh park (100 ms). Generous for loaded machines.
  EXPECT_LT(Steady::now() - released, seconds(5));
  EXPECT_TRUE(holder->Inspect("dead").queue.empty());
}

TEST_F(Fair, HandOffToAProcessThatDiedPassesOnAfterTheClaimWindow) {
  auto holder = Connected({.presence_window = milliseconds(600),
                           .claim_window = milliseconds(300)});
  auto waiter = Connected({.presence_window = milliseconds(600),
                           .claim_window = milliseconds(300)});
  AcquireResult held = holder->TryAcquire("claim");
  redis_->Execute({"RPUSH", "lockfleet:{claim}:queue", "ghost:w1"});
  redis_->Execute({"HSET", "lockfleet:{claim}:waiters", "ghost:w1",
                   std::to_string(ServerMs() + 60000) + "|ghost-owner"});
  auto fut = std::async(std::launch::async, [&] {
    return waiter->AcquireFor("claim", seconds(60));
  });
  ASSERT_TRUE(
      WaitUntil([&] { return holder->Inspect("claim").queue.size() == 2; }));
  (void)held.lease.Release();
  LockInfo pending = holder->Inspect("claim");
  EXPECT_EQ(pending.pending_waiter, "ghost:w1");
  EXPECT_EQ(pending.owner, "ghost-owner");
  EXPECT_LE(pending.ttl, milliseconds(300));
  AcquireResult got = fut.get();  // after the ghost's claim window lapses
  ASSERT_TRUE(got);
  EXPECT_GT(got.lease.fence(), pending.fence);
}

TEST_F(Fair, LostGrantEventIsRecoveredAtTheNextBoundedPark) {
  auto holder = NewClient();
  // Not on any bus: the grant event never reaches it.
  auto waiter = NewClient({.park_cap = seconds(600),
                           .presence_window = milliseconds(300),
                           .claim_window = milliseconds(250)});
  AcquireResult held = holder->TryAcquire("lost-grant");  // 30 s lease
  auto fut = std::async(std::launch::async, [&] {
    return waiter->AcquireFor("lost-grant", seconds(60));
  });
  ASSERT_TRUE(
      WaitUntil([&] { return waiter->stats().contended_attempts >= 1; }));
  (void)held.lease.Release();
  auto start = Steady::now();
  ASSERT_TRUE(fut.get());
  EXPECT_LT(Steady::now() - start, seconds(10));  // not the 30 s lease
  EXPECT_GE(waiter->stats().wakeups_bound, 1u);
}

// A waiter whose watchdog renews its lease is handed the lock in full: the
// release grants its hold with the claim window as the lease, the waiter
// confirms with a read, and its validity runs from the last moment Redis
// still had it queued — never past the key's time to live — until its
// watchdog's first renewal extends the key to the lease.
TEST_F(Fair, AHandOffInFullIsConfirmedWithinItsClaimWindowThenRenewed) {
  // A claim window as long as the presence window: the waiter, woken by its
  // watchdog's check up to an interval after the hand-off, still finds most
  // of its validity left on a loaded machine (not a full attempt).
  auto holder = NewClient({.claim_window = seconds(3)});
  auto waiter = NewClient();  // not on any bus: the watchdog's check wakes it
  AcquireResult held;
  std::future<AcquireResult> fut;
  const QueuedWaiter queued =
      HeldWithOneWaiter(*holder, *waiter, "in-full", &held, &fut);
  ASSERT_EQ(queued.waiter_id.rfind("g:", 0), 0u);
  const uint64_t attempts = waiter->stats().attempts;
  const uint64_t renewals = waiter->stats().renewals;
  (void)held.lease.Release();
  AcquireResult got = fut.get();
  ASSERT_TRUE(got) << got.last_error;
  const Steady::time_point valid = got.lease.valid_until();
  const int64_t pttl = redis_->Execute({"PTTL", LockKey("in-full")}).integer;
  const Steady::time_point read = Steady::now();
  // Confirmed, not re-entered: the key still has the claim window (3 s),
  // not the 30 s lease a full attempt would have set — unless the
  // watchdog's first renewal came first (a loaded machine).
  EXPECT_GT(pttl, 0);
  EXPECT_TRUE(pttl <= 3000 || waiter->stats().renewals > renewals) << pttl;
  EXPECT_LE(valid, read + milliseconds(pttl))
      << "validity past the key's time to live";
  EXPECT_EQ(waiter->stats().attempts, attempts + 1) << "one read";
  LockInfo info = holder->Inspect("in-full");
  EXPECT_EQ(info.hold_count, 1);
  EXPECT_EQ(info.fence, got.lease.fence());
  // The watchdog extends it to the lease well before the window ends.
  EXPECT_TRUE(WaitUntil([&] {
    return redis_->Execute({"PTTL", LockKey("in-full")}).integer > 10000;
  }));
  EXPECT_TRUE(WaitUntil(
      [&] { return got.lease.valid_until() > Steady::now() + seconds(10); }));
  EXPECT_FALSE(got.lease.lost());
  EXPECT_EQ(got.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(holder->Inspect("in-full").locked);
}

// A grantee in full that reads its grant with under a quarter of its
// validity left (its thread came late) does not take it from the read: its
// full attempt re-enters the grant with its own lease — or, later still,
// finds the lock free and takes it anew. Either way its validity is a
// lease's, and no renewal was needed to get there.
TEST_F(Fair, AHandOffInFullReadTooLateIsReenteredWithTheWaitersOwnLease) {
  const LockClientOptions o = ShortWindowsNoSpin();
  auto holder = NewClient(o);
  auto waiter = NewClient(o);
  AcquireResult held = holder->TryAcquire("late-read");
  ASSERT_TRUE(held);
  std::atomic<int> failed{0};
  std::string waiter_id;
  // After its queueing refusal (the validity's base): the release hands
  // it the lock in full for the 1 s claim window, its thread is late by
  // 800 ms, and the release's event (delivered by hand: no bus) wakes it.
  waiter->SetAfterFailedAttemptHookForTesting([&](std::string_view) {
    if (failed.fetch_add(1) != 0) return;
    const LockInfo info = holder->Inspect("late-read");
    if (info.queue.size() != 1) return;
    waiter_id = info.queue[0].waiter_id;
    const int64_t fence = held.lease.fence();
    if (held.lease.Release() != ReleaseStatus::kReleased) return;
    std::this_thread::sleep_for(milliseconds(800));
    waiter->DeliverUnlockEvent(HandOffEvent("late-read", fence, info.queue[0]));
  });
  const uint64_t renewals = waiter->stats().renewals;
  AcquireResult got = waiter->AcquireFor("late-read", seconds(10));
  ASSERT_TRUE(got) << got.last_error;
  const Steady::time_point now = Steady::now();
  ASSERT_EQ(waiter_id.rfind("g:", 0), 0u) << waiter_id;
  // Taken from the read, it would be valid for about 200 ms at most (the
  // fallback's threshold is a quarter of the window, 250 ms), and its
  // watchdog would renew it within a third of that.
  EXPECT_GT(got.lease.valid_until(), now + seconds(10));
  EXPECT_EQ(waiter->stats().renewals, renewals);
  EXPECT_GT(redis_->Execute({"PTTL", LockKey("late-read")}).integer, 10000);
  EXPECT_EQ(holder->Inspect("late-read").hold_count, 1);
  EXPECT_EQ(got.lease.Release(), ReleaseStatus::kReleased);
}

// The claim field tells the grantee the window its releaser granted with:
// a releaser with a shorter claim window than the grantee's own still
// gives it no validity past the key's time to live.
TEST_F(Fair, AHandOffInFullIsValidForTheReleasersClaimWindowNotTheGrantees) {
  auto holder = Connected({.presence_window = milliseconds(2400),
                           .claim_window = milliseconds(1000)});
  auto waiter = Connected({.spin_max_hold = milliseconds(0)});  // 30 s claim
  AcquireResult held = holder->TryAcquire("short-claim");
  ASSERT_TRUE(held);
  auto fut = Queue(*waiter, *holder, "short-claim", 1);
  const uint64_t renewals = waiter->stats().renewals;
  (void)held.lease.Release();  // its event wakes the waiter at once
  AcquireResult got = fut.get();
  ASSERT_TRUE(got) << got.last_error;
  // Read first: the watchdog's first renewal (a third of the way into
  // the validity) moves it on.
  const Steady::time_point valid = got.lease.valid_until();
  const int64_t pttl =
      redis_->Execute({"PTTL", LockKey("short-claim")}).integer;
  const Steady::time_point read = Steady::now();
  EXPECT_TRUE(pttl <= 1000 || waiter->stats().renewals > renewals)
      << "confirmed, not re-entered with the lease: " << pttl;
  EXPECT_LE(valid, read + milliseconds(pttl))
      << "validity past the key's time to live";
  EXPECT_EQ(got.lease.Release(), ReleaseStatus::kReleased);
}

// A caller-given owner token may be shared by several calls, which would
// re-enter a grant in full before its grantee confirmed it (and keep the
// lock for a whole lease should that grantee be dead): such calls queue as
// "w:" and are handed the lock to claim; only the thread's own token is
// handed it in full.
TEST_F(Fair, OnlyTheThreadsOwnOwnerTokenIsHandedALockInFull) {
  auto holder = NewClient();
  auto waiter = NewClient();
  AcquireResult held = holder->TryAcquire("tokens");
  ASSERT_TRUE(held);
  auto shared = std::async(std::launch::async, [&] {
    return waiter->AcquireFor("tokens", seconds(60), {.owner = "shared"});
  });
  auto own = std::async(std::launch::async, [&] {
    return waiter->AcquireFor("tokens", seconds(60));
  });
  LockInfo info;
  ASSERT_TRUE(WaitUntil([&] {
    info = holder->Inspect("tokens");
    return info.queue.size() == 2;
  }));
  for (const QueuedWaiter& w : info.queue) {
    EXPECT_EQ(w.waiter_id.substr(0, 2), w.owner == "shared" ? "w:" : "g:")
        << w.waiter_id << " " << w.owner;
  }
  (void)held.lease.Release();
  AcquireResult first =
      info.queue[0].owner == "shared" ? shared.get() : own.get();
  ASSERT_TRUE(first);
  EXPECT_EQ(first.lease.Release(), ReleaseStatus::kReleased);
  AcquireResult second =
      info.queue[0].owner == "shared" ? own.get() : shared.get();
  ASSERT_TRUE(second);
  EXPECT_EQ(second.lease.Release(), ReleaseStatus::kReleased);
}

// Rolling upgrade: a release by an older client hands the lock to claim
// (count 0, pending) even to a "g:" waiter. Its read finds the grant without
// its hold, and its full attempt claims it, with its own lease.
TEST_F(Fair, AHandOffToClaimFromAnOlderReleaserIsClaimedByAnInFullWaiter) {
  auto holder = NewClient();
  auto waiter = NewClient();
  AcquireResult held;
  std::future<AcquireResult> fut;
  const QueuedWaiter queued =
      HeldWithOneWaiter(*holder, *waiter, "older", &held, &fut);
  ASSERT_FALSE(queued.waiter_id.empty());
  // What an older release script does: free the lock, hand it to the head.
  const std::string lock = LockKey("older");
  const std::string fence = std::to_string(held.lease.fence() + 1000);
  redis_->Pipeline({{"DEL", lock},
                    {"LPOP", "lockfleet:{older}:queue"},
                    {"HDEL", "lockfleet:{older}:waiters", queued.waiter_id},
                    {"HSET", lock, "owner", queued.owner, "count", "0", "fence",
                     fence, "pending", queued.waiter_id},
                    {"PEXPIRE", lock, "2000"}});
  AcquireResult got = fut.get();
  ASSERT_TRUE(got) << got.last_error;
  EXPECT_EQ(std::to_string(got.lease.fence()), fence);
  LockInfo info = holder->Inspect("older");
  EXPECT_EQ(info.hold_count, 1);
  EXPECT_TRUE(info.pending_waiter.empty());
  EXPECT_GT(info.ttl, seconds(10)) << "claimed with its own lease";
  EXPECT_EQ(got.lease.Release(), ReleaseStatus::kReleased);
}

// An event naming a waiter as a hand-off's grantee is a hint: forged, or
// about another grant, it makes the waiter read the lock and go back to
// waiting — never hold it.
TEST_F(Fair, AForgedHandOffEventWakesTheNamedWaiterButGrantsNothing) {
  auto holder = NewClient();
  auto waiter = NewClient();
  AcquireResult held;
  std::future<AcquireResult> fut;
  const QueuedWaiter queued =
      HeldWithOneWaiter(*holder, *waiter, "forged-handoff", &held, &fut);
  ASSERT_FALSE(queued.waiter_id.empty());
  const uint64_t attempts = waiter->stats().attempts;
  const int64_t fence = held.lease.fence();
  for (int i = 0; i < 3; ++i) {
    waiter->DeliverUnlockEvent(
        HandOffEvent("forged-handoff", fence, queued, fence + 1 + i));
    EXPECT_TRUE(WaitUntil([&] {
      return waiter->stats().attempts >= attempts + 2 * (i + 1);
    })) << "a read, then a full attempt that queues it again";
  }
  EXPECT_EQ(fut.wait_for(milliseconds(300)), std::future_status::timeout);
  LockInfo info = holder->Inspect("forged-handoff");
  EXPECT_EQ(info.owner, held.lease.owner());
  ASSERT_EQ(info.queue.size(), 1u);
  EXPECT_EQ(info.queue[0].waiter_id, queued.waiter_id);
  (void)held.lease.Release();
  AcquireResult got = fut.get();
  ASSERT_TRUE(got);
  EXPECT_GT(got.lease.fence(), fence);
}

// A parked fair waiter's presence is refreshed by its client's watchdog,
// for all of the client's parked waiters in one pipelined round trip per
// interval (min(park_cap, presence / 3)): the waiters themselves make no
// attempt while they wait, and the watchdog's check is what wakes each one
// whose grant's event never comes (none here: no bus).
TEST_F(Fair, TheWatchdogKeepsParkedWaitersPresentInOneRoundTripForAll) {
  auto holder = NewClient();
  auto redis = NewRedis();
  auto waiter = std::make_unique<LockClient>(
      redis, LockClientOptions{.presence_window = milliseconds(1500),
                               .claim_window = milliseconds(1000)});
  constexpr int kWaiters = 8;
  std::vector<AcquireResult> held;
  std::vector<std::future<AcquireResult>> waits;
  for (int i = 0; i < kWaiters; ++i) {
    const std::string name = "kept:" + std::to_string(i);
    held.push_back(holder->TryAcquire(name));  // 30 s lease, renewed
    ASSERT_TRUE(held.back());
    waits.push_back(std::async(std::launch::async, [&waiter, name] {
      return waiter->AcquireFor(name, seconds(60));
    }));
  }
  ASSERT_TRUE(WaitUntil(
      [&] { return waiter->stats().contended_attempts >= kWaiters; }));
  const LockStats before = waiter->stats();
  const uint64_t trips_before = redis->round_trips();
  // 4 s: 8 intervals of 500 ms, past 2 presence windows. Each waiter's
  // own refresh would be 8 attempts (64 in all, one round trip each); the
  // watchdog's, 16 batches.
  std::this_thread::sleep_for(seconds(4));
  const LockStats after = waiter->stats();
  const uint64_t trips = redis->round_trips() - trips_before;
  for (int i = 0; i < kWaiters; ++i) {
    const LockInfo info = holder->Inspect("kept:" + std::to_string(i));
    ASSERT_EQ(info.queue.size(), 1u) << i;
    EXPECT_GT(info.queue[0].presence_left, milliseconds(0)) << i;
  }
  // A waiter makes its own attempt only when the watchdog's check came
  // late (a loaded machine): a few rounds at most, where each waiter would
  // otherwise have made 8.
  EXPECT_LE(after.attempts - before.attempts, uint64_t{3 * kWaiters});
  EXPECT_GE(after.presence_refreshes - before.presence_refreshes,
            uint64_t{kWaiters * 4});
  // Two pipelined round trips per interval for all (16), against 64.
  EXPECT_LE(trips, 40u);
  for (AcquireResult& h : held)
    ASSERT_EQ(h.lease.Release(), ReleaseStatus::kReleased);
  for (auto& w : waits) {
    AcquireResult got = w.get();
    ASSERT_TRUE(got);
    EXPECT_EQ(got.lease.Release(), ReleaseStatus::kReleased);
  }
  // Each hand-off took the waiter off the queue; the watchdog's next check
  // found that and woke it (no event: no bus), unless the waiter's own
  // attempt, after a late check, came first.
  EXPECT_GE(waiter->stats().presence_wakes, 1u);
  EXPECT_EQ(waiter->stats().wakeups_event, 0u);
}

// A queued call whose caller-given owner token another call got the lock
// under (here the call queued ahead, handed it) re-enters that grant, as
// its own attempt would: its watchdog's check answers "attempt" (not
// "refreshed"), within an interval, not when the grant's lease runs out.
TEST_F(Fair, AQueuedCallReentersAGrantItsOwnerTokenGotAtTheWatchdogsCheck) {
  const LockClientOptions o = ShortWindowsNoSpin();
  auto holder = NewClient(o);  // none on a bus: no event wakes anyone
  auto first = NewClient(o);
  auto second = NewClient(o);
  AcquireResult held = holder->TryAcquire("shared-token");  // 30 s lease
  ASSERT_TRUE(held);
  auto a = std::async(std::launch::async, [&] {
    return first->AcquireFor("shared-token", seconds(60), {.owner = "team"});
  });
  ASSERT_TRUE(WaitUntil(
      [&] { return holder->Inspect("shared-token").queue.size() == 1; }));
  auto b = std::async(std::launch::async, [&] {
    return second->AcquireFor("shared-token", seconds(60), {.owner = "team"});
  });
  ASSERT_TRUE(WaitUntil(
      [&] { return holder->Inspect("shared-token").queue.size() == 2; }));
  ASSERT_EQ(held.lease.Release(), ReleaseStatus::kReleased);
  AcquireResult got_a = a.get();  // handed to claim; claimed: a 30 s lease
  ASSERT_TRUE(got_a) << got_a.last_error;
  const Steady::time_point claimed = Steady::now();
  AcquireResult got_b = b.get();
  ASSERT_TRUE(got_b) << got_b.last_error;
  // Not the 30 s of the grant's lease: an interval (500 ms) and its batch
  // (woken by the watchdog's check, or by its own bound should the check
  // come late on a loaded machine: that bound is the check's interval).
  EXPECT_LT(Steady::now() - claimed, seconds(10));
  EXPECT_EQ(got_b.lease.fence(), got_a.lease.fence()) << "one grant";
  LockInfo info = holder->Inspect("shared-token");
  EXPECT_EQ(info.hold_count, 2);
  EXPECT_TRUE(info.queue.empty());
  EXPECT_EQ(got_b.lease.Release(), ReleaseStatus::kStillHeld);
  EXPECT_EQ(got_a.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(holder->Inspect("shared-token").locked);
}

// A lock whose holder's lease ran out without a release (its key gone, no
// event) is taken by the first queued waiter at its watchdog's check: the
// check tells it to attempt, and it makes that one attempt, without the
// read a hand-off in full would be confirmed with.
TEST_F(Fair, AFreeLocksFirstWaiterGoesStraightToItsAttempt) {
  const LockClientOptions o = ShortWindowsNoSpin();
  auto holder = NewClient(o);
  auto waiter = NewClient(o);
  AcquireResult held;
  std::future<AcquireResult> fut;
  const QueuedWaiter queued =
      HeldWithOneWaiter(*holder, *waiter, "lapsed", &held, &fut);
  ASSERT_EQ(queued.waiter_id.rfind("g:", 0), 0u);
  const LockStats before = waiter->stats();
  // The holder's lease ran out (its process froze): the key is gone, and
  // no release announced it. The waiter's own bound is the 30 s lease.
  ASSERT_EQ(redis_->Execute({"DEL", LockKey("lapsed")}).integer, 1);
  const Steady::time_point freed = Steady::now();
  AcquireResult got = fut.get();
  ASSERT_TRUE(got) << got.last_error;
  EXPECT_LT(Steady::now() - freed, seconds(10));
  const LockStats after = waiter->stats();
  // One attempt, no confirming read first. (Woken by the watchdog's check
  // as a rule; a check made late on a loaded machine may leave the
  // waiter's own bounded park to end first: an attempt too, no read.)
  EXPECT_EQ(after.attempts, before.attempts + 1);
  EXPECT_EQ(after.spins, before.spins);
  // The old holder's release touches nothing of the new grant.
  EXPECT_EQ(held.lease.Release(), ReleaseStatus::kNotOwner);
  EXPECT_EQ(holder->Inspect("lapsed").fence, got.lease.fence());
  EXPECT_EQ(got.lease.Release(), ReleaseStatus::kReleased);
}

// The watchdog keeps only the places of waiters whose threads are alive: a
// waiter stuck in its own thread (here in a test hook after its second
// attempt; in real life in user code, an observer) is no longer refreshed
// after 1.5 intervals, so its place lapses as a hung waiter's always did,
// and the hand-off skips it.
TEST_F(Fair, AWaiterStuckInItsOwnThreadStillLapses) {
  const LockClientOptions o{.presence_window = milliseconds(600),
                            .claim_window = milliseconds(400)};
  auto holder = NewClient(o);
  auto stuck = NewClient(o);
  auto other = NewClient(o);
  AcquireResult held = holder->TryAcquire("stuck");
  ASSERT_TRUE(held);
  std::atomic<int> failed{0};
  stuck->SetAfterFailedAttemptHookForTesting([&](std::string_view) {
    if (failed.fetch_add(1) == 1) std::this_thread::sleep_for(seconds(5));
  });
  auto first = std::async(std::launch::async, [&] {
    return stuck->AcquireFor("stuck", seconds(30), {.owner = "stuck-owner"});
  });
  ASSERT_TRUE(
      WaitUntil([&] { return holder->Inspect("stuck").queue.size() == 1; }));
  auto second = std::async(std::launch::async, [&] {
    return other->AcquireFor("stuck", seconds(30), {.owner = "other-owner"});
  });
  ASSERT_TRUE(
      WaitUntil([&] { return holder->Inspect("stuck").queue.size() == 2; }));
  // Wake the first waiter (an event for the lock): its attempt is refused,
  // and its thread stays in the hook.
  UnlockEvent e;
  e.lock = "stuck";
  e.owner = "someone";
  e.client_id = "elsewhere";
  e.fence = 1;
  stuck->DeliverUnlockEvent(e);
  ASSERT_TRUE(WaitUntil([&] { return failed.load() >= 2; }));
  // 1.5 intervals (300 ms) unseen, the next batch (100 ms), then a presence
  // window (600 ms).
  std::this_thread::sleep_for(milliseconds(1500));
  const LockInfo before = holder->Inspect("stuck");
  ASSERT_EQ(before.queue.size(), 2u);
  EXPECT_EQ(before.queue[0].owner, "stuck-owner");
  EXPECT_LE(before.queue[0].presence_left, milliseconds(0));
  EXPECT_GT(before.queue[1].presence_left, milliseconds(0));
  ASSERT_EQ(held.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_EQ(holder->Inspect("stuck").owner, "other-owner");
  AcquireResult got = second.get();
  ASSERT_TRUE(got);
  ASSERT_EQ(got.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_TRUE(first.get());  // back from the hook, it queues again
}

TEST_F(Fair, CancelledWaiterIsNeverLeftHoldingTheLock) {
  auto holder = Connected();
  auto a = Connected();
  auto b = Connected();
  for (int i = 0; i < 20; ++i) {
    std::string name = "cancel:" + std::to_string(i);
    AcquireResult held = holder->TryAcquire(name);
    std::stop_source stop;
    auto fa = std::async(std::launch::async, [&] {
      return a->AcquireFor(name, seconds(60), {.stop = stop.get_token()});
    });
    ASSERT_TRUE(WaitUntil([&] { return a->Inspect(name).queue.size() == 1; }));
    auto fb = std::async(std::launch::async,
                         [&] { return b->AcquireFor(name, seconds(60)); });
    ASSERT_TRUE(WaitUntil([&] { return a->Inspect(name).queue.size() == 2; }));
    // Cancel a and release the holder at nearly the same time.
    std::thread canceller([&, i] {
      std::this_thread::sleep_for(std::chrono::microseconds(i % 4 * 250));
      stop.request_stop();
    });
    std::this_thread::sleep_for(std::chrono::microseconds(i % 3 * 300));
    (void)held.lease.Release();
    canceller.join();
    AcquireResult ra = fa.get();
    if (ra) {
      (void)ra.lease.Release();  // a won the race fair and square
    } else {
      EXPECT_EQ(ra.status, AcquireStatus::kCancelled);
      LockInfo info = a->Inspect(name);
      EXPECT_NE(info.owner.rfind(a->client_id(), 0), 0u)
          << "cancelled waiter holds " << i;
    }
    ASSERT_TRUE(fb.get()) << i;  // b always gets it, promptly
  }
}

TEST_F(Fair, TimedOutWaiterPassesOnAGrantThatReachedItTooLate) {
  auto holder = Connected();
  auto a = Connected();
  auto b = Connected();
  AcquireResult held = holder->TryAcquire("late");
  std::future<AcquireResult> fb;
  // After a's last refused attempt, and after its deadline: b queues behind
  // it, then the holder releases, handing the lock to a — which is leaving.
  a->SetAfterFailedAttemptHookForTesting([&](std::string_view) {
    if (!held.lease.held()) return;
    fb = std::async(std::launch::async,
                    [&] { return b->AcquireFor("late", seconds(60)); });
    ASSERT_TRUE(
        WaitUntil([&] { return a->Inspect("late").queue.size() == 2; }));
    std::this_thread::sleep_for(milliseconds(20));  // past a's deadline
    (void)held.lease.Release();
    // Handed to a (in full: a's hold, under a's owner token).
    EXPECT_EQ(a->Inspect("late").owner.rfind(a->client_id(), 0), 0u);
  });
  AcquireResult ra = a->AcquireFor("late", milliseconds(5));
  a->SetAfterFailedAttemptHookForTesting(nullptr);
  EXPECT_EQ(ra.status, AcquireStatus::kTimedOut);
  AcquireResult rb = fb.get();
  ASSERT_TRUE(rb);  // a passed the grant on as it left
  EXPECT_EQ(a->Inspect("late").owner, rb.lease.owner());
}

TEST_F(Fair, ReentrantHoldsDeferTheHandOffUntilTheLastRelease) {
  auto holder = Connected();
  auto waiter = Connected();
  AcquireResult outer = holder->TryAcquire("re");
  AcquireResult inner = holder->TryAcquire("re");  // reentrant, queue or not
  ASSERT_TRUE(outer && inner);
  auto fut = std::async(std::launch::async,
                        [&] { return waiter->AcquireFor("re", seconds(60)); });
  ASSERT_TRUE(
      WaitUntil([&] { return holder->Inspect("re").queue.size() == 1; }));
  AcquireResult again =
      holder->TryAcquire("re");  // still reentrant with a queue
  ASSERT_TRUE(again);
  EXPECT_EQ(again.lease.Release(), ReleaseStatus::kStillHeld);
  EXPECT_EQ(inner.lease.Release(), ReleaseStatus::kStillHeld);
  EXPECT_TRUE(holder->Inspect("re").pending_waiter.empty());
  EXPECT_EQ(outer.lease.Release(), ReleaseStatus::kReleased);
  AcquireResult got = fut.get();
  ASSERT_TRUE(got);
  EXPECT_GT(got.lease.fence(), outer.lease.fence());
}

TEST_F(Fair, ForceUnlockHandsTheLockToTheQueue) {
  auto holder = Connected();
  auto waiter = Connected();
  AcquireResult held = holder->TryAcquire("force");
  auto fut = std::async(std::launch::async, [&] {
    return waiter->AcquireFor("force", seconds(60));
  });
  ASSERT_TRUE(
      WaitUntil([&] { return holder->Inspect("force").queue.size() == 1; }));
  ForceUnlockResult f = holder->ForceUnlock("force");
  EXPECT_TRUE(f.was_locked);
  EXPECT_EQ(f.previous_owner, held.lease.owner());
  ASSERT_TRUE(fut.get());
  EXPECT_TRUE(held.lease.lost());
}

// Every contender makes progress, in turn: Jain's fairness index over the
// per-contender acquisition counts of a time-bounded run.
TEST_F(Fair, NoStarvationUnderContention) {
  constexpr int kClients = 4, kThreads = 2;
  std::vector<std::unique_ptr<LockClient>> clients;
  for (int c = 0; c < kClients; ++c) clients.push_back(Connected());
  std::atomic<bool> stop{false};
  std::atomic<int> inside{0}, overlaps{0};
  std::vector<long> counts(kClients * kThreads, 0);
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, c, t] {
        while (!stop.load()) {
          AcquireResult r = clients[c]->AcquireFor("hot", seconds(60));
          if (!r) continue;
          if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
          std::this_thread::sleep_for(std::chrono::microseconds(200));
          inside.fetch_sub(1);
          ++counts[c * kThreads + t];
        }
      });
    }
  }
  std::this_thread::sleep_for(milliseconds(1500));
  stop.store(true);
  for (auto& t : threads) t.join();
  double sum = 0, squares = 0;
  long least = counts[0];
  for (long n : counts) {
    sum += n;
    squares += double(n) * n;
    least = std::min(least, n);
  }
  double jain = sum * sum / (counts.size() * squares);
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_GT(least, 0) << "a contender starved";
  EXPECT_GT(jain, 0.9);
  std::printf("fair: %d contenders, %.0f acquisitions, min %ld, Jain %.3f\n",
              kClients * kThreads, sum, least, jain);
}

}  // namespace
}  // namespace lockfleet::testing
