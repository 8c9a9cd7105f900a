// CountDownLatch against a real redis-server: setting, counting down (each
// id once), awaiting across "processes" (clients on the loopback bus), the
// opened latch's expiry, and what must never happen: an awaiter that
// returns kOpened before every count-down was made — whatever events say.
#include "lockfleet/lockcore/latch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "latch_board.h"
#include "lock_fixture.h"
#include "lockfleet/lockcore/error.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class LatchTest : public ConnectedLockTest {
 protected:
  // Whether `f` is still running after `after`.
  template <typename T>
  static bool StillWaiting(std::future<T>& f, milliseconds after) {
    return f.wait_for(after) == std::future_status::timeout;
  }

  std::future<AwaitStatus> Await(CountDownLatch latch,
                                 milliseconds timeout = milliseconds(60000)) {
    return std::async(std::launch::async, [latch, timeout]() mutable {
      return latch.AwaitFor(timeout);
    });
  }
};

TEST_F(LatchTest, CountsDownToOpenAndStaysOpen) {
  auto client = Connected();
  CountDownLatch latch = client->Latch("merge");
  EXPECT_EQ(latch.name(), "merge");
  EXPECT_EQ(latch.Count(), -1);
  ASSERT_TRUE(latch.TrySetCount(3));
  EXPECT_FALSE(latch.TrySetCount(5)) << "set already";
  EXPECT_EQ(latch.Count(), 3);
  EXPECT_EQ(latch.AwaitFor(milliseconds(0)), AwaitStatus::kTimedOut);

  CountDownResult r = latch.CountDown("a");
  EXPECT_EQ(r.status, CountDownStatus::kCounted);
  EXPECT_EQ(r.remaining, 2);
  EXPECT_EQ(latch.CountDown("b").remaining, 1);
  r = latch.CountDown("c");
  EXPECT_EQ(r.status, CountDownStatus::kOpened);
  EXPECT_EQ(r.remaining, 0);
  EXPECT_EQ(latch.Count(), 0);
  EXPECT_EQ(latch.AwaitFor(milliseconds(0)), AwaitStatus::kOpened);
  EXPECT_EQ(latch.CountDown("d").status, CountDownStatus::kAlreadyOpen);
  EXPECT_FALSE(latch.TrySetCount(1)) << "open, not expired: still set";
  // The open latch expires after its open_ttl (10 min by default).
  const int64_t ttl =
      redis_->Execute({"PTTL", "lockfleet:{merge}:countdown"}).integer;
  EXPECT_GT(ttl, 590000);
  EXPECT_LE(ttl, 600000);
}

TEST_F(LatchTest, WhileCountingTheLatchDoesNotExpire) {
  auto client = Connected();
  CountDownLatch latch = client->Latch("counting");
  ASSERT_TRUE(latch.TrySetCount(2, {.open_ttl = kMinLatchOpenTtl}));
  latch.CountDown("first");
  EXPECT_EQ(redis_->Execute({"PTTL", "lockfleet:{counting}:countdown"}).integer,
            -1);
}

TEST_F(LatchTest, AnIdCountsOnce) {
  auto client = Connected();
  CountDownLatch latch = client->Latch("shards");
  ASSERT_TRUE(latch.TrySetCount(2));
  EXPECT_EQ(latch.CountDown("shard-1").remaining, 1);
  CountDownResult again = latch.CountDown("shard-1");
  EXPECT_EQ(again.status, CountDownStatus::kCounted);
  EXPECT_EQ(again.remaining, 1) << "a repeated report counted twice";
  EXPECT_EQ(latch.CountDown("shard-2").status, CountDownStatus::kOpened);
  // The id that opened it, again: it opened it (a retry learns so); an id
  // counted before it opened was counted; any other finds it open.
  EXPECT_EQ(latch.CountDown("shard-2").status, CountDownStatus::kOpened);
  const CountDownResult counted = latch.CountDown("shard-1");
  EXPECT_EQ(counted.status, CountDownStatus::kCounted);
  EXPECT_EQ(counted.remaining, 0);
  EXPECT_EQ(latch.CountDown("shard-9").status, CountDownStatus::kAlreadyOpen);
}

TEST_F(LatchTest, AMissingLatchIsNotOpen) {
  auto client = Connected();
  CountDownLatch latch = client->Latch("later");
  EXPECT_EQ(latch.CountDown("early").status, CountDownStatus::kNoLatch);
  EXPECT_EQ(latch.Count(), -1) << "a count-down created it";
  EXPECT_EQ(latch.AwaitFor(milliseconds(0)), AwaitStatus::kTimedOut);
  // An awaiter that came before the coordinator waits for it.
  auto awaited = Await(latch);
  EXPECT_TRUE(StillWaiting(awaited, milliseconds(100)));
  ASSERT_TRUE(latch.TrySetCount(1));
  EXPECT_TRUE(StillWaiting(awaited, milliseconds(50)));
  EXPECT_EQ(latch.CountDown("only").status, CountDownStatus::kOpened);
  EXPECT_EQ(awaited.get(), AwaitStatus::kOpened);
}

TEST_F(LatchTest, AnOpenedLatchExpiresAndMayBeSetAgain) {
  auto client = Connected();
  CountDownLatch latch = client->Latch("daily");
  ASSERT_TRUE(latch.TrySetCount(1, {.open_ttl = kMinLatchOpenTtl}));
  ASSERT_EQ(latch.CountDown("2026-11-28/only").status,
            CountDownStatus::kOpened);
  const int64_t ttl =
      redis_->Execute({"PTTL", "lockfleet:{daily}:countdown"}).integer;
  EXPECT_GT(ttl, 50000);
  EXPECT_LE(ttl, 60000);
  // A minute later (made short here): gone.
  redis_->Execute({"PEXPIRE", "lockfleet:{daily}:countdown", "1"});
  EXPECT_TRUE(WaitUntil([&] { return latch.Count() == -1; }));
  ASSERT_TRUE(latch.TrySetCount(2)) << "a new round";
  EXPECT_EQ(latch.Count(), 2);
  EXPECT_EQ(latch.CountDown("2026-11-28/only").remaining, 1)
      << "ids of the last round gone";
}

TEST_F(LatchTest, TheOpeningWakesEveryAwaiterOfEveryProcessAtOnce) {
  // park_cap is 600 s here (ConnectedLockTest): only the opening itself —
  // directly in its own process, by the event in the others — can wake them.
  auto a = Connected();
  auto b = Connected();
  auto c = Connected();
  CountDownLatch on_b = b->Latch("go");
  ASSERT_TRUE(a->Latch("go").TrySetCount(2));
  std::vector<std::future<AwaitStatus>> awaited;
  for (LockClient* client : {a.get(), a.get(), b.get(), b.get(), c.get()})
    awaited.push_back(Await(client->Latch("go")));
  ASSERT_EQ(on_b.CountDown("first").status, CountDownStatus::kCounted);
  // Every awaiter has found it counting and parks (for up to 600 s).
  ASSERT_TRUE(WaitUntil([&] {
    return a->stats().latch_parks >= 2 && b->stats().latch_parks >= 2 &&
           c->stats().latch_parks >= 1;
  }));
  EXPECT_EQ(a->stats().latch_waiting, 2);
  for (auto& f : awaited) EXPECT_TRUE(StillWaiting(f, milliseconds(20)));
  const uint64_t published = b->stats().events_published;
  ASSERT_EQ(on_b.CountDown("second").status, CountDownStatus::kOpened);
  for (auto& f : awaited) {
    ASSERT_EQ(f.wait_for(seconds(30)), std::future_status::ready)
        << "an awaiter slept through the opening";
    EXPECT_EQ(f.get(), AwaitStatus::kOpened);
  }
  EXPECT_EQ(b->stats().events_published - published, 1u) << "one event";
  EXPECT_EQ(b->stats().latches_opened, 1u);
  EXPECT_EQ(a->stats().latch_waiting, 0);
}

TEST_F(LatchTest, ALostEventCostsOneBoundedPark) {
  // Two clients that share no event transport: the awaiter learns of the
  // opening from Redis when its 200 ms park ends.
  auto awaiter = NewClient({.park_cap = milliseconds(200)});
  auto opener = NewClient();
  ASSERT_TRUE(opener->Latch("quiet").TrySetCount(1));
  auto awaited = Await(awaiter->Latch("quiet"));
  EXPECT_TRUE(StillWaiting(awaited, milliseconds(50)));
  ASSERT_EQ(opener->Latch("quiet").CountDown("only").status,
            CountDownStatus::kOpened);
  EXPECT_EQ(awaited.get(), AwaitStatus::kOpened);
}

TEST_F(LatchTest, AForgedOpenedEventNeverOpensIt) {
  auto client = Connected();
  CountDownLatch latch = client->Latch("guarded");
  ASSERT_TRUE(latch.TrySetCount(2));
  auto awaited = Await(latch);
  ASSERT_TRUE(StillWaiting(awaited, milliseconds(50)));
  UnlockEvent forged;
  forged.lock = "guarded";
  forged.owner = "#forged";
  forged.client_id = "someone-else";
  forged.cause = UnlockCause::kOpened;
  for (int i = 0; i < 20; ++i) client->DeliverUnlockEvent(forged);
  EXPECT_TRUE(StillWaiting(awaited, milliseconds(200)))
      << "a forged event opened the latch";
  EXPECT_EQ(latch.Count(), 2);
  // A forged kOpened event for a lock name wakes no lock waiter either.
  AcquireResult held = client->TryAcquire("guarded", {.owner = "holder"});
  ASSERT_TRUE(held);
  latch.CountDown("first");
  EXPECT_EQ(latch.CountDown("second").status, CountDownStatus::kOpened);
  EXPECT_EQ(awaited.get(), AwaitStatus::kOpened);
}

TEST_F(LatchTest, NeverOpensBeforeEveryIdWasCounted) {
  // 24 ids; 23 of them reported twice each (a retried report), by 8
  // threads over 4 clients, while 8 awaiters in those clients wait: the
  // count must stay at 1 and nobody may return. Then the last id opens it.
  constexpr int kIds = 24;
  std::vector<std::unique_ptr<LockClient>> clients;
  for (int i = 0; i < 4; ++i) clients.push_back(Connected());
  ASSERT_TRUE(clients[0]->Latch("all").TrySetCount(kIds));
  std::vector<std::future<AwaitStatus>> awaited;
  for (int i = 0; i < 8; ++i)
    awaited.push_back(Await(clients[i % 4]->Latch("all")));
  std::vector<std::thread> reporters;
  for (int t = 0; t < 8; ++t) {
    reporters.emplace_back([&, t] {
      CountDownLatch latch = clients[t % 4]->Latch("all");
      // Thread t reports ids t, t + 8, t + 16 and their successors again.
      for (int id = t; id < kIds - 1; id += 8) {
        for (int which : {id, (id + 1) % (kIds - 1)})
          latch.CountDown("id-" + std::to_string(which));
      }
    });
  }
  for (auto& t : reporters) t.join();
  EXPECT_EQ(clients[1]->Latch("all").Count(), 1) << "an id counted twice";
  for (auto& f : awaited)
    EXPECT_TRUE(StillWaiting(f, milliseconds(10))) << "opened early";
  EXPECT_EQ(clients[2]->Latch("all").CountDown("id-23").status,
            CountDownStatus::kOpened);
  for (auto& f : awaited) EXPECT_EQ(f.get(), AwaitStatus::kOpened);
}

TEST_F(LatchTest, AnAwaitIsCancelledByItsStopToken) {
  auto client = Connected();
  CountDownLatch latch = client->Latch("never");
  ASSERT_TRUE(latch.TrySetCount(1));
  std::stop_source stop;
  auto awaited = std::async(std::launch::async, [&] {
    return latch.AwaitFor(seconds(60), stop.get_token());
  });
  ASSERT_TRUE(StillWaiting(awaited, milliseconds(50)));
  stop.request_stop();
  ASSERT_EQ(awaited.wait_for(seconds(10)), std::future_status::ready);
  EXPECT_EQ(awaited.get(), AwaitStatus::kCancelled);
}

TEST_F(LatchTest, BadInputIsRefused) {
  auto client = Connected();
  auto code = [](auto&& f) -> std::optional<ErrorCode> {
    try {
      f();
    } catch (const Error& e) {
      return e.code();
    }
    return std::nullopt;
  };
  CountDownLatch latch = client->Latch("bad");
  EXPECT_EQ(code([&] { latch.TrySetCount(0); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code([&] { latch.TrySetCount(-3); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code([&] { latch.TrySetCount(kMaxLatchCount + 1); }),
            ErrorCode::kInvalidArgument);
  for (milliseconds ttl :
       {milliseconds(0), kMinLatchOpenTtl - milliseconds(1),
        kMaxLatchOpenTtl + milliseconds(1), milliseconds::max()}) {
    EXPECT_EQ(code([&] { latch.TrySetCount(1, {.open_ttl = ttl}); }),
              ErrorCode::kInvalidArgument)
        << ttl.count();
  }
  EXPECT_EQ(code([&] {
              latch.CountDown(std::string(kMaxCountDownIdBytes + 1, 'x'));
            }),
            ErrorCode::kInvalidArgument);
  // No id: a repeat after an error could not be told from a new report.
  EXPECT_EQ(code([&] { latch.CountDown(""); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code([&] { client->Latch(""); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code([&] { client->Latch("}x"); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(latch.Count(), -1) << "nothing was written";
  // A latch name and a lock name are apart: the same name is both.
  ASSERT_TRUE(latch.TrySetCount(kMaxLatchCount));
  EXPECT_TRUE(client->TryAcquire("bad"));
  // A value that is no count is a protocol error, not a number.
  redis_->Execute({"HSET", "lockfleet:{bad}:countdown", "count", "x"});
  EXPECT_EQ(code([&] { latch.Count(); }), ErrorCode::kRedisProtocol);
}

// The board alone: wakes all, remembers only names listened on, and a wake
// between Listen and Park is not lost.
TEST(LatchBoard, WakesEveryListenerAndForgetsTheUnlistened) {
  internal::LatchBoard board;
  EXPECT_FALSE(board.WakeAll("nobody", internal::WakeCause::kEvent));
  EXPECT_EQ(board.NamesForTesting(), 0u);
  uint64_t first = board.Listen("x");
  uint64_t second = board.Listen("x");
  ASSERT_TRUE(board.WakeAll("x", internal::WakeCause::kEvent));
  // Both parks return at once: the wake came before them.
  EXPECT_EQ(board.Park("x", &first, seconds(30), {}),
            internal::WakeCause::kEvent);
  EXPECT_EQ(board.Park("x", &second, seconds(30), {}),
            internal::WakeCause::kEvent);
  // Woken once each: the next park waits for its bound.
  EXPECT_EQ(board.Park("x", &first, milliseconds(10), {}),
            internal::WakeCause::kBound);
  board.Unlisten("x");
  board.Unlisten("x");
  EXPECT_EQ(board.NamesForTesting(), 0u);
}

}  // namespace
}  // namespace lockfleet::testing
