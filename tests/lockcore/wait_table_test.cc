// The local wait table in isolation: listen-first, wake-one, pass-on.
#include "wait_table.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace lockfleet::internal {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(WaitTable, WakeBeforeParkIsNotLost) {
  WaitTable table;
  WaitTable::Slot slot;
  table.Register("a", &slot);
  EXPECT_TRUE(table.WakeOne("a", WakeCause::kEvent));  // lands before Park
  EXPECT_EQ(table.Park(&slot, seconds(30), {}), WakeCause::kEvent);
  table.Unregister("a", &slot);
}

TEST(WaitTable, ParkIsBounded) {
  WaitTable table;
  WaitTable::Slot slot;
  table.Register("a", &slot);
  EXPECT_EQ(table.Park(&slot, milliseconds(5), {}), WakeCause::kBound);
  table.Unregister("a", &slot);
}

TEST(WaitTable, WakeOneWakesExactlyOneOldestFirst) {
  WaitTable table;
  WaitTable::Slot first, second;
  table.Register("a", &first);
  table.Register("a", &second);
  EXPECT_TRUE(table.WakeOne("a", WakeCause::kLocal));
  EXPECT_EQ(table.Park(&first, milliseconds(0), {}), WakeCause::kLocal);
  EXPECT_EQ(table.Park(&second, milliseconds(0), {}), WakeCause::kBound);
  table.Unregister("a", &first);
  table.Unregister("a", &second);
}

TEST(WaitTable, WakesOnlyTheNamedLock) {
  WaitTable table;
  WaitTable::Slot slot;
  table.Register("a", &slot);
  EXPECT_FALSE(table.WakeOne("b", WakeCause::kEvent));
  EXPECT_EQ(table.Park(&slot, milliseconds(0), {}), WakeCause::kBound);
  table.Unregister("a", &slot);
  EXPECT_EQ(table.waiters("a"), 0u);
}

TEST(WaitTable, DepartingWaiterPassesItsWakeOn) {
  WaitTable table;
  WaitTable::Slot leaving, staying;
  table.Register("a", &leaving);
  table.Register("a", &staying);
  EXPECT_TRUE(table.WakeOne("a", WakeCause::kEvent));  // goes to `leaving`
  table.Unregister("a", &leaving);                     // timed out instead
  EXPECT_EQ(table.Park(&staying, milliseconds(0), {}), WakeCause::kEvent);
  table.Unregister("a", &staying);
}

TEST(WaitTable, ConsumedWakeIsNotPassedOn) {
  WaitTable table;
  WaitTable::Slot winner, other;
  table.Register("a", &winner);
  table.Register("a", &other);
  table.WakeOne("a", WakeCause::kEvent);
  EXPECT_EQ(table.Park(&winner, milliseconds(0), {}),
            WakeCause::kEvent);  // consumed
  table.Unregister("a", &winner);
  EXPECT_EQ(table.Park(&other, milliseconds(0), {}), WakeCause::kBound);
  table.Unregister("a", &other);
}

// A waiter that took a wake from Park, then failed its attempt (Redis
// down) and leaves, hands that wake on: the next waiter must not sleep out
// its bound for a free lock.
TEST(WaitTable, DepartingWaiterPassesOnAWakeItCouldNotUse) {
  WaitTable table;
  WaitTable::Slot leaving, staying;
  table.Register("a", &leaving);
  table.Register("a", &staying);
  table.WakeOne("a", WakeCause::kLocal);
  const WakeCause took = table.Park(&leaving, milliseconds(0), {});
  ASSERT_EQ(took, WakeCause::kLocal);
  table.Unregister("a", &leaving, took);  // its attempt failed
  EXPECT_EQ(table.Park(&staying, milliseconds(0), {}), WakeCause::kLocal);
  table.Unregister("a", &staying);
  // A bound or a cancellation is no wake to pass on.
  table.Register("a", &leaving);
  table.Register("a", &staying);
  table.Unregister("a", &leaving, WakeCause::kBound);
  EXPECT_EQ(table.Park(&staying, milliseconds(0), {}), WakeCause::kBound);
  table.Unregister("a", &staying);
}

// Review finding: a wake arriving after a waiter's successful attempt (a
// force-unlock of the grant it just got, say) was swallowed.
TEST(WaitTable, LateWakeIsPassedOnEvenByAWaiterThatAcquired) {
  WaitTable table;
  WaitTable::Slot winner, other;
  table.Register("a", &winner);
  table.Register("a", &other);
  table.WakeOne("a", WakeCause::kEvent);  // lands after winner's last park
  table.Unregister("a", &winner);
  EXPECT_EQ(table.Park(&other, milliseconds(0), {}), WakeCause::kEvent);
  table.Unregister("a", &other);
}

TEST(WaitTable, TargetedWakeReachesOnlyTheNamedWaiter) {
  WaitTable table;
  WaitTable::Slot first, second;
  first.waiter_id = "w:1";
  second.waiter_id = "w:2";
  table.Register("a", &first);
  table.Register("a", &second);
  EXPECT_TRUE(table.HandedOff("a", "w:2", WakeCause::kEvent));
  EXPECT_FALSE(table.HandedOff("a", "w:3", WakeCause::kEvent));
  EXPECT_EQ(table.Park(&first, milliseconds(0), {}), WakeCause::kBound);
  EXPECT_EQ(table.Park(&second, milliseconds(0), {}), WakeCause::kEvent);
  table.Unregister("a", &first);
  table.Unregister("a", &second);
}

// The watchdog's wake (kChecked) says whether the waiter may have been
// handed the lock (off the queue: it confirms with a read) or is only to
// attempt; a slot woken already (by an event) keeps its cause but learns
// the former.
TEST(WaitTable, AWatchdogWakeTellsWhetherTheWaiterMayHaveBeenHandedTheLock) {
  WaitTable table;
  WaitTable::Slot slot;
  slot.waiter_id = "g:1";
  table.Register("a", &slot);
  DirectGrant grant;
  EXPECT_TRUE(table.WakeWaiter("a", "g:1", WakeCause::kChecked));
  EXPECT_EQ(table.Park(&slot, seconds(30), {}, &grant), WakeCause::kChecked);
  EXPECT_FALSE(grant.handed);
  EXPECT_TRUE(table.WakeWaiter("a", "g:1", WakeCause::kChecked, true));
  EXPECT_EQ(table.Park(&slot, seconds(30), {}, &grant), WakeCause::kChecked);
  EXPECT_TRUE(grant.handed);
  EXPECT_TRUE(table.WakeOne("a", WakeCause::kEvent));
  EXPECT_FALSE(table.WakeWaiter("a", "g:1", WakeCause::kChecked, true));
  EXPECT_FALSE(table.WakeWaiter("a", "g:2", WakeCause::kChecked, true));
  EXPECT_EQ(table.Park(&slot, seconds(30), {}, &grant), WakeCause::kEvent);
  EXPECT_TRUE(grant.handed);
  EXPECT_EQ(table.Park(&slot, milliseconds(0), {}), WakeCause::kBound);
  table.Unregister("a", &slot);
}

// Direct grants: the grant reaches only its waiter, survives a later hint
// for the same waiter, and a waiter that leaves with it gets it back from
// Unregister (to give back) while the next waiter is only told to try.
TEST(WaitTable, ADirectGrantReachesItsWaiterWithItsFence) {
  WaitTable table;
  WaitTable::Slot first, second;
  first.waiter_id = "w1";
  second.waiter_id = "w2";
  table.Register("a", &first);
  table.Register("a", &second);
  const auto sent = std::chrono::steady_clock::now();
  EXPECT_TRUE(table.HandedOff("a", "w2", WakeCause::kGranted,
                              {.fence = 42, .sent = sent}));
  EXPECT_FALSE(table.HandedOff("a", "w9", WakeCause::kGranted,
                               {.fence = 43, .sent = sent}));
  EXPECT_FALSE(table.HandedOff("b", "w2", WakeCause::kGranted,
                               {.fence = 44, .sent = sent}));
  // A hint for the same waiter does not replace the grant.
  EXPECT_TRUE(table.HandedOff("a", "w2", WakeCause::kEvent));
  DirectGrant grant;
  EXPECT_EQ(table.Park(&second, seconds(30), {}, &grant), WakeCause::kGranted);
  EXPECT_EQ(grant.fence, 42);
  EXPECT_EQ(grant.sent, sent);
  EXPECT_EQ(table.Park(&first, milliseconds(0), {}), WakeCause::kBound);
  EXPECT_FALSE(table.Unregister("a", &second));  // consumed: nothing left
  table.Unregister("a", &first);
}

TEST(WaitTable, AGrantLeftInADepartingSlotIsReturnedAndOnlyAWakePassedOn) {
  WaitTable table;
  WaitTable::Slot leaving, next;
  leaving.waiter_id = "w1";
  next.waiter_id = "w2";
  table.Register("a", &leaving);
  table.Register("a", &next);
  ASSERT_TRUE(table.HandedOff("a", "w1", WakeCause::kGranted, {.fence = 7}));
  EXPECT_TRUE(table.Unregister("a", &leaving));
  // Gone from the table: a grant cannot reach it any more.
  EXPECT_FALSE(table.HandedOff("a", "w1", WakeCause::kGranted, {.fence = 8}));
  // The next waiter is woken to try, not granted.
  DirectGrant none;
  EXPECT_EQ(table.Park(&next, milliseconds(0), {}, &none), WakeCause::kLocal);
  EXPECT_EQ(none.fence, 0);
  table.Unregister("a", &next);
}

TEST(WaitTable, LocalWaitersAreTheFairOnesLongestWaitingFirstAndCapped) {
  WaitTable table;
  WaitTable::Slot barging, a, b, c;
  a.waiter_id = "wa";
  a.hold_id = "ha";
  a.lease_ms = 1000;
  b.waiter_id = "wb";
  b.hold_id = "hb";
  b.lease_ms = 2000;
  c.waiter_id = "wc";
  c.hold_id = "hc";
  table.Register("x", &barging);  // no waiter id: not offered
  table.Register("x", &a);
  table.Register("x", &b);
  table.Register("x", &c);
  const auto all = table.LocalWaiters("x", 16);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].waiter_id, "wa");
  EXPECT_EQ(all[0].hold_id, "ha");
  EXPECT_EQ(all[0].lease_ms, 1000);
  EXPECT_EQ(all[1].waiter_id, "wb");
  EXPECT_EQ(all[2].waiter_id, "wc");
  EXPECT_EQ(table.LocalWaiters("x", 2).size(), 2u);
  EXPECT_TRUE(table.LocalWaiters("y", 16).empty());
  for (WaitTable::Slot* s : {&barging, &a, &b, &c}) table.Unregister("x", s);
}

TEST(WaitTable, StopTokenCancelsPark) {
  WaitTable table;
  WaitTable::Slot slot;
  table.Register("a", &slot);
  std::stop_source stop;
  std::thread canceller([&] {
    std::this_thread::sleep_for(milliseconds(20));
    stop.request_stop();
  });
  EXPECT_EQ(table.Park(&slot, seconds(60), stop.get_token()),
            WakeCause::kCancelled);
  canceller.join();
  table.Unregister("a", &slot);
}

TEST(WaitTable, CrossThreadWakeReachesParkedWaiter) {
  WaitTable table;
  WaitTable::Slot slot;
  table.Register("a", &slot);
  std::thread waker([&] {
    while (!table.WakeOne("a", WakeCause::kLocal)) std::this_thread::yield();
  });
  EXPECT_EQ(table.Park(&slot, seconds(60), {}), WakeCause::kLocal);
  waker.join();
  table.Unregister("a", &slot);
}

// Spinning (issue 16): a hand-off moves the other fair waiters one place up;
// the one that reaches the head is told (kPromoted), which is not a wake to
// try again. The grantee is woken with the cause given. Each hand-off counts
// once: by its grant's fence, against the grant a place was read behind.
TEST(WaitTable, AHandOffMovesTheOthersUpAndPromotesTheNewHead) {
  WaitTable table;
  WaitTable::Slot grantee, second, third, unknown;
  grantee.waiter_id = "w:1";
  second.waiter_id = "w:2";
  third.waiter_id = "w:3";
  unknown.waiter_id = "w:4";
  for (WaitTable::Slot* s : {&grantee, &second, &third, &unknown})
    table.Register("a", s);
  table.SetPlace(&grantee, 1, 10);  // behind the grant with fence 10
  table.SetPlace(&second, 2, 10);
  table.SetPlace(&third, 3, 10);  // `unknown` keeps place 0: never promoted

  EXPECT_TRUE(table.HandedOff("a", "w:1", WakeCause::kEvent, {}, 11));
  EXPECT_EQ(table.Park(&grantee, milliseconds(0), {}), WakeCause::kEvent);
  EXPECT_EQ(table.Park(&second, milliseconds(0), {}), WakeCause::kPromoted);
  EXPECT_EQ(table.Park(&second, milliseconds(0), {}), WakeCause::kBound)
      << "a promotion is consumed once";
  EXPECT_EQ(table.Park(&third, milliseconds(0), {}), WakeCause::kBound);
  EXPECT_EQ(table.Park(&unknown, milliseconds(0), {}), WakeCause::kBound);

  // The same hand-off again (a duplicated or replayed event), or an older
  // one arriving late, moves nobody.
  table.HandedOff("a", "w:1", WakeCause::kEvent, {}, 11);
  table.HandedOff("a", "w:0", WakeCause::kEvent, {}, 9);
  EXPECT_EQ(table.Park(&third, milliseconds(0), {}), WakeCause::kBound);
  // The next hand-off (to `second`, elsewhere unseen) promotes `third`.
  EXPECT_FALSE(table.HandedOff("a", "w:elsewhere", WakeCause::kEvent, {}, 12));
  EXPECT_EQ(table.Park(&third, milliseconds(0), {}), WakeCause::kPromoted);
  EXPECT_EQ(table.Park(&unknown, milliseconds(0), {}), WakeCause::kBound);
  // A head stays the head however many hand-offs it sees: promoted once.
  table.HandedOff("a", "w:elsewhere", WakeCause::kEvent, {}, 13);
  EXPECT_EQ(table.Park(&third, milliseconds(0), {}), WakeCause::kBound);
  for (WaitTable::Slot* s : {&grantee, &second, &third, &unknown})
    table.Unregister("a", s);
}

TEST(WaitTable, AHandOffAPlaceAlreadyReflectsMovesNobody) {
  // The refused attempt that read the place ran after the grant with fence
  // 20 was made: that hand-off's event, arriving later, is already counted.
  WaitTable table;
  WaitTable::Slot slot;
  slot.waiter_id = "w:2";
  table.Register("a", &slot);
  table.SetPlace(&slot, 2, 20);
  table.HandedOff("a", "w:1", WakeCause::kEvent, {}, 20);
  EXPECT_EQ(table.Park(&slot, milliseconds(0), {}), WakeCause::kBound);
  table.HandedOff("a", "w:1", WakeCause::kEvent, {}, 21);
  EXPECT_EQ(table.Park(&slot, milliseconds(0), {}), WakeCause::kPromoted);
  table.Unregister("a", &slot);
}

TEST(WaitTable, NoPromotionBehindAGrantOfThisProcess) {
  // The head behind a holder of its own process is granted directly by that
  // holder's release: it moves up but is not told to spin.
  WaitTable table;
  WaitTable::Slot slot;
  slot.waiter_id = "w:2";
  table.Register("a", &slot);
  table.SetPlace(&slot, 2, 1);
  table.HandedOff("a", "w:1", WakeCause::kEvent, {}, 2, /*promote=*/false);
  EXPECT_EQ(table.Park(&slot, milliseconds(0), {}), WakeCause::kBound);
  table.Unregister("a", &slot);
}

TEST(WaitTable, AWakeTakesPrecedenceOverAPromotion) {
  WaitTable table;
  WaitTable::Slot slot;
  slot.waiter_id = "w:2";
  table.Register("a", &slot);
  table.SetPlace(&slot, 2, 0);
  table.HandedOff("a", "w:1", WakeCause::kEvent);  // promoted
  table.HandedOff("a", "w:2", WakeCause::kEvent);  // and granted
  EXPECT_EQ(table.Park(&slot, milliseconds(0), {}), WakeCause::kEvent);
  EXPECT_EQ(table.Park(&slot, milliseconds(0), {}), WakeCause::kBound);
  table.Unregister("a", &slot);
}

TEST(WaitTable, APromotionWakesAParkedHead) {
  WaitTable table;
  WaitTable::Slot slot;
  slot.waiter_id = "w:2";
  table.Register("a", &slot);
  table.SetPlace(&slot, 2, 0);
  std::thread releaser([&] {
    std::this_thread::sleep_for(milliseconds(20));
    table.HandedOff("a", "w:1", WakeCause::kEvent);
  });
  EXPECT_EQ(table.Park(&slot, seconds(30), {}), WakeCause::kPromoted);
  releaser.join();
  table.Unregister("a", &slot);
}

}  // namespace
}  // namespace lockfleet::internal
