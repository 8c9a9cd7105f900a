// Acquire / release / reentrancy / ownership / fencing, against a real
// redis-server.
#include <gtest/gtest.h>

#include <functional>
#include <sstream>
#include <thread>

#include "key_slot.h"
#include "lock_fixture.h"
#include "lockfleet/lockcore/error.h"
#include "scripts.h"
#include "support/fake_clock.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class Lock : public LockTest {};

TEST_F(Lock, AcquireAndRelease) {
  auto client = NewClient();
  AcquireResult r = client->TryAcquire("orders:42");
  ASSERT_TRUE(r);
  EXPECT_EQ(r.status, AcquireStatus::kAcquired);
  EXPECT_EQ(r.attempts, 1);
  EXPECT_EQ(r.lease.name(), "orders:42");
  EXPECT_EQ(r.lease.owner(), client->DefaultOwner());
  EXPECT_GT(r.lease.fence(), 0);
  EXPECT_FALSE(r.lease.lost());

  LockInfo info = client->Inspect("orders:42");
  EXPECT_TRUE(info.locked);
  EXPECT_EQ(info.owner, client->DefaultOwner());
  EXPECT_EQ(info.hold_count, 1);
  EXPECT_EQ(info.fence, r.lease.fence());
  EXPECT_GT(info.ttl, milliseconds(25000));  // the 30 s watchdog lease
  EXPECT_LE(info.ttl, milliseconds(30000));

  EXPECT_EQ(r.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(r.lease.held());
  EXPECT_FALSE(client->Inspect("orders:42").locked);
  EXPECT_EQ(redis_->Execute({"EXISTS", LockKey("orders:42")}).integer, 0);
}

TEST_F(Lock, SecondClientIsRefusedAndToldWhoHoldsIt) {
  auto a = NewClient();
  auto b = NewClient();
  AcquireResult held = a->TryAcquire("report", {.lease = milliseconds(20000)});
  ASSERT_TRUE(held);
  AcquireResult refused = b->TryAcquire("report");
  EXPECT_EQ(refused.status, AcquireStatus::kTimedOut);
  EXPECT_FALSE(refused.lease.held());
  EXPECT_EQ(refused.holder, a->DefaultOwner());
  EXPECT_GT(refused.holder_ttl, milliseconds(0));
  EXPECT_LE(refused.holder_ttl, milliseconds(20000));
  EXPECT_EQ(b->stats().contended_attempts, 1u);
}

TEST_F(Lock, ReentrantOnTheSameThread) {
  auto client = NewClient();
  AcquireResult outer = client->TryAcquire("r");
  AcquireResult inner = client->TryAcquire("r");
  ASSERT_TRUE(outer);
  ASSERT_TRUE(inner);
  EXPECT_EQ(outer.lease.fence(), inner.lease.fence());
  EXPECT_EQ(client->Inspect("r").hold_count, 2);

  EXPECT_EQ(inner.lease.Release(), ReleaseStatus::kStillHeld);
  LockInfo info = client->Inspect("r");
  EXPECT_TRUE(info.locked);
  EXPECT_EQ(info.hold_count, 1);
  EXPECT_EQ(outer.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(client->Inspect("r").locked);
}

TEST_F(Lock, AnotherThreadOfTheSameClientIsAnotherOwner) {
  auto client = NewClient();
  AcquireResult mine = client->TryAcquire("t");
  ASSERT_TRUE(mine);
  AcquireResult theirs;
  std::thread([&] { theirs = client->TryAcquire("t"); }).join();
  EXPECT_FALSE(theirs);
  EXPECT_EQ(theirs.holder, mine.lease.owner());
}

TEST_F(Lock, CallerGivenOwnerSharesTheHoldAcrossThreads) {
  auto client = NewClient();
  AcquireResult first = client->TryAcquire("shared", {.owner = "job-7"});
  AcquireResult second;
  std::thread([&] {
    second = client->TryAcquire("shared", {.owner = "job-7"});
  }).join();
  ASSERT_TRUE(first);
  ASSERT_TRUE(second);
  EXPECT_EQ(client->Inspect("shared").hold_count, 2);
  EXPECT_EQ(client->Inspect("shared").owner, "job-7");
}

TEST_F(Lock, ReleaseByNonOwnerIsRefusedAndTouchesNothing) {
  auto a = NewClient();
  auto b = NewClient();
  AcquireResult stale = a->TryAcquire("pay:1");
  ASSERT_TRUE(stale);
  // An operator frees the lock; b takes it. a's lease is now stale.
  ASSERT_TRUE(b->ForceUnlock("pay:1").was_locked);
  AcquireResult fresh = b->TryAcquire("pay:1");
  ASSERT_TRUE(fresh);

  EXPECT_EQ(stale.lease.Release(), ReleaseStatus::kNotOwner);
  LockInfo info = b->Inspect("pay:1");
  EXPECT_TRUE(info.locked);
  EXPECT_EQ(info.owner, b->DefaultOwner());
  EXPECT_EQ(info.fence, fresh.lease.fence());
  EXPECT_EQ(info.hold_count, 1);
  EXPECT_EQ(a->stats().releases_not_owner, 1u);
}

TEST_F(Lock, SameOwnerWithAStaleGrantCannotReleaseItsNewGrant) {
  auto client = NewClient();
  AcquireResult old_grant = client->TryAcquire("g", {.owner = "w"});
  ASSERT_TRUE(old_grant);
  client->ForceUnlock("g");
  AcquireResult new_grant = client->TryAcquire("g", {.owner = "w"});
  ASSERT_TRUE(new_grant);
  ASSERT_NE(old_grant.lease.fence(), new_grant.lease.fence());
  EXPECT_TRUE(old_grant.lease.lost());
  EXPECT_EQ(old_grant.lease.Release(), ReleaseStatus::kNotOwner);
  EXPECT_TRUE(client->Inspect("g").locked);
  EXPECT_EQ(client->Inspect("g").fence, new_grant.lease.fence());
}

TEST_F(Lock, ReleaseAfterExpiryReportsNotHeld) {
  auto client = NewClient();
  AcquireResult r = client->TryAcquire("e", {.lease = milliseconds(60000)});
  ASSERT_TRUE(r);
  redis_->Execute({"DEL", LockKey("e")});  // as if the lease ran out
  EXPECT_EQ(r.lease.Release(), ReleaseStatus::kNotHeld);
}

// Every hold is its own field in the lock hash, named by a globally unique
// hold id: a retried acquire or release (same hold id) cannot count twice,
// whatever other holds of the same owner did in between.
TEST_F(Lock, ScriptsAreIdempotentUnderRetryPerHold) {
  std::vector<std::string> keys{LockKey("idem"), "lockfleet:fence:{idem}",
                                "lockfleet:{idem}:queue",
                                "lockfleet:{idem}:waiters", ""};
  auto acquire = [&](const std::string& hold) {
    return redis_->Eval(internal::AcquireScript(), {keys[0], keys[1]},
                        {"o", "30000", hold});
  };
  EXPECT_EQ(acquire("h1").elements[2].integer, 1);
  EXPECT_EQ(acquire("h1").elements[2].integer, 1);  // a retry is not a 2nd hold
  EXPECT_EQ(acquire("h2").elements[2].integer, 2);
  EXPECT_EQ(acquire("h3").elements[2].integer, 3);
  std::string fence = std::to_string(acquire("h3").elements[1].integer);
  // A release's request id is its hold id: its reply is latched under it.
  auto release = [&](const std::string& hold) {
    keys[4] = "lockfleet:{idem}:latch:" + hold;
    return redis_->Eval(internal::ReleaseScript(), keys,
                        {"o", fence, hold, "2000", "10000"});
  };
  EXPECT_EQ(release("h1").elements[1].integer, 2);
  EXPECT_EQ(release("h2").elements[1].integer, 1);  // another hold in between
  EXPECT_EQ(release("h1").elements[1].integer, 2);  // h1's retry: its reply
  EXPECT_EQ(redis_->Execute({"HGET", keys[0], "count"}).str, "1");
  EXPECT_TRUE(redis_->Execute({"EXISTS", keys[0]}).integer == 1);
  EXPECT_EQ(release("h3").elements[0].integer, 1);  // the last hold: freed
  EXPECT_EQ(release("h3").elements[0].integer, 1);  // its retry: same reply
  redis_->Execute({"DEL", "lockfleet:{idem}:latch:h3"});  // latch expired
  EXPECT_EQ(release("h3").elements[0].integer, 0);        // not held
  // A stale retry never frees a newer grant, even by the same owner.
  acquire("h4");
  EXPECT_EQ(release("h3").elements[0].integer, -1);
  EXPECT_EQ(redis_->Execute({"EXISTS", keys[0]}).integer, 1);
}

// The release reads its latch only when its hold is not in the grant. A
// retry that finds the hold back — a late try of its acquire re-added it
// after the first try ran — releases that orphan as a first try would:
// with another hold left, the same answer as the latch; once the last,
// the lock is freed and handed to the queue at once, rather than held by
// a hold nobody has until its lease ends.
TEST_F(Lock, AReleaseRetryThatFindsItsHoldPutBackReleasesTheOrphan) {
  const std::vector<std::string> keys{
      LockKey("late"), "lockfleet:fence:{late}", "lockfleet:{late}:queue",
      "lockfleet:{late}:waiters", "lockfleet:{late}:latch:h1"};
  auto acquire = [&](const std::string& hold) {
    return redis_->Eval(internal::AcquireScript(), {keys[0], keys[1]},
                        {"o", "60000", hold});
  };
  auto release = [&](const std::string& hold) {
    std::vector<std::string> k = keys;
    k[4] = "lockfleet:{late}:latch:" + hold;
    return redis_->Eval(internal::ReleaseScript(), k,
                        {"o", "", hold, "2000", "10000"});
  };
  ASSERT_EQ(acquire("h1").elements[2].integer, 1);
  ASSERT_EQ(acquire("h2").elements[2].integer, 2);
  // A fair waiter queues behind the grant.
  Reply queued = redis_->Eval(internal::AcquireFairScript(),
                              {keys[0], keys[1], keys[2], keys[3]},
                              {"ow", "60000", "hw", "w:1", "30000", "1"});
  ASSERT_EQ(queued.elements[0].integer, 0);

  EXPECT_EQ(release("h1").elements[0].integer, 2);  // its reply is "lost"
  ASSERT_EQ(acquire("h1").elements[2].integer, 2);  // the late try
  Reply retry = release("h1");  // another hold left: as the latch says
  EXPECT_EQ(retry.elements[0].integer, 2);
  EXPECT_EQ(retry.elements[1].integer, 1);
  EXPECT_EQ(redis_->Execute({"HEXISTS", keys[0], "h:h1"}).integer, 0);

  ASSERT_EQ(acquire("h1").elements[2].integer, 2);  // late again
  EXPECT_EQ(release("h2").elements[0].integer, 2);
  retry = release("h1");  // the orphan is the last hold: freed, handed on
  ASSERT_EQ(retry.elements[0].integer, 3);
  EXPECT_EQ(retry.elements[1].str, "w:1");
  EXPECT_EQ(redis_->Execute({"HGET", keys[0], "owner"}).str, "ow");
  EXPECT_EQ(redis_->Execute({"HGET", keys[0], "pending"}).str, "w:1");
  EXPECT_EQ(redis_->Execute({"LLEN", keys[2]}).integer, 0);
  // Its own retry, the hold gone now: the latched answer, nothing more.
  EXPECT_EQ(release("h1").elements[0].integer, 3);
  EXPECT_EQ(redis_->Execute({"HGET", keys[0], "pending"}).str, "w:1");
}

// Review finding: hold/request ids were per-client counters, so two clients
// sharing a caller-given owner token collided ("1" and "1"), a hold went
// uncounted, and the lock was freed while one of them still held it.
TEST_F(Lock, ClientsSharingAnOwnerTokenCountEveryHold) {
  auto a = NewClient();
  auto b = NewClient();
  AcquireResult ha = a->TryAcquire("svc-lock", {.owner = "svc"});
  AcquireResult hb = b->TryAcquire("svc-lock", {.owner = "svc"});
  ASSERT_TRUE(ha && hb);
  EXPECT_EQ(a->Inspect("svc-lock").hold_count, 2);
  EXPECT_EQ(ha.lease.Release(), ReleaseStatus::kStillHeld);
  EXPECT_TRUE(a->Inspect("svc-lock").locked);
  EXPECT_FALSE(NewClient()->TryAcquire("svc-lock"));  // still b's
  EXPECT_EQ(hb.lease.Release(), ReleaseStatus::kReleased);
}

TEST_F(Lock, RaiiGuardReleasesAtScopeEnd) {
  auto client = NewClient();
  {
    Lease lease = client->Acquire("scoped");
    EXPECT_TRUE(client->Inspect("scoped").locked);
  }
  EXPECT_FALSE(client->Inspect("scoped").locked);
  // Move-assignment releases what the target held.
  Lease a = client->Acquire("m1");
  Lease b = client->Acquire("m2");
  a = std::move(b);
  EXPECT_FALSE(client->Inspect("m1").locked);
  EXPECT_TRUE(client->Inspect("m2").locked);
  EXPECT_EQ(a.name(), "m2");
}

TEST_F(Lock, LeaseOutlivesItsClient) {
  Lease lease;
  {
    auto client = NewClient();
    lease = client->Acquire("orphan");
  }
  EXPECT_EQ(lease.Release(), ReleaseStatus::kReleased);
  EXPECT_EQ(redis_->Execute({"EXISTS", LockKey("orphan")}).integer, 0);
}

TEST_F(Lock, FencingTokensStrictlyIncrease) {
  auto a = NewClient();
  auto b = NewClient();
  int64_t last = 0;
  auto expect_next = [&](const AcquireResult& r) {
    ASSERT_TRUE(r);
    EXPECT_GT(r.lease.fence(), last);
    last = r.lease.fence();
  };
  for (int i = 0; i < 5; ++i) {
    AcquireResult r = (i % 2 ? a : b)->TryAcquire("fence");
    expect_next(r);
    (void)r.lease.Release();
  }
  // Across lease expiry: the lock key vanishes, the counter does not.
  {
    AcquireResult r = a->TryAcquire("fence", {.lease = milliseconds(60000)});
    expect_next(r);
    redis_->Execute({"PEXPIRE", LockKey("fence"), "1"});
    ASSERT_TRUE(WaitUntil([&] { return !a->Inspect("fence").locked; }));
    expect_next(b->TryAcquire("fence"));
  }
  // Across force-unlock.
  a->ForceUnlock("fence");
  AcquireResult after_force = a->TryAcquire("fence");
  expect_next(after_force);
  EXPECT_EQ(a->Inspect("fence").last_fence, last);
}

// A fencing token is max(counter + 1, the server's clock in µs), read and
// written with one SET ... GET: a counter ahead of the clock (a failover to
// a server whose clock is behind) still gives strictly increasing tokens,
// each one above it, and the counter keeps the last one issued.
TEST_F(Lock, AFenceCounterAheadOfTheClockStillGivesIncreasingTokens) {
  auto client = NewClient();
  const std::string key =
      internal::FenceCounterKey("lockfleet", LockKey("ahead"));
  const Reply time = redis_->Execute({"TIME"});
  const int64_t now_us = std::stoll(time.elements[0].str) * 1'000'000 +
                         std::stoll(time.elements[1].str);
  const int64_t ahead = now_us + 3'600'000'000;  // an hour ahead
  redis_->Execute({"SET", key, std::to_string(ahead)});
  for (int64_t expected = ahead + 1; expected <= ahead + 3; ++expected) {
    AcquireResult r = client->TryAcquire("ahead");
    ASSERT_TRUE(r);
    EXPECT_EQ(r.lease.fence(), expected);
    EXPECT_EQ(redis_->Execute({"GET", key}).str, std::to_string(expected));
    ASSERT_EQ(r.lease.Release(), ReleaseStatus::kReleased);
  }
  // A counter behind the clock: the token is the clock.
  redis_->Execute({"SET", key, "5"});
  AcquireResult r = client->TryAcquire("ahead");
  ASSERT_TRUE(r);
  EXPECT_GE(r.lease.fence(), now_us);
  EXPECT_EQ(redis_->Execute({"GET", key}).str, std::to_string(r.lease.fence()));
}

// What each step of a contended fair acquisition costs Redis, as INFO
// commandstats counts it (each EVALSHA and every command inside): the
// figures docs/lockcore.md gives ("What an acquisition costs Redis"). A
// change that adds a command to a step fails here; one that removes some
// updates the figures here and there.
TEST_F(Lock, EachStepOfAContendedFairAcquisitionCostsItsCountedCommands) {
  const std::string lock = LockKey("cost");
  const std::vector<std::string> keys{
      lock, internal::FenceCounterKey("lockfleet", lock),
      "lockfleet:{cost}:queue", "lockfleet:{cost}:waiters"};
  auto fair = [&](const std::string& who, int call) {
    return redis_->Eval(internal::AcquireFairScript(), keys,
                        {who, "30000", who + std::to_string(call),
                         "w" + who + std::to_string(call), "30000", "1"});
  };
  auto release = [&](const std::string& who, int call) {
    std::vector<std::string> k = keys;
    k.push_back("lockfleet:{cost}:latch:" + who + std::to_string(call));
    return redis_->Eval(internal::ReleaseScript(), k,
                        {who, "", who + std::to_string(call), "2000", "10000"});
  };
  auto spin = [&](const std::string& who, int call) {
    return redis_->Eval(internal::SpinClaimScript(), {lock},
                        {who, "30000", who + std::to_string(call),
                         "w" + who + std::to_string(call)});
  };
  auto presence = [&](const std::string& who, int call) {
    return redis_->Eval(internal::PresenceScript(), keys,
                        {"w" + who + std::to_string(call), who, "30000"});
  };
  // The commands `step` runs (all but the test's own INFO and CONFIG), and
  // what they were (for a failure's message).
  std::string last_counted;
  auto cost = [&](const std::function<Reply()>& step, int expected_reply,
                  const char* what) {
    redis_->Execute({"CONFIG", "RESETSTAT"});
    Reply r = step();
    const std::string stats = redis_->Execute({"INFO", "commandstats"}).str;
    int64_t calls = 0;
    std::string counted;
    std::istringstream lines(stats);
    for (std::string line; std::getline(lines, line);) {
      const size_t colon = line.find(':');
      const size_t at = line.find("calls=");
      if (line.rfind("cmdstat_", 0) != 0 || at == std::string::npos) continue;
      const std::string name = line.substr(8, colon - 8);
      if (name == "info" || name.rfind("config", 0) == 0) continue;
      const int64_t n = std::stoll(line.substr(at + 6));
      calls += n;
      counted += " " + name + "=" + std::to_string(n);
    }
    EXPECT_EQ(r.elements.empty() ? -9 : r.elements[0].integer, expected_reply)
        << what;
    last_counted = std::string(what) + ":" + counted;
    return calls;
  };
  // Every script once first, so none costs a load below.
  ASSERT_EQ(fair("A", 0).elements[0].integer, 1);
  ASSERT_EQ(fair("B", 0).elements[0].integer, 0);
  ASSERT_EQ(spin("B", 0).elements[0].integer, 0);
  ASSERT_EQ(presence("B", 0).elements[0].integer, 1);
  ASSERT_EQ(release("A", 0).elements[0].integer, 3);
  ASSERT_EQ(spin("B", 0).elements[0].integer, 1);
  ASSERT_EQ(release("B", 0).elements[0].integer, 1);

  ASSERT_EQ(fair("A", 1).elements[0].integer, 1);  // A holds
  // B queues: a new queue (both keys' times to live set). The lock's time
  // to live comes from the grant's `exp` field, read with the rest: no PTTL.
  const int64_t queue = cost([&] { return fair("B", 1); }, 0, "queue");
  EXPECT_EQ(queue, 7) << last_counted;
  // C queues behind B: the keys live long enough, neither is written.
  EXPECT_EQ(cost([&] { return fair("C", 1); }, 0, "queue behind"), 6)
      << last_counted;
  // B refreshes its presence (already queued).
  EXPECT_EQ(cost([&] { return fair("B", 1); }, 0, "refresh"), 6)
      << last_counted;
  // The watchdog refreshes B's presence instead (its client's batch).
  EXPECT_EQ(cost([&] { return presence("B", 1); }, 1, "presence"), 6)
      << last_counted;
  // A spin check that finds the lock still held.
  EXPECT_EQ(cost([&] { return spin("B", 1); }, 0, "spin miss"), 2)
      << last_counted;
  // A releases: handed to B.
  const int64_t hand_off = cost([&] { return release("A", 1); }, 3, "release");
  EXPECT_EQ(hand_off, 11) << last_counted;
  // B claims (after its event, or by a spin check: the same writes).
  const int64_t claim = cost([&] { return fair("B", 1); }, 1, "claim");
  EXPECT_EQ(claim, 4) << last_counted;
  EXPECT_EQ(queue + claim + hand_off, 22);
  ASSERT_EQ(release("B", 1).elements[0].integer, 3);  // handed to C
  EXPECT_EQ(cost([&] { return spin("C", 1); }, 1, "spin claim"), 4)
      << last_counted;
  // Those were waiters handed a lock to claim ("w:" ids: explicit leases,
  // replica acknowledgement). A call whose watchdog renews its lease queues
  // as "g:<hold id>" and is handed the lock in full; it confirms the grant
  // with one HMGET (HandOffConfirmCommand, LockCore::ConfirmHandOff's), as
  // does its spin check.
  auto queue_in_full = [&](const std::string& who) {
    return redis_->Eval(internal::AcquireFairScript(), keys,
                        {who, "30000", who, "g:" + who, "30000", "1"});
  };
  auto confirm = [&](const std::string& who) {
    const Reply r = redis_->Execute(internal::HandOffConfirmCommand(lock, who));
    Reply out;
    out.type = Reply::Type::kArray;
    out.elements.resize(1);
    out.elements[0].type = Reply::Type::kInteger;
    out.elements[0].integer = r.elements.size() == 4 &&
                              r.elements[0].str == who &&
                              r.elements[2].type != Reply::Type::kNil;
    return out;
  };
  // Behind a claimed grant (whose claim may have shortened the key: its
  // `exp` is 0), the refusal reads the time to live with PTTL.
  EXPECT_EQ(cost([&] { return queue_in_full("D"); }, 0, "queue (claimed)"), 8)
      << last_counted;
  EXPECT_EQ(cost([&] { return confirm("D"); }, 0, "spin miss (in full)"), 1)
      << last_counted;
  const int64_t hand_off_full =
      cost([&] { return release("C", 1); }, 3, "release (in full)");
  EXPECT_EQ(hand_off_full, 11) << last_counted;
  // The grant: D's hold, count 1, the claim window as its lease.
  const Reply state =
      redis_->Execute({"HMGET", lock, "owner", "count", "h:D", "claim"});
  EXPECT_EQ(state.elements[0].str, "D");
  EXPECT_EQ(state.elements[1].str, "1");
  EXPECT_EQ(state.elements[2].str, "1");
  EXPECT_EQ(state.elements[3].str, "2000");
  const int64_t pttl = redis_->Execute({"PTTL", lock}).integer;
  EXPECT_GT(pttl, 0);
  EXPECT_LE(pttl, 2000);
  // Not the releaser's any more: a retry of C's release answers as the
  // first try did, another hold of C's is refused, and D's grant stays.
  EXPECT_EQ(release("C", 1).elements[0].integer, 3);
  EXPECT_EQ(release("C", 2).elements[0].integer, -1);
  const Reply kept = redis_->Execute({"HMGET", lock, "owner", "count", "h:D"});
  EXPECT_EQ(kept.elements[0].str, "D");
  EXPECT_EQ(kept.elements[1].str, "1");
  EXPECT_EQ(kept.elements[2].str, "1");
  const int64_t confirmed =
      cost([&] { return confirm("D"); }, 1, "confirm (in full)");
  EXPECT_EQ(confirmed, 1) << last_counted;
  // The chain in full: E queues behind D's grant in full (its `exp`), D
  // hands E the lock in full, E confirms.
  const int64_t queue_full =
      cost([&] { return queue_in_full("E"); }, 0, "queue (in full)");
  EXPECT_EQ(queue_full, 7) << last_counted;
  std::vector<std::string> latch_d = keys;
  latch_d.push_back("lockfleet:{cost}:latch:D");
  ASSERT_EQ(redis_
                ->Eval(internal::ReleaseScript(), latch_d,
                       {"D", "", "D", "2000", "10000"})
                .elements[0]
                .integer,
            3);  // D's hold is "D" (its waiter id "g:D")
  EXPECT_EQ(cost([&] { return confirm("E"); }, 1, "confirm E"), 1)
      << last_counted;
  EXPECT_EQ(queue_full + hand_off_full + confirmed, 19);
}

// The watchdog's presence refresh (PresenceScript) keeps a queued waiter's
// entry and nothing else: it never puts back a waiter the queue no longer
// has (handed the lock, or dropped as lapsed) — that waiter would look
// queued while it is not, and no hand-off would ever reach it. It tells the
// waiter off the queue so ({0}: it may have been handed the lock), and to
// attempt ({2}) when its attempt would be granted: the lock free with it
// first, or held under its owner token with nothing pending.
TEST_F(Lock, APresenceRefreshNeverPutsBackAWaiterTheQueueLost) {
  const std::string lock = LockKey("kept");
  const std::string queue = "lockfleet:{kept}:queue";
  const std::string waiters = "lockfleet:{kept}:waiters";
  const std::vector<std::string> keys{
      lock, internal::FenceCounterKey("lockfleet", lock), queue, waiters};
  // `who` waits as "w<who>" with the hold `who`, under `owner` (default:
  // its own token).
  auto fair = [&](const std::string& who, std::string owner = "") {
    if (owner.empty()) owner = who;
    return redis_
        ->Eval(internal::AcquireFairScript(), keys,
               {owner, "30000", who, "w" + who, "3000", "1"})
        .elements[0]
        .integer;
  };
  auto presence = [&](const std::string& who, std::string owner = "") {
    if (owner.empty()) owner = who;
    return redis_
        ->Eval(internal::PresenceScript(), keys, {"w" + who, owner, "3000"})
        .elements[0]
        .integer;
  };
  auto deadline = [&](const std::string& who) {
    const Reply r = redis_->Execute({"HGET", waiters, "w" + who});
    return r.type == Reply::Type::kString
               ? std::stoll(r.str.substr(0, r.str.find('|')))
               : -1;
  };
  ASSERT_EQ(fair("A"), 1);
  ASSERT_EQ(fair("B"), 0);  // queued
  const long long first = deadline("B");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(presence("B"), 1);
  EXPECT_GT(deadline("B"), first);  // refreshed
  EXPECT_EQ(redis_->Execute({"HGET", waiters, "wB"})
                .str.substr(
                    redis_->Execute({"HGET", waiters, "wB"}).str.find('|') + 1),
            "B");
  // A releases: handed to B, who is off the queue.
  std::vector<std::string> k = keys;
  k.push_back("lockfleet:{kept}:latch:A");
  ASSERT_EQ(
      redis_
          ->Eval(internal::ReleaseScript(), k, {"A", "", "A", "2000", "10000"})
          .elements[0]
          .integer,
      3);
  EXPECT_EQ(presence("B"), 0);  // try: the hand-off is yours
  EXPECT_EQ(deadline("B"), -1);
  EXPECT_EQ(redis_->Execute({"LLEN", queue}).integer, 0);
  EXPECT_EQ(fair("B"), 1);  // B's attempt claims it
  // A lapsed waiter first, the lock free: C, second, is told to try, and
  // the lapsed one is dropped on the way.
  redis_->Execute({"DEL", lock});
  redis_->Execute({"RPUSH", queue, "wghost"});
  redis_->Execute({"HSET", waiters, "wghost", "1|ghost"});
  redis_->Execute({"HSET", lock, "owner", "D", "count", "1", "fence", "1"});
  ASSERT_EQ(fair("C"), 0);         // queued behind the ghost
  EXPECT_EQ(presence("C"), 1);     // held: nothing to do
  redis_->Execute({"DEL", lock});  // its lease ran out
  EXPECT_EQ(presence("C"), 2);     // attempt: it would be granted
  EXPECT_EQ(redis_->Execute({"LINDEX", queue, "0"}).str, "wC");
  const long long kept = deadline("C");
  EXPECT_EQ(fair("C"), 1);  // its own attempt takes it
  EXPECT_GT(kept, 1);
  // A waiter dropped as lapsed (not handed the lock) is told to try and is
  // not put back either.
  ASSERT_EQ(fair("D"), 0);
  ASSERT_EQ(fair("E"), 0);
  redis_->Execute({"HSET", waiters, "wD", "1|D"});  // its presence lapsed
  std::vector<std::string> kc = keys;
  kc.push_back("lockfleet:{kept}:latch:C");
  ASSERT_EQ(
      redis_
          ->Eval(internal::ReleaseScript(), kc, {"C", "", "C", "2000", "10000"})
          .elements[0]
          .integer,
      3);  // handed to E, D dropped on the way
  EXPECT_EQ(presence("D"), 0);
  EXPECT_EQ(deadline("D"), -1);
  EXPECT_EQ(redis_->Execute({"LLEN", queue}).integer, 0);
  // A waiter whose own entry lapsed (its thread came back late), first in
  // line, the lock free, a live waiter behind it: told to try, and its entry
  // left as it was — refreshed, it would be dropped from the list by the
  // pruning of lapsed heads and then kept in the hash alone, a phantom no
  // attempt of its would queue again.
  redis_->Execute({"DEL", lock});
  ASSERT_EQ(fair("F"), 1);  // F holds
  ASSERT_EQ(fair("G"), 0);
  ASSERT_EQ(fair("H"), 0);
  redis_->Execute({"HSET", waiters, "wG", "1|G"});  // G's presence lapsed
  redis_->Execute({"DEL", lock});                   // F's lease ran out
  EXPECT_EQ(presence("G"), 0);
  EXPECT_EQ(deadline("G"), 1);  // untouched
  EXPECT_EQ(redis_->Execute({"LLEN", queue}).integer, 2);
  EXPECT_EQ(presence("H"), 2);  // H is first once G is dropped
  EXPECT_EQ(deadline("G"), -1);
  EXPECT_EQ(redis_->Execute({"LRANGE", queue, "0", "-1"}).elements.size(), 1u);
  EXPECT_EQ(presence("G"), 0);  // and G is not put back
  EXPECT_EQ(deadline("G"), -1);
  EXPECT_EQ(fair("G"), 0);  // G's own attempt queues it again, behind H
  EXPECT_EQ(redis_->Execute({"LINDEX", queue, "1"}).str, "wG");
  // Held under the waiter's own owner token: J and L queue under the token
  // T behind K; K's release hands the lock to J (to claim). While that is
  // pending, L is refreshed (its attempt would be refused); once J claimed
  // it, L is told to attempt, and its attempt re-enters J's grant.
  for (const char* key : {lock.c_str(), queue.c_str(), waiters.c_str()})
    redis_->Execute({"DEL", key});
  ASSERT_EQ(fair("K"), 1);
  ASSERT_EQ(fair("J", "T"), 0);
  ASSERT_EQ(fair("L", "T"), 0);
  EXPECT_EQ(presence("L", "T"), 1);  // held by K
  std::vector<std::string> kk = keys;
  kk.push_back("lockfleet:{kept}:latch:K");
  ASSERT_EQ(
      redis_
          ->Eval(internal::ReleaseScript(), kk, {"K", "", "K", "2000", "10000"})
          .elements[0]
          .integer,
      3);
  EXPECT_EQ(presence("L", "T"), 1);  // handed to J, not claimed yet
  EXPECT_EQ(presence("J", "T"), 0);  // off the queue: handed the lock
  ASSERT_EQ(fair("J", "T"), 1);      // J's claim
  const long long l_kept = deadline("L");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(presence("L", "T"), 2);
  EXPECT_EQ(deadline("L"), l_kept);  // not refreshed: its attempt does that
  EXPECT_EQ(fair("L", "T"), 1);      // re-enters J's grant
  EXPECT_EQ(redis_->Execute({"HGET", lock, "count"}).str, "2");
  EXPECT_EQ(redis_->Execute({"LLEN", queue}).integer, 0);
  EXPECT_EQ(deadline("L"), -1);
}

// Locks whose keys share a hash slot share its fence counter: a multi-lock
// granting them in one script reads the clock once, so its second and third
// tokens are the counter + 1 (the SET ... GET found it at the clock): still
// distinct and increasing, the counter at the last.
TEST_F(Lock, OneScriptGrantingLocksOfOneSlotGivesEachItsOwnToken) {
  const std::string counter = "lockfleet:fence:{shared}";
  std::vector<std::string> keys;
  for (const char* name : {"a", "b", "c"}) {
    const std::string base = std::string("lockfleet:{slot-") + name + "}";
    keys.insert(keys.end(),
                {base + ":lock", counter, base + ":queue", base + ":waiters"});
  }
  Reply r = redis_->Eval(internal::MultiAcquireScript(), keys,
                         {"o", "30000", "1", "ha", "1", "hb", "1", "hc", "1"});
  ASSERT_EQ(r.elements.size(), 7u);
  ASSERT_EQ(r.elements[0].integer, 1);
  EXPECT_EQ(r.elements[3].integer, r.elements[1].integer + 1);
  EXPECT_EQ(r.elements[5].integer, r.elements[3].integer + 1);
  EXPECT_EQ(redis_->Execute({"GET", counter}).str,
            std::to_string(r.elements[5].integer));
}

// A claimed hand-off keeps its pending field (count 1 ends the hand-off):
// nothing may read it as still pending. Its holder releases it and hands it
// on; its owner token re-enters it by every path; inspect shows nothing
// pending; the claimant's own late abandon gives back only its hold.
TEST_F(Lock, AClaimedHandOffIsAnOrdinaryGrant) {
  const std::string lock = LockKey("claimed");
  const std::vector<std::string> keys{
      lock, internal::FenceCounterKey("lockfleet", lock),
      "lockfleet:{claimed}:queue", "lockfleet:{claimed}:waiters"};
  auto fair = [&](const std::string& owner, const std::string& hold,
                  const std::string& wid) {
    return redis_->Eval(internal::AcquireFairScript(), keys,
                        {owner, "30000", hold, wid, "30000", "1"});
  };
  auto with_latch = [&](const std::string& id) {
    std::vector<std::string> k = keys;
    k.push_back("lockfleet:{claimed}:latch:" + id);
    return k;
  };
  auto release = [&](const std::string& owner, const std::string& hold) {
    return redis_->Eval(internal::ReleaseScript(), with_latch(hold),
                        {owner, "", hold, "2000", "10000"});
  };
  auto abandon = [&](const std::string& wid, const std::string& hold,
                     const std::string& id) {
    return redis_->Eval(internal::AbandonScript(), with_latch(id),
                        {wid, "2000", "10000", hold});
  };
  ASSERT_EQ(fair("A", "ha", "wa").elements[0].integer, 1);
  ASSERT_EQ(fair("B", "hb", "wb").elements[0].integer, 0);  // B queues
  ASSERT_EQ(fair("C", "hc", "wc").elements[0].integer, 0);  // C behind
  ASSERT_EQ(release("A", "ha").elements[0].integer, 3);     // handed to B
  ASSERT_EQ(fair("B", "hb", "wb").elements[0].integer, 1);  // B claims
  ASSERT_EQ(redis_->Execute({"HGET", lock, "pending"}).str, "wb");
  auto client = NewClient();
  EXPECT_EQ(client->Inspect("claimed").pending_waiter, "");
  EXPECT_EQ(client->Inspect("claimed").hold_count, 1);
  // B's owner token re-enters it: barging, fair under another waiter id,
  // and a multi-lock.
  Reply r = redis_->Eval(internal::AcquireScript(), {keys[0], keys[1]},
                         {"B", "30000", "hb2"});
  EXPECT_EQ(r.elements[0].integer, 1);
  EXPECT_EQ(r.elements[2].integer, 2);
  r = fair("B", "hb3", "wb3");
  EXPECT_EQ(r.elements[0].integer, 1);
  EXPECT_EQ(r.elements[2].integer, 3);
  r = redis_->Eval(internal::MultiAcquireScript(), keys,
                   {"B", "30000", "1", "hb4", "0"});
  EXPECT_EQ(r.elements[0].integer, 1);
  EXPECT_EQ(r.elements[2].integer, 4);
  // Another owner is refused, and queues behind C.
  EXPECT_EQ(fair("D", "hd", "wd").elements[0].integer, 0);
  // B's late abandon of its wait (no hold of that call): nothing to pass
  // on. With its hold: that hold given back, the grant still held.
  EXPECT_EQ(abandon("wb", "", "ab1").elements[0].integer, 0);
  EXPECT_EQ(redis_->Execute({"HGET", lock, "owner"}).str, "B");
  r = abandon("wb3", "hb3", "ab2");
  EXPECT_EQ(r.elements[0].integer, 2);
  EXPECT_EQ(r.elements[1].integer, 3);
  EXPECT_EQ(release("B", "hb2").elements[0].integer, 2);
  EXPECT_EQ(release("B", "hb4").elements[0].integer, 2);
  // The last hold released: handed on to C, the next in the queue.
  r = release("B", "hb");
  ASSERT_EQ(r.elements[0].integer, 3);
  EXPECT_EQ(r.elements[1].str, "wc");
  EXPECT_EQ(client->Inspect("claimed").pending_waiter, "wc");
}

// The queue's two keys outlive every queued waiter's presence deadline,
// waiters with different presence windows too, while a waiter that joins a
// queue whose keys live long enough writes neither.
TEST_F(Lock, TheQueueOutlivesEveryPresenceWithoutARefreshOnEveryCall) {
  const std::string lock = LockKey("keep");
  const std::vector<std::string> keys{
      lock, internal::FenceCounterKey("lockfleet", lock),
      "lockfleet:{keep}:queue", "lockfleet:{keep}:waiters"};
  // `who` joins or refreshes with `presence` ms, the two keys living
  // `before` ms (0: as they are) first; then both keys' PTTLs.
  auto fair = [&](const std::string& who, const std::string& presence,
                  const char* before = nullptr) {
    for (int k : {2, 3})
      if (before) redis_->Execute({"PEXPIRE", keys[k], before});
    Reply r = redis_->Eval(internal::AcquireFairScript(), keys,
                           {who, "30000", "h" + who, "w" + who, presence, "1"});
    EXPECT_EQ(r.elements[0].integer, who == "A" ? 1 : 0) << who;
    return std::pair{redis_->Execute({"PTTL", keys[2]}).integer,
                     redis_->Execute({"PTTL", keys[3]}).integer};
  };
  fair("A", "30000");  // A holds
  // B (presence 60 s) makes the queue: both keys live 120 s.
  auto [queue, waiters] = fair("B", "60000");
  EXPECT_GT(queue, 110'000);
  EXPECT_GT(waiters, 110'000);
  // C (10 s) joins: the keys live long enough; not shortened.
  auto [queue2, waiters2] = fair("C", "10000");
  EXPECT_LE(queue2, queue);
  EXPECT_GT(queue2, 110'000);
  EXPECT_GT(waiters2, 110'000);
  // The keys run low (as if 100 s went by): D (presence 60 s) would
  // outlive them, so both are extended to 120 s.
  std::tie(queue, waiters) = fair("D", "60000", "20000");
  EXPECT_GT(queue, 110'000);
  EXPECT_GT(waiters, 110'000);
  // A refresh of C (10 s) with the keys at 20 s: enough, untouched.
  std::tie(queue, waiters) = fair("C", "10000", "20000");
  EXPECT_LE(queue, 20'000);
  EXPECT_GT(queue, 15'000);
  EXPECT_LE(waiters, 20'000);
  // ... and of B (60 s): extended to 120 s, never less than its deadline.
  std::tie(queue, waiters) = fair("B", "60000");
  EXPECT_GT(queue, 110'000);
  EXPECT_GT(waiters, 110'000);
}

TEST_F(Lock, InspectReportsEverything) {
  auto client = NewClient();
  EXPECT_FALSE(client->Inspect("i").locked);
  EXPECT_EQ(client->Inspect("i").last_fence, 0);
  AcquireResult r1 = client->TryAcquire("i", {.lease = milliseconds(5000)});
  AcquireResult r2 = client->TryAcquire("i", {.lease = milliseconds(5000)});
  LockInfo info = client->Inspect("i");
  EXPECT_TRUE(info.locked);
  EXPECT_EQ(info.hold_count, 2);
  EXPECT_EQ(info.fence, r1.lease.fence());
  EXPECT_EQ(info.last_fence, r1.lease.fence());
  EXPECT_GT(info.ttl, milliseconds(0));
  EXPECT_LE(info.ttl, milliseconds(5000));
}

TEST_F(Lock, KeysShareOneHashTagAndPrefixIsConfigurable) {
  auto client = NewClient({.key_prefix = "shop"});
  AcquireResult r = client->TryAcquire("sku:9");
  ASSERT_TRUE(r);
  EXPECT_EQ(redis_->Execute({"EXISTS", "shop:{sku:9}:lock"}).integer, 1);
  // The fence counter of the lock's hash slot: "shop:fence:{<tag>}".
  Reply keys = redis_->Execute({"KEYS", "shop:fence:{*}"});
  ASSERT_EQ(keys.elements.size(), 1u);
  const std::string counter = keys.elements[0].str;
  EXPECT_EQ(redis_->Execute({"GET", counter}).str,
            std::to_string(r.lease.fence()));
  EXPECT_EQ(redis_->Execute({"PTTL", counter}).integer, -1);  // never expires
  // The default prefix is a separate namespace.
  EXPECT_TRUE(NewClient()->TryAcquire("sku:9"));
}

TEST_F(Lock, OddNamesWork) {
  auto client = NewClient();
  std::string binary("a\0b\xff{x}", 7);
  for (const std::string& name :
       {std::string("with spaces"), std::string("{braces}}{"), binary,
        std::string(kMaxLockNameBytes, 'n')}) {
    AcquireResult r = client->TryAcquire(name);
    ASSERT_TRUE(r) << name.size();
    EXPECT_TRUE(client->Inspect(name).locked);
    EXPECT_EQ(r.lease.Release(), ReleaseStatus::kReleased);
  }
}

TEST_F(Lock, BadNamesAndOptionsAreInvalidArguments) {
  auto client = NewClient();
  auto code_of = [](auto&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::kInternal;
  };
  EXPECT_EQ(code_of([&] { client->TryAcquire(""); }),
            ErrorCode::kInvalidArgument);
  // An empty hash tag: the lock's keys would spread over Cluster slots.
  EXPECT_EQ(code_of([&] { client->AcquireFor("}x", milliseconds(10)); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { client->ForceUnlock("}"); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] {
              client->TryAcquire(std::string(kMaxLockNameBytes + 1, 'x'));
            }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(
      code_of([&] { client->TryAcquire("x", {.lease = milliseconds(0)}); }),
      ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { LockClient(NewRedis(), {.key_prefix = "a{b"}); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] {
              LockClient(NewRedis(), {.default_lease = milliseconds(5)});
            }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { LockClient(nullptr); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] {
              LockClient(NewRedis(),
                         {.client_id = "mine", .client_id_prefix = "host:1:"});
            }),
            ErrorCode::kInvalidArgument);
  // Fair-mode windows: a claim must outlast a park (presence/3) and not
  // outlast the presence window (a dead waiter costs one window at most).
  EXPECT_EQ(code_of([&] {
              LockClient(NewRedis(), {.presence_window = milliseconds(3000),
                                      .claim_window = milliseconds(1000)});
            }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] {
              LockClient(NewRedis(), {.presence_window = milliseconds(3000),
                                      .claim_window = milliseconds(3001)});
            }),
            ErrorCode::kInvalidArgument);
}

TEST_F(Lock, AClientIdPrefixStaysInFrontOfItsRandomPart) {
  LockClient a(NewRedis(), {.client_id_prefix = "host-7:42:"});
  LockClient b(NewRedis(), {.client_id_prefix = "host-7:42:"});
  EXPECT_EQ(a.client_id().rfind("host-7:42:", 0), 0u) << a.client_id();
  EXPECT_EQ(a.client_id().size(), std::string("host-7:42:").size() + 16);
  EXPECT_NE(a.client_id(), b.client_id());  // the same prefix, still unique
  AcquireResult r = a.TryAcquire("prefixed");
  ASSERT_TRUE(r);
  EXPECT_EQ(a.Inspect("prefixed").owner.rfind(a.client_id() + ":", 0), 0u);
  EXPECT_EQ(r.lease.Release(), ReleaseStatus::kReleased);
}

TEST_F(Lock, FakeClockDecidesValidityWithoutSleeping) {
  auto clock = std::make_shared<FakeClock>();
  auto client = NewClient({.clock = clock});
  AcquireResult r = client->TryAcquire("fc", {.lease = milliseconds(10000)});
  ASSERT_TRUE(r);
  EXPECT_FALSE(r.lease.lost());
  EXPECT_LE(r.lease.valid_until(), clock->Now() + milliseconds(10000));
  EXPECT_GT(r.lease.valid_until(), clock->Now() + milliseconds(9000));
  clock->Advance(seconds(11));
  EXPECT_TRUE(r.lease.lost());  // past its lease: presumed lost
}

TEST_F(Lock, RedisDownIsAnErrorNotAContention) {
  RedisOptions o;
  o.url = "unix:///nonexistent/lockfleet.sock";
  LockClient client(std::make_shared<RedisClient>(o));
  try {
    client.TryAcquire("x");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kRedisUnavailable);
    EXPECT_NE(std::string(e.what()).find("nonexistent"), std::string::npos);
  }
}

TEST_F(Lock, ReleaseWhileRedisIsDownThrowsAndIsCounted) {
  auto client = NewClient();
  AcquireResult r = client->TryAcquire("down", {.lease = milliseconds(60000)});
  ASSERT_TRUE(r);
  server_->Stop();
  EXPECT_THROW(r.lease.Release(), Error);
  EXPECT_FALSE(r.lease.held());
  EXPECT_EQ(client->stats().release_failures, 1u);
  server_->Start();
}

}  // namespace
}  // namespace lockfleet::testing
