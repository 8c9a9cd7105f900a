// Multi-lock against a real redis-server: all-or-nothing (never a strict
// subset held after the call returns), released together, one deadline,
// and two multi-locks over the same names in opposite orders never
// deadlock — with every critical section checked for overlap.
#include "lockfleet/lockcore/multi_lock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <map>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "lock_fixture.h"
#include "lockfleet/lockcore/error.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class MultiLock : public ConnectedLockTest {};

TEST_F(MultiLock, TakesEveryLockAndReleasesThemTogether) {
  auto client = Connected();
  AcquireAllResult r =
      client->AcquireAllFor({"stock:b", "stock:a", "stock:c"}, seconds(10));
  ASSERT_TRUE(r);
  ASSERT_EQ(r.lease.leases().size(), 3u);
  // Canonical order, one owner, each its own grant.
  EXPECT_EQ(r.lease.leases()[0].name(), "stock:a");
  EXPECT_EQ(r.lease.leases()[2].name(), "stock:c");
  for (const char* name : {"stock:a", "stock:b", "stock:c"}) {
    LockInfo info = client->Inspect(name);
    EXPECT_TRUE(info.locked) << name;
    EXPECT_EQ(info.owner, r.lease.leases()[0].owner());
    EXPECT_EQ(info.fence, r.lease.lease(name).fence());
  }
  EXPECT_FALSE(r.lease.lost());
  EXPECT_THROW(r.lease.lease("stock:z"), Error);
  // Each lock is an ordinary lock: a plain acquisition elsewhere is refused.
  auto other = Connected();
  EXPECT_FALSE(other->TryAcquire("stock:b"));
  EXPECT_EQ(r.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(r.lease.held());
  for (const char* name : {"stock:a", "stock:b", "stock:c"})
    EXPECT_FALSE(client->Inspect(name).locked) << name;
  // Destruction releases as well.
  {
    AcquireAllResult scoped = client->TryAcquireAll({"x", "y"});
    ASSERT_TRUE(scoped);
    EXPECT_TRUE(client->Inspect("y").locked);
  }
  EXPECT_FALSE(client->Inspect("x").locked);
  EXPECT_FALSE(client->Inspect("y").locked);
}

TEST_F(MultiLock, OneLockNotGrantedInTimeGivesBackTheOthers) {
  auto client = Connected();
  auto other = Connected();
  AcquireResult blocker = other->TryAcquire("m:2", {.owner = "blocker"});
  ASSERT_TRUE(blocker);
  AcquireAllResult r =
      client->AcquireAllFor({"m:3", "m:1", "m:2"}, milliseconds(300));
  EXPECT_EQ(r.status, AcquireStatus::kTimedOut);
  EXPECT_FALSE(r.lease.held());
  EXPECT_EQ(r.blocked_on, "m:2");
  EXPECT_EQ(r.holder, "blocker");
  // m:1 was taken first, then given back; m:3 never reached.
  EXPECT_FALSE(client->Inspect("m:1").locked) << "a strict subset is held";
  EXPECT_FALSE(client->Inspect("m:3").locked);
  EXPECT_EQ(client->Inspect("m:2").owner, "blocker");
  // TryAcquireAll: one attempt each, same outcome at once.
  AcquireAllResult once = client->TryAcquireAll({"m:1", "m:2"});
  EXPECT_FALSE(once);
  EXPECT_FALSE(client->Inspect("m:1").locked);
  // Once m:2 frees, the wait succeeds.
  auto waited = std::async(std::launch::async, [&] {
    return client->AcquireAllFor({"m:1", "m:2", "m:3"}, seconds(60));
  });
  ASSERT_TRUE(WaitUntil([&] { return !client->Inspect("m:2").queue.empty(); }));
  EXPECT_TRUE(client->Inspect("m:1").locked) << "held while waiting for m:2";
  ASSERT_EQ(blocker.lease.Release(), ReleaseStatus::kReleased);
  AcquireAllResult got = waited.get();
  ASSERT_TRUE(got);
  EXPECT_GT(got.lease.lease("m:2").fence(), 0);
}

// Release(&each) says what became of every lease, newest first: the caller
// can name the lock that was no longer held.
TEST_F(MultiLock, ReleaseReportsEachLease) {
  auto client = Connected();
  auto other = Connected();
  AcquireAllResult r = client->TryAcquireAll({"r:2", "r:3", "r:1"});
  ASSERT_TRUE(r);
  const int64_t fence2 = r.lease.lease("r:2").fence();
  EXPECT_TRUE(other->ForceUnlock("r:2").was_locked);
  std::vector<LeaseRelease> each;
  EXPECT_EQ(r.lease.Release(&each), ReleaseStatus::kNotHeld);
  ASSERT_EQ(each.size(), 3u);
  EXPECT_EQ(each[0].name, "r:3");
  EXPECT_EQ(each[0].status, ReleaseStatus::kReleased);
  EXPECT_EQ(each[1].name, "r:2");
  EXPECT_EQ(each[1].fence, fence2);
  EXPECT_EQ(each[1].status, ReleaseStatus::kNotHeld);
  EXPECT_EQ(each[2].name, "r:1");
  EXPECT_EQ(each[2].status, ReleaseStatus::kReleased);
  EXPECT_TRUE(each[2].error.empty());
  for (const char* name : {"r:1", "r:2", "r:3"})
    EXPECT_FALSE(client->Inspect(name).locked) << name;
  // Nothing left: nothing reported.
  each.clear();
  EXPECT_EQ(r.lease.Release(&each), ReleaseStatus::kNotHeld);
  EXPECT_TRUE(each.empty());
}

// A lock taken first whose (explicit) lease ran out while the call waited
// for a later one is not returned as held: the call starts over and takes
// it again (a new grant, a newer fence).
TEST_F(MultiLock, ALockLostWhileWaitingForTheNextIsTakenAgain) {
  auto client = Connected();
  auto other = Connected();
  AcquireResult blocker = other->TryAcquire("l:2", {.owner = "blocker"});
  ASSERT_TRUE(blocker);
  auto waited = std::async(std::launch::async, [&] {
    return client->AcquireAllFor({"l:1", "l:2"}, seconds(60),
                                 {.lease = milliseconds(2000)});
  });
  ASSERT_TRUE(WaitUntil([&] { return !client->Inspect("l:2").queue.empty(); }));
  const int64_t first = client->Inspect("l:1").fence;
  ASSERT_GT(first, 0);
  // l:1's 2 s lease runs out while the call waits for l:2.
  ASSERT_TRUE(WaitUntil([&] { return !client->Inspect("l:1").locked; }));
  ASSERT_EQ(blocker.lease.Release(), ReleaseStatus::kReleased);
  AcquireAllResult r = waited.get();
  ASSERT_TRUE(r);
  EXPECT_GT(r.lease.lease("l:1").fence(), first)
      << "returned the grant that had run out";
}

TEST_F(MultiLock, ACancelledWaitHoldsNothing) {
  auto client = Connected();
  auto other = Connected();
  AcquireResult blocker = other->TryAcquire("c:2");
  ASSERT_TRUE(blocker);
  std::stop_source stop;
  auto waited = std::async(std::launch::async, [&] {
    return client->AcquireAllFor({"c:1", "c:2"}, seconds(60),
                                 {.stop = stop.get_token()});
  });
  ASSERT_TRUE(WaitUntil([&] { return !client->Inspect("c:2").queue.empty(); }));
  stop.request_stop();
  AcquireAllResult r = waited.get();
  EXPECT_EQ(r.status, AcquireStatus::kCancelled);
  EXPECT_EQ(r.blocked_on, "c:2");
  EXPECT_FALSE(client->Inspect("c:1").locked);
}

TEST_F(MultiLock, OppositeOrdersNeverDeadlockNorOverlap) {
  // Four "processes", two threads each; half ask for {x, y, z}, half for
  // {z, y, x}; every critical section marks each of its locks busy and
  // checks nobody else had it.
  constexpr int kRounds = 40;
  std::vector<std::unique_ptr<LockClient>> clients;
  for (int i = 0; i < 4; ++i) clients.push_back(Connected());
  std::map<std::string, std::atomic<int>> inside;
  for (const char* n : {"x", "y", "z"}) inside[n] = 0;
  std::atomic<int> overlaps{0};
  std::atomic<int> done{0};
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      const std::vector<std::string> names =
          t % 2 ? std::vector<std::string>{"x", "y", "z"}
                : std::vector<std::string>{"z", "y", "x"};
      for (int i = 0; i < kRounds; ++i) {
        AcquireAllResult r = clients[t % 4]->AcquireAllFor(names, seconds(60));
        if (!r) {
          failed.fetch_add(1);
          continue;
        }
        for (const auto& n : names)
          if (inside[n].fetch_add(1) != 0) overlaps.fetch_add(1);
        std::this_thread::yield();
        for (const auto& n : names) inside[n].fetch_sub(1);
        r.lease.Release();
        done.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(failed.load(), 0) << "a multi-lock waited 60 s: a deadlock?";
  EXPECT_EQ(done.load(), 8 * kRounds);
}

TEST_F(MultiLock, BadListsAreRefused) {
  auto client = Connected();
  auto code =
      [&](const std::vector<std::string>& names) -> std::optional<ErrorCode> {
    try {
      client->TryAcquireAll(names);
    } catch (const Error& e) {
      return e.code();
    }
    return std::nullopt;
  };
  EXPECT_EQ(code({}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code({"a", "b", "a"}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code({"a", ""}), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code({"a", "}b"}), ErrorCode::kInvalidArgument);
  for (auto lease : {milliseconds(0), milliseconds(-5)}) {
    try {
      client->TryAcquireAll({"a", "b"}, {.lease = lease});
      ADD_FAILURE() << "a lease of " << lease.count() << " ms was taken";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    }
  }
  std::vector<std::string> many;
  for (size_t i = 0; i <= kMaxMultiLockNames; ++i)
    many.push_back("n" + std::to_string(i));
  EXPECT_EQ(code(many), ErrorCode::kInvalidArgument);
  // Refused before anything was taken.
  EXPECT_FALSE(client->Inspect("a").locked);
  many.pop_back();
  EXPECT_EQ(code(many), std::nullopt) << "the limit itself is allowed";
}

// Names that can share a script (one server; one Cluster slot on a
// cluster) are taken by one script: a free multi-lock is one round trip,
// one acquire script, a grant per lock.
TEST_F(MultiLock, AFreeMultiLockIsOneScriptAndOneRoundTrip) {
  auto redis = NewRedis();
  LockClient client(redis);
  // The first call loads the script (NOSCRIPT, then EVAL): not counted.
  ASSERT_TRUE(client.TryAcquireAll({"warm:1", "warm:2"}));
  const uint64_t trips = redis->round_trips();
  const LockStats before = client.stats();
  AcquireAllResult r =
      client.AcquireAllFor({"one:d", "one:b", "one:a", "one:c"}, seconds(10));
  ASSERT_TRUE(r);
  EXPECT_EQ(redis->round_trips() - trips, 1u);
  const LockStats after = client.stats();
  EXPECT_EQ(after.attempts - before.attempts, 4u);  // one per lock
  EXPECT_EQ(after.acquisitions - before.acquisitions, 4u);
  ASSERT_EQ(r.lease.leases().size(), 4u);
  for (const Lease& lease : r.lease.leases()) {
    LockInfo info = client.Inspect(lease.name());
    EXPECT_TRUE(info.locked) << lease.name();
    EXPECT_EQ(info.owner, lease.owner());
    EXPECT_EQ(info.hold_count, 1);
    EXPECT_EQ(info.fence, lease.fence());
    EXPECT_GT(info.ttl, milliseconds(0));
  }
  EXPECT_EQ(r.lease.Release(), ReleaseStatus::kReleased);
  for (const char* name : {"one:a", "one:b", "one:c", "one:d"})
    EXPECT_FALSE(client.Inspect(name).locked) << name;
}

// A try refused by one lock touches none of the others: no grant, no fence
// issued, no release (the one-by-one way took the locks before the refused
// one and gave them back).
TEST_F(MultiLock, ARefusedTryNeverHoldsASubsetEvenForAMoment) {
  auto client = Connected();
  auto other = Connected();
  AcquireResult blocker = other->TryAcquire("t:3", {.owner = "blocker"});
  ASSERT_TRUE(blocker);
  // Only t:3's lock hash and its slot's fence counter exist.
  ASSERT_EQ(redis_->Execute({"DBSIZE"}).integer, 2);
  AcquireAllResult r = client->TryAcquireAll({"t:4", "t:1", "t:3", "t:2"});
  EXPECT_EQ(r.status, AcquireStatus::kTimedOut);
  EXPECT_EQ(r.blocked_on, "t:3");
  EXPECT_EQ(r.holder, "blocker");
  EXPECT_GT(r.holder_ttl, milliseconds(0));
  EXPECT_EQ(redis_->Execute({"DBSIZE"}).integer, 2)
      << "a lock of the refused try was granted, or a fence issued";
  EXPECT_EQ(client->stats().releases, 0u);
  EXPECT_EQ(client->stats().acquisitions, 0u);
}

// Fair: a free lock whose queue has a live waiter goes to that waiter, not
// to a multi-lock's try; barging, the try takes it.
TEST_F(MultiLock, AFairTryDoesNotTakeAFreeLockPastItsQueue) {
  auto client = Connected();
  // A live waiter queued on the free lock q:2 (as a hand-off whose claim
  // window ran out leaves the rest of the queue).
  const long long now_ms =
      std::stoll(redis_->Execute({"TIME"}).elements[0].str) * 1000;
  redis_->Execute({"RPUSH", "lockfleet:{q:2}:queue", "w:someone"});
  redis_->Execute({"HSET", "lockfleet:{q:2}:waiters", "w:someone",
                   std::to_string(now_ms + 60000) + "|someone"});
  AcquireAllResult r = client->TryAcquireAll({"q:1", "q:2"});
  EXPECT_FALSE(r);
  EXPECT_EQ(r.blocked_on, "q:2");
  EXPECT_EQ(r.holder, "");
  EXPECT_FALSE(client->Inspect("q:1").locked);
  EXPECT_FALSE(client->Inspect("q:2").locked);
  EXPECT_EQ(client->Inspect("q:2").queue.size(), 1u) << "the try queued";
  // A waiter whose presence lapsed is dropped, as a single lock's try does.
  redis_->Execute({"HSET", "lockfleet:{q:2}:waiters", "w:someone",
                   std::to_string(now_ms - 1000) + "|someone"});
  AcquireAllResult after = client->TryAcquireAll({"q:1", "q:2"});
  EXPECT_TRUE(after);
  EXPECT_TRUE(client->Inspect("q:2").queue.empty());
  EXPECT_EQ(after.lease.Release(), ReleaseStatus::kReleased);
  // Barging, the try takes a free lock whatever its queue.
  redis_->Execute({"RPUSH", "lockfleet:{q:2}:queue", "w:someone"});
  redis_->Execute({"HSET", "lockfleet:{q:2}:waiters", "w:someone",
                   std::to_string(now_ms + 60000) + "|someone"});
  EXPECT_FALSE(client->TryAcquireAll({"q:1", "q:2"}));
  EXPECT_TRUE(client->TryAcquireAll({"q:1", "q:2"}, {.fair = false}));
}

// A lock the thread holds already is re-entered by the multi-lock's script
// (same grant, one more hold), and stays held when the multi-lock ends.
TEST_F(MultiLock, ALockHeldByTheThreadIsReentered) {
  auto client = Connected();
  AcquireResult held = client->TryAcquire("e:1");
  ASSERT_TRUE(held);
  AcquireAllResult r = client->TryAcquireAll({"e:2", "e:1"});
  ASSERT_TRUE(r);
  EXPECT_EQ(r.lease.lease("e:1").fence(), held.lease.fence());
  EXPECT_EQ(client->Inspect("e:1").hold_count, 2);
  // Held under another owner token: refused, nothing taken.
  AcquireAllResult stranger =
      client->TryAcquireAll({"e:1", "e:3"}, {.owner = "stranger"});
  EXPECT_FALSE(stranger);
  EXPECT_FALSE(client->Inspect("e:3").locked);
  EXPECT_EQ(r.lease.Release(), ReleaseStatus::kStillHeld);
  LockInfo info = client->Inspect("e:1");
  EXPECT_TRUE(info.locked) << "the thread's own hold went with the multi-lock";
  EXPECT_EQ(info.hold_count, 1);
  EXPECT_FALSE(client->Inspect("e:2").locked);
}

// A lock handed off to a waiter that shares the caller's owner token (an
// explicit owner two calls use) is not the caller's until that waiter
// claims it: the script refuses it, as a single try does. Re-entering the
// pending grant would let the waiter's claim and the caller both hold it.
TEST_F(MultiLock, AHandOffPendingUnderTheCallersTokenIsRefused) {
  auto client = Connected();
  redis_->Execute({"HSET", "lockfleet:{p:2}:lock", "owner", "shared", "count",
                   "0", "fence", "7", "pending", "w:other-call"});
  redis_->Execute({"PEXPIRE", "lockfleet:{p:2}:lock", "60000"});
  AcquireAllResult r =
      client->TryAcquireAll({"p:1", "p:2"}, {.owner = "shared"});
  EXPECT_FALSE(r);
  EXPECT_EQ(r.blocked_on, "p:2");
  EXPECT_EQ(r.holder, "shared");
  LockInfo info = client->Inspect("p:2");
  EXPECT_EQ(info.hold_count, 0) << "the pending grant was re-entered";
  EXPECT_EQ(info.pending_waiter, "w:other-call");
  EXPECT_FALSE(client->Inspect("p:1").locked);
}

// A grant under the thread's own token that this client does not hold (a
// rollback revived it, or a call gave it up) is replaced by a new grant
// with a new token, as a single acquisition replaces it ("fresh"), not
// re-entered with its old token and its stray hold.
TEST_F(MultiLock, ARevivedGrantUnderTheThreadsTokenIsReplaced) {
  auto client = Connected();
  const std::string owner = client->DefaultOwner();
  redis_->Execute({"HSET", "lockfleet:{v:1}:lock", "owner", owner, "count", "1",
                   "fence", "5", "h:stray", "1"});
  redis_->Execute({"PEXPIRE", "lockfleet:{v:1}:lock", "60000"});
  AcquireAllResult r = client->TryAcquireAll({"v:2", "v:1"});
  ASSERT_TRUE(r);
  EXPECT_GT(r.lease.lease("v:1").fence(), 5);
  LockInfo info = client->Inspect("v:1");
  EXPECT_EQ(info.hold_count, 1);
  EXPECT_EQ(info.fence, r.lease.lease("v:1").fence());
  EXPECT_EQ(r.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(client->Inspect("v:1").locked) << "the stray hold kept it";
}

// The same when the call waits: the one-script try is refused (another
// client holds v:2), and the lock-by-lock waits run under the thread's own
// token as a single wait does, "fresh" too.
TEST_F(MultiLock, AWaitingCallReplacesARevivedGrantUnderTheThreadsToken) {
  auto client = Connected();
  auto other = Connected();
  AcquireResult held = other->TryAcquire("v:2");
  ASSERT_TRUE(held);
  redis_->Execute({"HSET", "lockfleet:{v:1}:lock", "owner",
                   client->DefaultOwner(), "count", "1", "fence", "5",
                   "h:stray", "1"});
  redis_->Execute({"PEXPIRE", "lockfleet:{v:1}:lock", "60000"});
  std::jthread releaser([&] {
    // Until v:1 is taken, while the call waits for v:2.
    WaitUntil([&] { return client->Inspect("v:1").fence > 5; }, seconds(20));
    held.lease.Release();
  });
  AcquireAllResult r = client->AcquireAllFor({"v:2", "v:1"}, seconds(30));
  releaser.join();
  // Both under the thread's own token, as one owner.
  EXPECT_EQ(client->Inspect("v:1").owner, client->DefaultOwner());
  EXPECT_EQ(client->Inspect("v:2").owner, client->DefaultOwner());
  ASSERT_TRUE(r) << r.blocked_on;
  EXPECT_GT(r.lease.lease("v:1").fence(), 5) << "the revived grant re-entered";
  EXPECT_EQ(client->Inspect("v:1").hold_count, 1);
  EXPECT_EQ(r.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(client->Inspect("v:1").locked) << "the stray hold kept it";
}

}  // namespace
}  // namespace lockfleet::testing
