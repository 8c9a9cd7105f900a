// Direct grants: a release whose first live waiter in the queue belongs to
// the releasing client grants that waiter the lock in full (its hold, its
// lease, nothing pending), and the waiter wakes holding it — no claim round
// trip, no unlock event. What must hold: FIFO order across processes, one
// holder, a grant to a waiter that is leaving is never left behind, and a
// release that is no longer the owner's grants nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <optional>
#include <random>
#include <thread>

#include "lock_fixture.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class DirectGrant : public ConnectedLockTest {
 protected:
  // A waiting acquisition of `name` on `client` as `owner`; returns once it
  // is queued at `position` and counted.
  static std::future<AcquireResult> Queue(LockClient& client,
                                          const std::string& name,
                                          const std::string& owner,
                                          size_t position,
                                          AcquireOptions o = {}) {
    o.owner = owner;
    return ConnectedLockTest::Queue(client, client, name, position, o);
  }
};

TEST_F(DirectGrant, ASameProcessHandOffIsAFullGrantWithoutAClaim) {
  auto client = Connected();
  // The release script loaded (else its first run costs a NOSCRIPT trip).
  ASSERT_EQ(client->TryAcquire("warm-up").lease.Release(),
            ReleaseStatus::kReleased);
  AcquireResult held = client->TryAcquire("direct", {.owner = "holder"});
  ASSERT_TRUE(held);
  auto waited = Queue(*client, "direct", "waiter", 1);
  const LockStats before = client->stats();
  const uint64_t trips = client->redis().round_trips();
  ASSERT_EQ(held.lease.Release(), ReleaseStatus::kReleased);
  AcquireResult r = waited.get();
  ASSERT_TRUE(r);
  const LockStats after = client->stats();
  EXPECT_EQ(after.direct_grants - before.direct_grants, 1u);
  EXPECT_EQ(after.attempts, before.attempts) << "the waiter claimed";
  EXPECT_EQ(client->redis().round_trips() - trips, 1u) << "the release only";
  EXPECT_EQ(after.events_published, before.events_published);
  EXPECT_EQ(r.lease.owner(), "waiter");
  EXPECT_GT(r.lease.fence(), held.lease.fence());
  // In Redis: the waiter's own grant, its hold, its lease, nothing pending.
  LockInfo info = client->Inspect("direct");
  EXPECT_EQ(info.owner, "waiter");
  EXPECT_EQ(info.fence, r.lease.fence());
  EXPECT_EQ(info.hold_count, 1);
  EXPECT_TRUE(info.pending_waiter.empty());
  EXPECT_TRUE(info.queue.empty());
  EXPECT_GT(info.ttl, seconds(20));  // the 30 s watchdog lease
  // The grant is the waiter's like any other: re-entered, released.
  AcquireResult again = client->TryAcquire("direct", {.owner = "waiter"});
  ASSERT_TRUE(again);
  EXPECT_EQ(again.lease.fence(), r.lease.fence());
  EXPECT_EQ(again.lease.Release(), ReleaseStatus::kStillHeld);
  EXPECT_EQ(r.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(client->Inspect("direct").locked);
}

TEST_F(DirectGrant, AnExplicitLeaseIsGrantedAsAskedAndNotRenewed) {
  auto client = Connected();
  AcquireResult held = client->TryAcquire("explicit", {.owner = "holder"});
  ASSERT_TRUE(held);
  auto waited =
      Queue(*client, "explicit", "waiter", 1, {.lease = milliseconds(100000)});
  ASSERT_EQ(held.lease.Release(), ReleaseStatus::kReleased);
  AcquireResult r = waited.get();
  ASSERT_TRUE(r);
  EXPECT_EQ(client->stats().direct_grants, 1u);
  LockInfo info = client->Inspect("explicit");
  EXPECT_EQ(info.owner, "waiter");
  EXPECT_GT(info.ttl, seconds(90));
  EXPECT_LE(info.ttl, seconds(100));
  EXPECT_EQ(r.lease.Release(), ReleaseStatus::kReleased);
}

// The queue decides, not the process: a waiter of another client queued
// first gets a claimable hand-off (and its event), the releasing client's
// own waiter behind it waits its turn; then that client's waiters take the
// lock in their order, directly.
TEST_F(DirectGrant, QueueOrderHoldsAcrossProcesses) {
  auto a = Connected();
  auto b = Connected();
  AcquireResult held = a->TryAcquire("order", {.owner = "a:holder"});
  ASSERT_TRUE(held);
  auto b1 = Queue(*b, "order", "b:1", 1);
  auto a2 = Queue(*a, "order", "a:2", 2);
  auto a3 = Queue(*a, "order", "a:3", 3);
  ASSERT_EQ(held.lease.Release(), ReleaseStatus::kReleased);
  AcquireResult first = b1.get();
  ASSERT_TRUE(first);
  const int64_t first_fence = first.lease.fence();
  EXPECT_EQ(a->stats().direct_grants, 0u);
  EXPECT_EQ(a2.wait_for(milliseconds(0)), std::future_status::timeout);
  // b's release: the head (a:2) is not b's, a claimable hand-off again.
  ASSERT_EQ(first.lease.Release(), ReleaseStatus::kReleased);
  AcquireResult second = a2.get();
  ASSERT_TRUE(second);
  const int64_t second_fence = second.lease.fence();
  EXPECT_EQ(second.lease.owner(), "a:2");
  EXPECT_EQ(b->stats().direct_grants + a->stats().direct_grants, 0u);
  // a's release: the head (a:3) is a's own, a direct grant.
  EXPECT_EQ(a3.wait_for(milliseconds(0)), std::future_status::timeout);
  ASSERT_EQ(second.lease.Release(), ReleaseStatus::kReleased);
  AcquireResult third = a3.get();
  ASSERT_TRUE(third);
  EXPECT_EQ(third.lease.owner(), "a:3");
  EXPECT_EQ(a->stats().direct_grants, 1u);
  EXPECT_LT(first_fence, second_fence);
  EXPECT_LT(second_fence, third.lease.fence());
  EXPECT_EQ(third.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(a->Inspect("order").locked);
}

// A release that is no longer the owner's — the grant was force-unlocked
// and handed to the queued waiter meanwhile — grants nothing: the waiter
// has the lock through the force-unlock's hand-off, and is its only holder.
TEST_F(DirectGrant, AReleaseByAFormerHolderGrantsNothing) {
  auto client = Connected();
  auto admin = Connected();
  AcquireResult held = client->TryAcquire("taken", {.owner = "holder"});
  ASSERT_TRUE(held);
  auto waited = Queue(*client, "taken", "waiter", 1);
  ForceUnlockResult forced = admin->ForceUnlock("taken");
  ASSERT_TRUE(forced.was_locked);
  AcquireResult r = waited.get();
  ASSERT_TRUE(r);
  EXPECT_EQ(r.lease.owner(), "waiter");
  EXPECT_NE(held.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_EQ(client->stats().direct_grants, 0u);
  LockInfo info = client->Inspect("taken");
  EXPECT_EQ(info.owner, "waiter");
  EXPECT_EQ(info.fence, r.lease.fence());
  EXPECT_EQ(info.hold_count, 1);
  EXPECT_EQ(r.lease.Release(), ReleaseStatus::kReleased);
}

// A waiter that gives up (timeout or cancellation) just as the release
// grants it the lock: whichever comes first, the call reports what is true
// (acquired, and it holds the lock; or not, and nothing holds it), and a
// grant made to a waiter that left is given back — the lock is never left
// held by nobody's lease. 150 races with random timings.
TEST_F(DirectGrant, AWaiterLeavingAsItIsGrantedNeverLeavesTheLockHeld) {
  auto client = Connected();
  std::mt19937 rng(20261125);
  int acquired = 0, left = 0;
  for (int i = 0; i < 150; ++i) {
    SCOPED_TRACE("race " + std::to_string(i));
    AcquireResult held = client->TryAcquire("race", {.owner = "holder"});
    ASSERT_TRUE(held);
    const milliseconds patience(rng() % 15);
    const milliseconds release_after(rng() % 15);
    const bool cancel = i % 2 == 1;
    std::stop_source stop;
    auto waited = std::async(std::launch::async, [&] {
      AcquireOptions o{.owner = "waiter"};
      if (cancel) {
        o.stop = stop.get_token();
        return client->AcquireFor("race", seconds(60), o);
      }
      return client->AcquireFor("race", patience, o);
    });
    if (cancel) {
      std::this_thread::sleep_for(patience);
      stop.request_stop();
    }
    std::this_thread::sleep_for(release_after);
    ASSERT_EQ(held.lease.Release(), ReleaseStatus::kReleased);
    AcquireResult r = waited.get();
    LockInfo info = client->Inspect("race");
    if (r) {
      ++acquired;
      EXPECT_EQ(info.owner, "waiter");
      EXPECT_EQ(info.fence, r.lease.fence());
      EXPECT_EQ(info.hold_count, 1);
      ASSERT_EQ(r.lease.Release(), ReleaseStatus::kReleased);
      info = client->Inspect("race");
    } else {
      ++left;
    }
    ASSERT_FALSE(info.locked)
        << "left held by " << info.owner << " (fence " << info.fence
        << ", holds " << info.hold_count << ")";
    ASSERT_TRUE(info.queue.empty());
  }
  std::printf("%d acquired (%llu directly), %d gave up\n", acquired,
              static_cast<unsigned long long>(client->stats().direct_grants),
              left);
  EXPECT_GT(acquired, 0);
  EXPECT_GT(left, 0);
}

// The two orders the race test above can only hit by chance, forced with
// the hook that runs between the release script's direct grant and its
// hand-over to the waiter.
//
// 1. The waiter takes the grant by itself first: woken by an event, its own
// try finds the grant (its owner, its hold) and re-enters it, and its call
// returns before the hand-over. The hand-over then finds no waiter — and
// must leave the grant alone: the waiter holds it.
TEST_F(DirectGrant, AWaiterThatReenteredTheGrantFirstKeepsIt) {
  auto client = Connected();
  AcquireResult held = client->TryAcquire("first", {.owner = "holder"});
  ASSERT_TRUE(held);
  auto waited = Queue(*client, "first", "waiter", 1);
  std::optional<AcquireResult> result;
  client->SetBeforeDirectGrantHookForTesting([&](std::string_view) {
    UnlockEvent hint;
    hint.lock = "first";
    hint.client_id = "someone-else";
    hint.cause = UnlockCause::kRelease;
    client->DeliverUnlockEvent(hint);  // wakes the waiter to try
    result = waited.get();             // which re-enters the grant
  });
  ASSERT_EQ(held.lease.Release(), ReleaseStatus::kReleased);
  client->SetBeforeDirectGrantHookForTesting(nullptr);
  ASSERT_TRUE(result.has_value());
  ASSERT_TRUE(*result);
  EXPECT_EQ(client->stats().direct_grants, 0u);  // it took it by itself
  LockInfo info = client->Inspect("first");
  EXPECT_EQ(info.owner, "waiter");
  EXPECT_EQ(info.fence, result->lease.fence());
  EXPECT_EQ(info.hold_count, 1);
  EXPECT_FALSE(result->lease.lost());
  EXPECT_EQ(result->lease.Release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(client->Inspect("first").locked);
}

// 2. The waiter gives up first: cancelled, its abandon gives the grant's
// hold back and the lock goes on — here to a waiter of another process,
// which takes it. The late hand-over then finds no waiter and gives back
// the departed waiter's hold at the grant's fence: that touches nothing
// of the new holder's grant.
TEST_F(DirectGrant, AWaiterThatLeftFirstLosesTheGrantAndTheNextHolderKeepsIt) {
  auto client = Connected();
  auto other = Connected();
  AcquireResult held = client->TryAcquire("left", {.owner = "holder"});
  ASSERT_TRUE(held);
  std::stop_source stop;
  auto waited = Queue(*client, "left", "waiter", 1, {.stop = stop.get_token()});
  auto next = Queue(*other, "left", "next", 2);
  std::optional<AcquireResult> gave_up;
  std::optional<AcquireResult> taken;
  client->SetBeforeDirectGrantHookForTesting([&](std::string_view) {
    stop.request_stop();
    gave_up = waited.get();  // abandoned: the grant passed on to "next"
    taken = next.get();
  });
  ASSERT_EQ(held.lease.Release(), ReleaseStatus::kReleased);
  client->SetBeforeDirectGrantHookForTesting(nullptr);
  ASSERT_TRUE(gave_up.has_value());
  EXPECT_EQ(gave_up->status, AcquireStatus::kCancelled);
  ASSERT_TRUE(taken.has_value());
  ASSERT_TRUE(*taken);
  EXPECT_EQ(client->stats().direct_grants, 0u);
  LockInfo info = other->Inspect("left");
  EXPECT_EQ(info.owner, "next");
  EXPECT_EQ(info.fence, taken->lease.fence());
  EXPECT_EQ(info.hold_count, 1);
  EXPECT_TRUE(info.queue.empty());
  EXPECT_EQ(taken->lease.Release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(other->Inspect("left").locked);
}

// Many threads of one process on one lock: every hand-off between them is
// direct, the critical sections never overlap, and the fences only grow.
TEST_F(DirectGrant, ThreadsOfOneProcessHandOverDirectlyOneAtATime) {
  auto client = Connected();
  constexpr int kThreads = 6;
  constexpr int kRounds = 40;
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::mutex mu;
  int64_t last_fence = 0;
  int regressions = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        AcquireResult r = client->AcquireFor(
            "busy", seconds(60), {.owner = "t" + std::to_string(t)});
        ASSERT_TRUE(r);
        if (inside.fetch_add(1) != 0) ++overlaps;
        {
          std::lock_guard lock(mu);
          if (r.lease.fence() <= last_fence) ++regressions;
          last_fence = r.lease.fence();
        }
        std::this_thread::sleep_for(milliseconds(1));
        inside.fetch_sub(1);
        ASSERT_EQ(r.lease.Release(), ReleaseStatus::kReleased);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(regressions, 0);
  const LockStats s = client->stats();
  EXPECT_EQ(s.acquisitions, uint64_t(kThreads * kRounds));
  EXPECT_GT(s.direct_grants, 0u);
  std::printf("%llu of %d acquisitions granted directly\n",
              static_cast<unsigned long long>(s.direct_grants),
              kThreads * kRounds);
  EXPECT_FALSE(client->Inspect("busy").locked);
}

}  // namespace
}  // namespace lockfleet::testing
