// The spin advisor in isolation (issue 16, item 1): when the head of a queue
// spins, how the plan adapts, and when spinning costs nothing.
#include "spin_advisor.h"

#include <gtest/gtest.h>

namespace lockfleet::internal {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr Clock::TimePoint kT{seconds(1000)};
constexpr Clock::TimePoint kNever = Clock::TimePoint::max();
constexpr SpinAdvisor::Anchor kClaimed = SpinAdvisor::Anchor::kClaimed;

void Holds(SpinAdvisor& advisor, const std::string& name, int n,
           Clock::Duration hold) {
  for (int i = 0; i < n; ++i) advisor.OnHold(name, hold);
}

TEST(SpinAdvisor, NeverSpinsWithoutAKnownHold) {
  SpinAdvisor advisor(milliseconds(5));
  EXPECT_FALSE(advisor.PlanFor("a", kT, kClaimed, kT).spin);  // never held here
  Holds(advisor, "b", 5, milliseconds(1));
  EXPECT_FALSE(advisor.PlanFor("a", kT, kClaimed, kT).spin)
      << "only b's hold is known";
  EXPECT_TRUE(advisor.PlanFor("b", kT, kClaimed, kT).spin);
}

TEST(SpinAdvisor, PlansChecksAroundTheExpectedRelease) {
  SpinAdvisor advisor(milliseconds(5));
  Holds(advisor, "a", 10, milliseconds(2));
  EXPECT_EQ(advisor.HoldForTesting("a"), milliseconds(2));
  const SpinAdvisor::Plan plan =
      advisor.PlanFor("a", kT, kClaimed, kT + microseconds(100));
  ASSERT_TRUE(plan.spin);
  EXPECT_EQ(plan.first_check, kT + milliseconds(2));  // no lag learnt yet
  EXPECT_EQ(plan.checks, SpinAdvisor::kMaxChecks);
  EXPECT_EQ(plan.interval, microseconds(125));
  // Planned late (the grant is old): the first check is due at once.
  const SpinAdvisor::Plan late =
      advisor.PlanFor("a", kT, kClaimed, kT + milliseconds(3));
  ASSERT_TRUE(late.spin);
  EXPECT_EQ(late.first_check, kT + milliseconds(3));
}

TEST(SpinAdvisor, ALockHeldLongerThanMaxHoldIsNeverSpunOn) {
  // A lock held 200 ms at a time: a waiter parks for its event and sends no
  // check at all, however the grant's age falls.
  SpinAdvisor advisor(milliseconds(5));
  Holds(advisor, "a", 10, milliseconds(200));
  EXPECT_EQ(advisor.HoldForTesting("a"), Clock::Duration::zero())
      << "a long hold of a lock not remembered is not even recorded";
  for (int i = 0; i < 300; ++i)
    EXPECT_FALSE(advisor.PlanFor("a", kT, kClaimed, kT + milliseconds(i)).spin);
}

TEST(SpinAdvisor, ZeroMaxHoldTurnsSpinningOff) {
  SpinAdvisor advisor(Clock::Duration::zero());
  Holds(advisor, "a", 10, microseconds(500));
  EXPECT_FALSE(advisor.PlanFor("a", kT, kClaimed, kT).spin);
}

TEST(SpinAdvisor, AGrantFarPastItsExpectedReleaseIsNotSpunOn) {
  SpinAdvisor advisor(milliseconds(5));
  Holds(advisor, "a", 10, milliseconds(2));
  EXPECT_TRUE(advisor.PlanFor("a", kT, kClaimed, kT + milliseconds(4)).spin);
  EXPECT_FALSE(advisor.PlanFor("a", kT, kClaimed, kT + milliseconds(5)).spin);
}

TEST(SpinAdvisor, FailedEpisodesBackOffExponentiallyAndAWinResets) {
  SpinAdvisor advisor(milliseconds(5));
  Holds(advisor, "a", 10, milliseconds(2));
  SpinAdvisor::Plan plan;
  auto planned = [&] {
    plan = advisor.PlanFor("a", kT, kClaimed, kT);
    return plan.spin;
  };
  auto fail = [&] {
    advisor.OnOutcome("a", plan, SpinAdvisor::kMaxChecks, plan.first_check, 0,
                      kNever);
  };
  ASSERT_TRUE(planned());
  fail();
  EXPECT_FALSE(planned());  // skips 1
  ASSERT_TRUE(planned());
  fail();
  EXPECT_FALSE(planned());  // skips 3
  EXPECT_FALSE(planned());
  EXPECT_FALSE(planned());
  ASSERT_TRUE(planned());
  advisor.OnOutcome("a", plan, 2, plan.first_check + plan.interval, 2, kNever);
  EXPECT_TRUE(planned()) << "a win resets the back-off";
  // However many failures, at most 63 episodes are skipped in a row.
  for (int i = 0; i < 20; ++i) fail();
  int skipped = 0;
  while (!planned()) ++skipped;
  EXPECT_EQ(skipped, 63);
}

TEST(SpinAdvisor, AWakeBeforeTheFirstCheckIsNoFailureAndMovesChecksEarlier) {
  SpinAdvisor advisor(milliseconds(5));
  Holds(advisor, "a", 10, milliseconds(2));
  const SpinAdvisor::Plan plan = advisor.PlanFor("a", kT, kClaimed, kT);
  ASSERT_TRUE(plan.spin);
  // The event came 0.4 ms before the first check was due.
  advisor.OnOutcome("a", plan, 0, {}, 0, kT + microseconds(1600));
  const SpinAdvisor::Plan next = advisor.PlanFor("a", kT, kClaimed, kT);
  ASSERT_TRUE(next.spin) << "no back-off: it cost nothing";
  EXPECT_EQ(next.first_check, kT + milliseconds(2) - microseconds(100));
}

TEST(SpinAdvisor, FirstChecksConvergeOnTheRelease) {
  // Each holder releases 300 us after grant + hold: the first check moves
  // there, and once there, most first checks win.
  for (const Clock::Duration late :
       {microseconds(300), microseconds(-400), microseconds(1500)}) {
    SpinAdvisor advisor(milliseconds(5));
    const Clock::Duration hold = milliseconds(2);
    Holds(advisor, "a", 10, hold);
    Clock::TimePoint anchor = kT;
    int first_wins = 0, episodes = 0;
    for (int i = 0; i < 400; ++i, anchor += seconds(1)) {
      const SpinAdvisor::Plan plan =
          advisor.PlanFor("a", anchor, kClaimed, anchor);
      if (!plan.spin) continue;  // skipped after a failed episode
      const Clock::TimePoint release = anchor + hold + late;
      int won_at = 0;
      Clock::TimePoint sent;
      for (int c = 1; c <= plan.checks; ++c) {
        sent = plan.first_check + (c - 1) * plan.interval;
        if (sent >= release) {
          won_at = c;
          break;
        }
      }
      if (i >= 200) {
        ++episodes;
        if (won_at == 1) ++first_wins;
      }
      // A release after the last check: its event wakes the head 0.5 ms
      // later.
      advisor.OnOutcome("a", plan, won_at == 0 ? plan.checks : won_at, sent,
                        won_at,
                        won_at == 0 ? release + microseconds(500) : kNever);
    }
    const Clock::Duration lag = advisor.LagForTesting("a");
    EXPECT_GE(lag, late - microseconds(150)) << late.count();
    EXPECT_LE(lag, late + microseconds(150)) << late.count();
    EXPECT_GE(first_wins * 2, episodes) << "most first checks win";
  }
}

TEST(SpinAdvisor, EachKindOfAnchorLearnsItsOwnLagAndALatePlanNone) {
  SpinAdvisor advisor(milliseconds(5));
  Holds(advisor, "a", 10, milliseconds(2));
  const auto pending = SpinAdvisor::Anchor::kPending;
  SpinAdvisor::Plan plan = advisor.PlanFor("a", kT, pending, kT);
  ASSERT_TRUE(plan.spin);
  EXPECT_FALSE(plan.late);
  // The event came 1 ms after the expected release, before any check.
  advisor.OnOutcome("a", plan, 0, {}, 0, kT + milliseconds(3));
  EXPECT_EQ(advisor.LagForTesting("a", pending), microseconds(250));
  EXPECT_EQ(advisor.LagForTesting("a", kClaimed), Clock::Duration::zero());
  // Planned after its expected release: the first check goes at once, and
  // its win says only that the release came before it.
  plan = advisor.PlanFor("a", kT, kClaimed, kT + microseconds(2500));
  ASSERT_TRUE(plan.spin);
  EXPECT_TRUE(plan.late);
  EXPECT_EQ(plan.first_check, kT + microseconds(2500));
  advisor.OnOutcome("a", plan, 1, plan.first_check, 1, kNever);
  EXPECT_EQ(advisor.LagForTesting("a", kClaimed), Clock::Duration::zero());
}

TEST(SpinAdvisor, RemembersABoundedNumberOfLocks) {
  SpinAdvisor advisor(milliseconds(5));
  for (size_t i = 0; i < SpinAdvisor::kMaxLocks + 10; ++i)
    Holds(advisor, "lock-" + std::to_string(i), 1, milliseconds(1));
  EXPECT_EQ(advisor.HoldForTesting("lock-0"), Clock::Duration::zero())
      << "the oldest is forgotten";
  EXPECT_EQ(advisor.HoldForTesting("lock-" +
                                   std::to_string(SpinAdvisor::kMaxLocks + 9)),
            milliseconds(1));
}

}  // namespace
}  // namespace lockfleet::internal
