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
  EXPECT_TRUE(table.WakeWaiter("a", "w:2", WakeCause::kEvent));
  EXPECT_FALSE(table.WakeWaiter("a", "w:3", WakeCause::kEvent));
  EXPECT_EQ(table.Park(&first, milliseconds(0), {}), WakeCause::kBound);
  EXPECT_EQ(table.Park(&second, milliseconds(0), {}), WakeCause::kEvent);
  table.Unregister("a", &first);
  table.Unregister("a", &second);
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

}  // namespace
}  // namespace lockfleet::internal
