// Lock safety at the edges (issue 13): nothing outside Redis revokes a
// holder, force-unlock removes only the grant it means, a reentrant grant
// leaves no phantom queue entry, fencing tokens survive a rollback with a
// bounded key footprint, timed waits keep their deadline under Redis faults
// and ride out short outages. Each test fails on the code before the fix.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <stop_token>
#include <thread>

#include "key_slot.h"
#include "lock_fixture.h"
#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/multi_lock.h"
#include "scripts.h"
#include "support/loopback_bus.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

class Safety : public LockTest {};

std::shared_ptr<UnlockPublisher> Unowned(UnlockPublisher* bus) {
  return std::shared_ptr<UnlockPublisher>(bus, [](UnlockPublisher*) {});
}

// A forged or replayed `force` event naming a live grant — owner and fence
// are public: every fair hand-off event carries them — must not revoke it.
TEST_F(Safety, ForgedForceEventDoesNotRevokeALiveHolder) {
  auto holder = NewClient();
  for (bool explicit_lease : {false, true}) {
    SCOPED_TRACE(explicit_lease ? "explicit lease" : "watchdog lease");
    const std::string name = explicit_lease ? "forged-explicit" : "forged";
    AcquireOptions o;
    if (explicit_lease) o.lease = milliseconds(600000);
    std::atomic<int> lost_calls{0};
    o.on_lost = [&](const std::string&, int64_t) { ++lost_calls; };
    AcquireResult r = holder->TryAcquire(name, o);
    ASSERT_TRUE(r);
    const uint64_t checks = holder->stats().forced_checks;
    const uint64_t renewals = holder->stats().renewals;

    const UnlockEvent forged = ForceEventFor(name, r.lease);
    holder->DeliverUnlockEvent(forged);
    // The event makes the holder ask Redis; Redis says "still yours".
    ASSERT_TRUE(
        WaitUntil([&] { return holder->stats().forced_checks > checks; }));
    if (!explicit_lease) {
      ASSERT_TRUE(
          WaitUntil([&] { return holder->stats().renewals > renewals; }));
    } else {
      // The check of an explicit lease is not a renewal, and forced_checks
      // counts a check when it starts. A second event makes a second check,
      // which the watchdog starts only once the first one's answer has been
      // applied (a hold is never checked twice at once; the rate limit
      // delays it further): when the count shows it, the first answer is in.
      // A lease wrongly marked lost takes no second check: stop waiting
      // then too, and let the expectations below say why.
      holder->DeliverUnlockEvent(forged);
      ASSERT_TRUE(WaitUntil([&] {
        return holder->stats().forced_checks > checks + 1 || r.lease.lost();
      }));
    }
    EXPECT_FALSE(r.lease.lost());
    EXPECT_FALSE(r.lease.stop_token().stop_requested());
    EXPECT_EQ(lost_calls.load(), 0);
    LockInfo info = holder->Inspect(name);
    EXPECT_EQ(info.owner, r.lease.owner());
    EXPECT_EQ(info.fence, r.lease.fence());
    // A replay of the same event, many times: still held, and the checks
    // are rate-limited (not one round trip per event).
    for (int i = 0; i < 1000; ++i) holder->DeliverUnlockEvent(forged);
    EXPECT_LE(holder->stats().forced_checks, checks + 20);
    EXPECT_FALSE(r.lease.lost());
    EXPECT_EQ(r.lease.Release(), ReleaseStatus::kReleased);
  }
  EXPECT_EQ(holder->stats().leases_lost, 0u);
}

// The converse: a real remote force-unlock of an explicit lease (no renewal
// would notice) is noticed at once, because Redis says "not ours".
TEST_F(Safety, RealForceEventEndsTheHoldThroughRedis) {
  LoopbackBus bus;
  auto holder = NewClient({.publisher = Unowned(&bus)});
  auto admin = NewClient({.publisher = Unowned(&bus)});
  bus.Subscribe(holder.get());
  AcquireResult r = holder->TryAcquire("ops", {.lease = milliseconds(600000)});
  ASSERT_TRUE(r);
  std::atomic<bool> stopped{false};
  std::stop_callback on_stop(r.lease.stop_token(), [&] { stopped = true; });
  EXPECT_TRUE(admin->ForceUnlock("ops").was_locked);
  EXPECT_TRUE(WaitUntil([&] { return r.lease.lost(); }));
  EXPECT_TRUE(WaitUntil([&] { return stopped.load(); }));
  EXPECT_GE(holder->stats().forced_checks, 1u);
  bus.Unsubscribe(holder.get());
}

TEST_F(Safety, LeaseStopTokenIsRequestedOnLossNotOnRelease) {
  auto client = NewClient();
  AcquireResult kept = client->TryAcquire("kept");
  ASSERT_TRUE(kept);
  std::stop_token kept_token = kept.lease.stop_token();
  EXPECT_EQ(kept.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(kept_token.stop_requested());
  EXPECT_TRUE(Lease().stop_token().stop_requested());  // holds nothing

  AcquireResult r = client->TryAcquire("lost");
  ASSERT_TRUE(r);
  std::stop_token token = r.lease.stop_token();
  std::atomic<int> callbacks{0};
  std::stop_callback cb(token, [&] { ++callbacks; });
  client->ForceUnlock("lost");
  EXPECT_TRUE(r.lease.lost());
  EXPECT_TRUE(WaitUntil([&] { return token.stop_requested(); }));
  EXPECT_EQ(callbacks.load(), 1);
}

TEST_F(Safety, ForceUnlockRemovesOnlyTheExpectedGrant) {
  auto holder = NewClient();
  auto admin = NewClient();
  AcquireResult r = holder->TryAcquire("pay");
  ASSERT_TRUE(r);
  ForceUnlockResult wrong_owner =
      admin->ForceUnlock("pay", {.expect_owner = "nobody"});
  EXPECT_TRUE(wrong_owner.mismatch);
  EXPECT_FALSE(wrong_owner.was_locked);
  EXPECT_EQ(wrong_owner.previous_owner, r.lease.owner());
  EXPECT_EQ(wrong_owner.previous_fence, r.lease.fence());
  ForceUnlockResult wrong_fence = admin->ForceUnlock(
      "pay", {.expect_owner = r.lease.owner(), .expect_fence = 1});
  EXPECT_TRUE(wrong_fence.mismatch);
  EXPECT_EQ(holder->Inspect("pay").owner, r.lease.owner());
  EXPECT_FALSE(r.lease.lost());
  ForceUnlockResult right = admin->ForceUnlock(
      "pay",
      {.expect_owner = r.lease.owner(), .expect_fence = r.lease.fence()});
  EXPECT_TRUE(right.was_locked);
  EXPECT_FALSE(right.mismatch);
  EXPECT_FALSE(holder->Inspect("pay").locked);
}

// The force-unlock script run twice for one request — a first try whose
// reply was lost, then the retry — removes one grant, not the next
// holder's: the retry returns the latched first reply.
TEST_F(Safety, ForceUnlockRetryDoesNotRemoveTheNextHoldersGrant) {
  const std::string lock = LockKey("f");
  const std::string fence_key = internal::FenceCounterKey("lockfleet", lock);
  std::vector<std::string> keys{lock, fence_key, "lockfleet:{f}:queue",
                                "lockfleet:{f}:waiters",
                                "lockfleet:{f}:latch:f:req-1"};
  // A holds; waiter B is queued (as AcquireFairScript queues it).
  redis_->Eval(internal::AcquireScript(), {lock, fence_key},
               {"A", "30000", "ha"});
  redis_->Eval(internal::AcquireFairScript(),
               {keys[0], keys[1], keys[2], keys[3]},
               {"B", "30000", "hb", "wb", "30000", "1"});
  auto force = [&] {
    return redis_->Eval(internal::ForceUnlockScript(), keys,
                        {"2000", "", "0", "10000"});
  };
  Reply first = force();
  ASSERT_EQ(first.elements[0].integer, 3);  // A's grant gone, handed to B
  EXPECT_EQ(first.elements[1].str, "A");
  const long long b_fence = first.elements[5].integer;
  Reply retry = force();
  EXPECT_EQ(retry.elements[0].integer, 3);
  EXPECT_EQ(retry.elements[1].str, "A");  // the first reply, again
  EXPECT_EQ(redis_->Execute({"HGET", lock, "owner"}).str, "B");
  EXPECT_EQ(redis_->Execute({"HGET", lock, "fence"}).str,
            std::to_string(b_fence));
}

// Review finding: a first try that found the lock free (or another grant
// than expected) was not latched, so its retry removed the grant that came
// in between.
TEST_F(Safety, ForceUnlockRetryAfterAFreeOrMismatchReplyRemovesNothing) {
  const std::string lock = LockKey("g");
  const std::string fence_key = internal::FenceCounterKey("lockfleet", lock);
  for (const std::string expect_owner : {"", "X"}) {
    SCOPED_TRACE("expect_owner '" + expect_owner + "'");
    redis_->Execute({"FLUSHALL"});
    std::vector<std::string> keys{lock, fence_key, "lockfleet:{g}:queue",
                                  "lockfleet:{g}:waiters",
                                  "lockfleet:{g}:latch:f:req-2"};
    auto force = [&] {
      return redis_->Eval(internal::ForceUnlockScript(), keys,
                          {"2000", expect_owner, "0", "10000"});
    };
    if (!expect_owner.empty()) {  // Y holds: not the expected grant
      redis_->Eval(internal::AcquireScript(), {lock, fence_key},
                   {"Y", "30000", "hy"});
      ASSERT_EQ(force().elements[0].integer, -1);
      redis_->Execute({"DEL", lock});
    } else {
      ASSERT_EQ(force().elements[0].integer, 0);  // free
    }
    // The grant that comes in between: X's (the expected owner, too).
    redis_->Eval(internal::AcquireScript(), {lock, fence_key},
                 {"X", "30000", "hx"});
    Reply retry = force();
    EXPECT_LE(retry.elements[0].integer, 0);  // the first reply again
    EXPECT_EQ(redis_->Execute({"HGET", lock, "owner"}).str, "X");
  }
}

// A waiter queued under its waiter id and then granted through its owner
// token (a hold shared by owner token came first) must leave the queue, or a
// later hand-off goes to a waiter that is not waiting (a stall of claim +
// park for everyone behind it).
TEST_F(Safety, ReentrantGrantThroughASharedOwnerLeavesNoPhantomQueueEntry) {
  const std::string lock = LockKey("ph");
  const std::string fence_key = internal::FenceCounterKey("lockfleet", lock);
  std::vector<std::string> keys{lock, fence_key, "lockfleet:{ph}:queue",
                                "lockfleet:{ph}:waiters"};
  auto fair = [&](const std::string& owner, const std::string& hold,
                  const std::string& wid) {
    return redis_->Eval(internal::AcquireFairScript(), keys,
                        {owner, "30000", hold, wid, "30000", "1"});
  };
  ASSERT_EQ(fair("X", "hx", "wx").elements[0].integer, 1);  // X holds
  ASSERT_EQ(fair("O", "h1", "w1").elements[0].integer, 0);  // w1 queues
  ASSERT_EQ(fair("C", "hc", "wc").elements[0].integer, 0);  // wc queues
  // X's grant ends (expiry); the owner token O is granted by another call
  // (here: a barging acquisition sharing the token).
  redis_->Execute({"DEL", lock});
  ASSERT_EQ(redis_
                ->Eval(internal::AcquireScript(), {lock, fence_key},
                       {"O", "30000", "h2"})
                .elements[0]
                .integer,
            1);
  // w1 tries again: a reentrant grant, and it leaves the queue.
  ASSERT_EQ(fair("O", "h1", "w1").elements[0].integer, 1);
  Reply queue = redis_->Execute({"LRANGE", keys[2], "0", "-1"});
  ASSERT_EQ(queue.elements.size(), 1u);
  EXPECT_EQ(queue.elements[0].str, "wc");
  EXPECT_EQ(redis_->Execute({"HEXISTS", keys[3], "w1"}).integer, 0);
}

// A failover to a replica that missed a release brings the hold back under
// its owner's token (bench/failover.md, "revived"). A thread's own token is
// this client's alone, and the client holds nothing of the lock: its next
// acquisition must be a new grant with a new token. Re-entering the revived
// hold would keep the old token (a regression, when another grant came in
// between) and, each re-entry refreshing the lease, keep the lock held for
// ever: the release of the re-entry leaves the revived hold behind.
TEST_F(Safety, ARevivedHoldIsReplacedByANewGrantNotReentered) {
  for (const bool fair : {false, true}) {
    const std::string name = fair ? "revived-fair" : "revived";
    auto client = NewClient({.fair = fair});
    AcquireResult first = client->TryAcquire(name);
    ASSERT_TRUE(first);
    const int64_t old_fence = first.lease.fence();
    // What a replica had before the release: the hash with the hold.
    const Reply dump = redis_->Execute({"DUMP", LockKey(name)});
    ASSERT_EQ(first.lease.Release(), ReleaseStatus::kReleased);
    ASSERT_EQ(redis_->Execute({"EXISTS", LockKey(name)}).integer, 0);
    // The rollback: the release is lost.
    ASSERT_EQ(
        redis_->Execute({"RESTORE", LockKey(name), "30000", dump.str}).str,
        "OK");
    AcquireResult again = client->TryAcquire(name);
    ASSERT_TRUE(again) << fair;
    EXPECT_GT(again.lease.fence(), old_fence)
        << fair << ": re-entered the revived grant";
    EXPECT_EQ(client->Inspect(name).hold_count, 1) << fair;
    EXPECT_EQ(again.lease.Release(), ReleaseStatus::kReleased) << fair;
    EXPECT_EQ(redis_->Execute({"EXISTS", LockKey(name)}).integer, 0)
        << fair << ": still held after the last release";
  }
  // A token shared on purpose (AcquireOptions::owner) is re-entered, from
  // any client, as before.
  auto a = NewClient();
  auto b = NewClient();
  AcquireResult one = a->TryAcquire("shared", {.owner = "batch-7"});
  AcquireResult two = b->TryAcquire("shared", {.owner = "batch-7"});
  ASSERT_TRUE(one);
  ASSERT_TRUE(two);
  EXPECT_EQ(two.lease.fence(), one.lease.fence());
  EXPECT_EQ(a->Inspect("shared").hold_count, 2);
}

// A replacement ("fresh", above) keeps the key's time to live: were the
// try a late one of the same thread, arriving after a later call of that
// thread got the lock with a longer lease, that call loses its lease (its
// token changed) but no one else gets the lock before that lease ends.
TEST_F(Safety, AReplacementKeepsTheKeysTimeToLive) {
  const std::string lock = LockKey("late");
  const std::string fence_key = internal::FenceCounterKey("lockfleet", lock);
  std::vector<std::string> keys{lock, fence_key, "lockfleet:{late}:queue",
                                "lockfleet:{late}:waiters"};
  const Reply later = redis_->Eval(internal::AcquireScript(), {lock, fence_key},
                                   {"O", "60000", "h2", "1"});
  ASSERT_EQ(later.elements[0].integer, 1);
  const Reply late = redis_->Eval(internal::AcquireScript(), {lock, fence_key},
                                  {"O", "1000", "h1", "1"});
  ASSERT_EQ(late.elements[0].integer, 1);
  EXPECT_GT(late.elements[1].integer, later.elements[1].integer);
  EXPECT_GT(redis_->Execute({"PTTL", lock}).integer, 50000);
  const Reply fair = redis_->Eval(internal::AcquireFairScript(), keys,
                                  {"O", "1000", "h3", "w3", "30000", "0", "1"});
  ASSERT_EQ(fair.elements[0].integer, 1);
  EXPECT_GT(fair.elements[1].integer, late.elements[1].integer);
  EXPECT_GT(redis_->Execute({"PTTL", lock}).integer, 50000);
  // A retry of that try (same hold id) re-enters: the same token.
  const Reply retry =
      redis_->Eval(internal::AcquireFairScript(), keys,
                   {"O", "1000", "h3", "w3", "30000", "0", "1"});
  EXPECT_EQ(retry.elements[1].integer, fair.elements[1].integer);
  EXPECT_EQ(redis_->Execute({"HGET", lock, "count"}).str, "1");
}

TEST_F(Safety, FencingTokensSurviveACounterRollback) {
  auto client = NewClient();
  AcquireResult before = client->TryAcquire("ledger");
  ASSERT_TRUE(before);
  const int64_t old_token = before.lease.fence();
  before.lease.Release();
  // A restart without persistence (or a failover to a replica that never
  // saw the counter): every key is gone.
  redis_->Execute({"FLUSHALL"});
  AcquireResult after = client->TryAcquire("ledger");
  ASSERT_TRUE(after);
  EXPECT_GT(after.lease.fence(), old_token);
  // A counter restored to an older value (a lagging replica) too.
  after.lease.Release();
  const std::string counter =
      internal::FenceCounterKey("lockfleet", LockKey("ledger"));
  redis_->Execute({"SET", counter, "5"});
  AcquireResult third = client->TryAcquire("ledger");
  ASSERT_TRUE(third);
  EXPECT_GT(third.lease.fence(), after.lease.fence());
}

TEST_F(Safety, FenceCountersAreBoundedByHashSlotsNotNames) {
  auto client = NewClient();
  constexpr int kNames = 20000;
  std::set<uint16_t> slots;
  int64_t last = 0;
  for (int i = 0; i < kNames; ++i) {
    const std::string name = "order-" + std::to_string(i);
    slots.insert(internal::KeySlot(LockKey(name)));
    AcquireResult r = client->TryAcquire(name);
    ASSERT_TRUE(r);
    if (name == "order-0") last = r.lease.fence();
    r.lease.Release();
  }
  // One counter per slot in use, none per name.
  Reply counters = redis_->Execute({"KEYS", "lockfleet:fence:*"});
  EXPECT_EQ(counters.elements.size(), slots.size());
  EXPECT_LE(counters.elements.size(), size_t{internal::kSlots});
  EXPECT_EQ(redis_->Execute({"KEYS", "lockfleet:{*}:fence"}).elements.size(),
            0u);
  // Tokens still strictly increase per name.
  AcquireResult again = client->TryAcquire("order-0");
  ASSERT_TRUE(again);
  EXPECT_GT(again.lease.fence(), last);
}

TEST_F(Safety, CounterKeyIsInTheLocksSlot) {
  // Redis Cluster's reference vector, and the hash tag rule.
  EXPECT_EQ(internal::KeySlot("123456789"), 0x31C3 % 16384);
  EXPECT_EQ(internal::KeySlot("{user1000}.following"),
            internal::KeySlot("{user1000}.followers"));
  EXPECT_EQ(internal::KeySlot("foo{bar}{zap}"), internal::KeySlot("bar"));
  EXPECT_EQ(internal::KeySlot("foo{{bar}}zap"), internal::KeySlot("{bar"));
  EXPECT_NE(internal::KeySlot("foo{}{bar}"), internal::KeySlot("bar"));
  for (const std::string name :
       {"a", "sku:9", "x}y", "}lead", "", "{nested}", "order-123"}) {
    const std::string lock = "lockfleet:{" + name + "}:lock";
    EXPECT_EQ(internal::KeySlot(internal::FenceCounterKey("lockfleet", lock)),
              internal::KeySlot(lock))
        << name;
  }
}

TEST_F(Safety, AcquireForZeroIsOneRoundTripAndNeverQueues) {
  auto holder = NewClient();
  auto other = NewClient();
  AcquireResult held = holder->TryAcquire("busy");
  ASSERT_TRUE(held);
  const uint64_t before = other->redis().round_trips();
  AcquireResult r = other->AcquireFor("busy", milliseconds(0));
  EXPECT_EQ(r.status, AcquireStatus::kTimedOut);
  EXPECT_EQ(r.attempts, 1);
  EXPECT_EQ(other->redis().round_trips() - before, 1u);  // no abandon
  EXPECT_TRUE(other->Inspect("busy").queue.empty());
}

TEST_F(Safety, ExplicitLeaseStaysExplicitOnReentry) {
  auto client = NewClient({.default_lease = milliseconds(1000)});
  AcquireResult first = client->TryAcquire("x", {.lease = milliseconds(2000)});
  ASSERT_TRUE(first);
  AcquireResult again = client->TryAcquire("x");  // watchdog mode, same owner
  ASSERT_TRUE(again);
  // Not renewed: the lock expires after its explicit lease.
  EXPECT_TRUE(
      WaitUntil([&] { return !client->Inspect("x").locked; }, seconds(30)));
  EXPECT_TRUE(WaitUntil([&] { return again.lease.lost(); }, seconds(30)));
}

// A release whose first try failed on the connection and whose retry finds
// another holder must say so (it used to report kReleased).
TEST_F(Safety, RetriedReleaseThatFindsAnotherHolderIsNotOwner) {
  auto a = NewClient();
  auto b = NewClient();
  AcquireResult r = a->TryAcquire("r", {.lease = milliseconds(60000)});
  ASSERT_TRUE(r);
  redis_->Execute({"DEL", LockKey("r")});  // A's lease ran out
  AcquireResult taken = b->TryAcquire("r", {.lease = milliseconds(60000)});
  ASSERT_TRUE(taken);
  // Every connection dies: A's pooled one fails, its retry reconnects.
  redis_->Execute({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
  EXPECT_EQ(r.lease.Release(), ReleaseStatus::kNotOwner);
}

// Item 6: a timed wait keeps its deadline when Redis stalls, and a wait with
// time left rides out a short outage.
class SafetyFaults : public ::testing::Test {
 protected:
  RedisServer server_;
  std::shared_ptr<RedisClient> Redis(milliseconds command_timeout) {
    RedisOptions o;
    o.url = server_.url();
    o.command_timeout = command_timeout;
    o.connect_timeout = command_timeout;
    return std::make_shared<RedisClient>(o);
  }
};

TEST_F(SafetyFaults, TimedWaitKeepsItsDeadlineWhileRedisStalls) {
  LockClient holder(Redis(seconds(5)));
  LockClient waiter(Redis(seconds(5)));
  AcquireResult held = holder.TryAcquire("stall");
  ASSERT_TRUE(held);
  ASSERT_FALSE(waiter.TryAcquire("stall"));  // has reached Redis
  server_.Pause();
  const auto start = steady_clock::now();
  AcquireResult r = waiter.AcquireFor("stall", milliseconds(100));
  const auto took = steady_clock::now() - start;
  server_.Resume();
  EXPECT_EQ(r.status, AcquireStatus::kTimedOut);
  EXPECT_FALSE(r.last_error.empty());
  // Documented bound: 100 ms + kMinAttemptBudget + kGiveUpBudget; the old
  // code waited out the 5 s command timeout, twice.
  EXPECT_LT(took, milliseconds(2500))
      << std::chrono::duration_cast<milliseconds>(took).count() << " ms";
}

// A waiter handed the lock in full confirms it with a read: that read keeps
// a timed wait's deadline too (it took the 10 s command timeout).
TEST_F(SafetyFaults, AConfirmingReadKeepsTheWaitsDeadlineWhileRedisStalls) {
  LockClient holder(Redis(seconds(10)));
  LockClient waiter(Redis(seconds(10)));
  AcquireResult held = holder.TryAcquire("stall-read");
  ASSERT_TRUE(held);
  const auto start = steady_clock::now();
  auto fut = std::async(std::launch::async, [&] {
    return waiter.AcquireFor("stall-read", seconds(3));
  });
  LockInfo info;
  ASSERT_TRUE(WaitUntil([&] {
    info = holder.Inspect("stall-read");
    return info.queue.size() == 1;
  }));
  ASSERT_EQ(info.queue[0].waiter_id.rfind("g:", 0), 0u);
  ASSERT_TRUE(
      WaitUntil([&] { return waiter.stats().contended_attempts >= 1; }));
  server_.Pause();
  // An event naming it as the grantee (a forged one: the lock is still
  // held) wakes it to read, with Redis stalled.
  waiter.DeliverUnlockEvent(
      HandOffEvent("stall-read", held.lease.fence(), info.queue[0]));
  AcquireResult r = fut.get();
  const auto took = steady_clock::now() - start;
  server_.Resume();
  EXPECT_EQ(r.status, AcquireStatus::kTimedOut);
  EXPECT_FALSE(r.last_error.empty());
  // Documented bound: 3 s + kMinAttemptBudget + 2 x (kGiveUpBudget +
  // kMinAttemptBudget), 3.65 s, plus scheduling.
  EXPECT_LT(took, milliseconds(6000))
      << std::chrono::duration_cast<milliseconds>(took).count() << " ms";
  EXPECT_EQ(held.lease.Release(), ReleaseStatus::kReleased);
}

TEST_F(SafetyFaults, WaitRidesOutAShortOutage) {
  LockClient holder(Redis(seconds(2)));
  LockClient waiter(Redis(seconds(2)));
  AcquireResult held = holder.TryAcquire("ride", {.lease = milliseconds(1000)});
  ASSERT_TRUE(held);
  ASSERT_FALSE(waiter.TryAcquire("ride"));  // the waiter has reached Redis
  Lease lease;
  std::string error;
  std::thread waiting([&] {
    try {
      lease = waiter.Acquire("ride");  // no wait limit
    } catch (const Error& e) {
      error = e.what();
    }
  });
  // Redis goes away while the waiter waits, and comes back (empty). The
  // server is restarted from this thread: it dies with the thread that
  // started it.
  std::this_thread::sleep_for(milliseconds(200));
  server_.Stop();
  std::this_thread::sleep_for(milliseconds(1500));
  server_.Start();
  waiting.join();
  EXPECT_EQ(error, "");
  EXPECT_TRUE(lease.held());
  EXPECT_GT(waiter.stats().outage_waits, 0u);
}

// A multi-lock whose first try (all names in one script) meets an outage
// waits it out as a single acquisition does, instead of failing at once.
TEST_F(SafetyFaults, AMultiLockWaitRidesOutAnOutageAtItsFirstTry) {
  LockClient waiter(Redis(seconds(2)));
  ASSERT_TRUE(waiter.TryAcquire("ride:0"));  // the waiter has reached Redis
  server_.Stop();
  AcquireAllResult r;
  std::string error;
  std::thread waiting([&] {
    try {
      r = waiter.AcquireAllFor({"ride:2", "ride:1"}, seconds(60));
    } catch (const Error& e) {
      error = e.what();
    }
  });
  std::this_thread::sleep_for(milliseconds(1500));
  server_.Start();
  waiting.join();
  EXPECT_EQ(error, "");
  EXPECT_TRUE(r);
  EXPECT_GT(waiter.stats().outage_waits, 0u);
  // A try fails at once.
  server_.Stop();
  EXPECT_THROW(waiter.TryAcquireAll({"ride:3", "ride:4"}), Error);
  server_.Start();
}

TEST_F(SafetyFaults, OutageLongerThanTheGraceIsAnError) {
  LockClient holder(Redis(seconds(2)));
  LockClient waiter(Redis(milliseconds(200)),
                    {.outage_grace = milliseconds(300)});
  AcquireResult held = holder.TryAcquire("long");
  ASSERT_TRUE(held);
  ASSERT_FALSE(waiter.TryAcquire("long"));
  server_.Stop();
  const auto start = steady_clock::now();
  EXPECT_THROW(waiter.Acquire("long"), Error);
  EXPECT_LT(steady_clock::now() - start, seconds(10));
  server_.Start();
}

// A wake-up that reached a waiter while Redis was down was not used: when
// that waiter gives up, the next local waiter gets it, through the waiter's
// back-off parks too. Without it, the next waiter sleeps out its bound (here
// a 60 s lease) beside a free lock: a lost wake-up.
TEST_F(SafetyFaults, AWakeAWaiterCouldNotUseInAnOutageGoesToTheNextWaiter) {
  LockClient holder(Redis(seconds(2)));
  LockClient waiters(
      Redis(milliseconds(500)),
      {.park_cap = seconds(120), .fair = false, .outage_grace = seconds(120)});
  AcquireResult held = holder.TryAcquire("kept", {.lease = seconds(60)});
  ASSERT_TRUE(held);
  // Each waiter's call ends when its thread is asked to stop (so a failed
  // assertion never leaves one waiting).
  auto wait = [&](std::promise<AcquireResult>& done) {
    return [&](std::stop_token stop) {
      try {
        done.set_value(
            waiters.AcquireFor("kept", seconds(110), {.stop = stop}));
      } catch (...) {
        done.set_exception(std::current_exception());
      }
    };
  };
  std::promise<AcquireResult> first_done, second_done;
  auto first_result = first_done.get_future();
  auto second_result = second_done.get_future();
  // `first` is parked (its attempt counted) before `second` starts: it is
  // the oldest waiter, the one a wake-up reaches.
  std::jthread first(wait(first_done));
  ASSERT_TRUE(WaitUntil([&] { return waiters.stats().attempts >= 1; }));
  std::jthread second(wait(second_done));
  ASSERT_TRUE(WaitUntil([&] { return waiters.stats().attempts >= 2; }));
  ASSERT_EQ(held.lease.Release(), ReleaseStatus::kReleased);
  server_.Stop();
  // The release event arrives while Redis is down: `first` wakes, fails
  // and backs off (parking: a back-off is no wake-up of its own).
  UnlockEvent event;
  event.lock = "kept";
  event.owner = held.lease.owner();
  event.fence = held.lease.fence();
  event.client_id = "the-holder";
  waiters.DeliverUnlockEvent(event);
  ASSERT_TRUE(WaitUntil([&] { return waiters.stats().outage_waits >= 2; }));
  EXPECT_EQ(waiters.stats().wakeups_event, 1u);
  first.request_stop();
  EXPECT_EQ(first_result.get().status, AcquireStatus::kCancelled);
  server_.Start();
  ASSERT_EQ(second_result.wait_for(seconds(30)), std::future_status::ready)
      << "the second waiter slept beside a free lock";
  EXPECT_TRUE(second_result.get());
  EXPECT_EQ(waiters.stats().wakeups_event, 2u);  // the one passed on
}

TEST_F(SafetyFaults, NeverReachedRedisFailsAtOnce) {
  server_.Stop();
  LockClient waiter(Redis(milliseconds(500)));
  const auto start = steady_clock::now();
  EXPECT_THROW(waiter.AcquireFor("x", seconds(60)), Error);
  EXPECT_LT(steady_clock::now() - start, seconds(10));
  server_.Start();
}

// Item 8: a full Redis (maxmemory, noeviction) refuses a new grant before
// the script runs — never half-way — and still lets holders give back.
TEST_F(Safety, FullRedisRefusesGrantsCleanlyAndStillReleases) {
  auto client = NewClient();
  AcquireResult held = client->TryAcquire("kept");
  ASSERT_TRUE(held);
  auto other = NewClient();
  ASSERT_FALSE(other->TryAcquire("kept"));
  redis_->Execute({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
  redis_->Execute({"CONFIG", "SET", "maxmemory", "1"});  // full at once
  try {
    other->TryAcquire("new-lock");
    ADD_FAILURE() << "a full Redis granted a lock";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("OOM"), std::string::npos) << e.what();
  }
  EXPECT_EQ(redis_->Execute({"EXISTS", LockKey("new-lock")}).integer, 0);
  EXPECT_EQ(held.lease.Release(), ReleaseStatus::kReleased);
  redis_->Execute({"CONFIG", "SET", "maxmemory", "0"});
  EXPECT_FALSE(client->Inspect("kept").locked);
}

// A full Redis lets a fair release finish its hand-off: the release frees
// the lock and grants it to the queued waiter in one script, which grows
// memory (a new fence, the grant hash) after it has deleted the old grant.
// A script with a shebang but without `allow-oom` is refused on a full
// Redis: the holder could not give the lock back, nor hand it on, and it
// would block everyone for the rest of its lease. The grant must be
// complete — the waiter's, under a new fence — not a deleted lock with the
// waiter dequeued and no grant. (A script without any shebang also runs
// on: Redis refuses a deny-oom command only before a script's first write,
// and the release writes first, with HDEL.) `in_full`: the waiter's lease
// is the watchdog's, under its thread's own owner token, so the grant is
// in full (its hold, count 1, nothing pending) and it confirms it; else an
// explicit lease and a caller-given token: a hand-off to claim, pending
// while Redis is full (the claim grows memory and is refused).
void FullRedisStillHandsAFairLockOn(RedisClient& redis, LockClient& holder,
                                    LockClient& waiter, LockClient& inspector,
                                    bool in_full) {
  AcquireResult held = holder.TryAcquire(
      "full-fair", {.lease = seconds(60), .owner = "full:holder"});
  ASSERT_TRUE(held);
  const int64_t holder_fence = held.lease.fence();
  AcquireOptions options;
  if (!in_full) {
    options.lease = seconds(60);
    options.owner = "full:waiter";
  }
  auto waiting = std::async(std::launch::async, [&] {
    return waiter.AcquireFor("full-fair", seconds(60), options);
  });
  std::string waiter_id;
  ASSERT_TRUE(WaitUntil([&] {
    LockInfo info = inspector.Inspect("full-fair");
    if (info.queue.size() != 1) return false;
    waiter_id = info.queue[0].waiter_id;
    return true;
  }));
  redis.Execute({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
  redis.Execute({"CONFIG", "SET", "maxmemory", "1"});  // full at once
  struct Unfill {  // also when an assertion below returns early
    RedisClient& redis;
    ~Unfill() {
      try {
        redis.Execute({"CONFIG", "SET", "maxmemory", "0"});
      } catch (...) {
      }
    }
  } unfill{redis};
  // Full indeed: a grant that grows memory is refused.
  EXPECT_THROW(inspector.TryAcquire("probe"), Error);

  EXPECT_EQ(held.lease.Release(), ReleaseStatus::kReleased);
  // Handed off while Redis is still full, under a new fence.
  LockInfo info = inspector.Inspect("full-fair");
  EXPECT_TRUE(info.locked) << "the release freed the lock without a grant";
  if (in_full) {
    EXPECT_EQ(info.owner.rfind(waiter.client_id(), 0), 0u) << info.owner;
    EXPECT_EQ(info.hold_count, 1);
    EXPECT_TRUE(info.pending_waiter.empty());
    EXPECT_LE(info.ttl, seconds(30));  // the claim window, not the lease
  } else {
    EXPECT_EQ(info.owner, "full:waiter");
    EXPECT_EQ(info.pending_waiter, waiter_id);
    EXPECT_EQ(info.hold_count, 0);
  }
  EXPECT_GT(info.fence, holder_fence);
  EXPECT_EQ(info.fence, info.last_fence);
  EXPECT_GT(info.ttl, milliseconds(0));
  EXPECT_TRUE(info.queue.empty());

  // Room again: the waiter claims, or confirms, the grant it was handed.
  redis.Execute({"CONFIG", "SET", "maxmemory", "0"});
  AcquireResult got = waiting.get();
  ASSERT_TRUE(got) << got.last_error;
  EXPECT_EQ(got.lease.fence(), info.fence);
  EXPECT_EQ(got.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(inspector.Inspect("full-fair").locked);
}

// Long windows: neither the waiter's place nor its hand-off lapses while
// Redis is full and the waiter cannot refresh or claim.
LockClientOptions LongWindows() {
  return {.presence_window = seconds(60), .claim_window = seconds(30)};
}

TEST_F(Safety, FullRedisStillHandsAFairLockToTheQueuedWaiter) {
  auto holder = NewClient(LongWindows());
  auto waiter = NewClient(LongWindows());
  auto inspector = NewClient();
  FullRedisStillHandsAFairLockOn(*redis_, *holder, *waiter, *inspector,
                                 /*in_full=*/false);
}

TEST_F(Safety, FullRedisStillHandsAFairLockInFullToAWatchdogWaiter) {
  auto holder = NewClient(LongWindows());
  auto waiter = NewClient(LongWindows());
  auto inspector = NewClient();
  FullRedisStillHandsAFairLockOn(*redis_, *holder, *waiter, *inspector,
                                 /*in_full=*/true);
}

}  // namespace
}  // namespace lockfleet::testing
