// Retry safety: a script the lock client runs a second time after a
// connection failure (EvalRetryOnce) must be idempotent. hiredis cannot tell
// whether a command whose connection broke reached the server, so the
// retry may run on top of a first try that did everything and only lost its
// reply — by then the lock may already be someone else's.
//
// Each test puts a ReplyDropProxy between the client under test and Redis,
// makes that client's first try run with its reply lost, and checks that the
// state in Redis is what one run would have left. How to write one:
//   - build the client under test with NewProxiedClient(); everything else
//     (other holders, waiters, inspection) talks to Redis directly;
//   - arm proxy_->DropNextReply(marker) right before the call, with a marker
//     only that call sends: its lock name or owner token. The watchdog's
//     renewals carry both, so give the proxied client explicit leases (or a
//     name nothing else of it touches);
//   - after the call: proxy_->dropped() == 1 (the first try did lose its
//     reply), then check Redis through redis_ or a direct client.
// StallNextReply(marker, hold) makes the first try time out instead
// (kCommandTimeout) while still running on the server.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>

#include "lock_fixture.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/multi_lock.h"
#include "lockfleet/lockcore/rwlock.h"
#include "lockfleet/lockcore/semaphore.h"
#include "scripts.h"
#include "support/fake_clock.h"
#include "support/loopback_bus.h"
#include "support/reply_drop_proxy.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class RetrySafety : public LockTest {
 protected:
  // The proxied client's command timeout: a stalled reply becomes a client
  // timeout (and a retry) after this long.
  static constexpr milliseconds kCommandTimeout{1000};

  void SetUp() override {
    LockTest::SetUp();
    proxy_ = std::make_unique<ReplyDropProxy>(server_->url());
  }
  void TearDown() override { proxy_.reset(); }

  std::shared_ptr<RedisClient> NewProxiedRedis() {
    RedisOptions o;
    o.url = proxy_->url();
    o.command_timeout = kCommandTimeout;
    return std::make_shared<RedisClient>(o);
  }
  // A LockClient whose every Redis command goes through proxy_.
  std::unique_ptr<LockClient> NewProxiedClient(LockClientOptions o = {}) {
    return std::make_unique<LockClient>(NewProxiedRedis(), std::move(o));
  }

  // Claim and presence windows long enough that no hand-off or queue entry
  // below lapses on a loaded machine while a test looks at it.
  static LockClientOptions LongWindows(LockClientOptions o = {}) {
    o.presence_window = seconds(60);
    o.claim_window = seconds(30);
    return o;
  }

  // The SHA1 of `script`, loaded into Redis: the marker of its EVALSHA (a
  // loaded script is never answered NOSCRIPT, which the proxy would let
  // through to an EVAL that does not carry the SHA).
  std::string LoadedSha(const Script& script) {
    return redis_->Execute({"SCRIPT", "LOAD", script.source()}).str;
  }

  // `client` receives `bus`'s events while the returned object lives.
  struct Subscription {
    LoopbackBus& bus;
    LockClient* client;
    ~Subscription() { bus.Unsubscribe(client); }
  };
  static Subscription Subscribe(LoopbackBus& bus, LockClient* client) {
    bus.Subscribe(client);
    return {bus, client};
  }

  void ForceUnlockWhoseReplyWasLost(bool expect_grant);
  // `in_full`: W's lease is the watchdog's, so the lock is handed to it in
  // full (its hold), else W has an explicit lease and a hand-off to claim.
  void AbandonWhoseReplyWasLost(bool handed_off, bool in_full = false);
  void GranteeWhoseReplyWasLostIsOneHold(bool in_full);

  std::unique_ptr<ReplyDropProxy> proxy_;
};

// The release's first try frees the lock and, in the same script, hands it
// to the queued waiter B; its reply is lost. The retry, on a fresh
// connection, finds B's grant and must leave it alone; A's hold was given
// back, so A is told kReleased.
TEST_F(RetrySafety, ReleaseWhoseReplyWasLostLeavesTheHandOffAlone) {
  LoopbackBus bus;  // A's unlock event wakes B at once
  auto bus_ptr =
      std::shared_ptr<UnlockPublisher>(&bus, [](UnlockPublisher*) {});
  auto a = NewProxiedClient({.publisher = bus_ptr});
  auto b = NewClient();
  auto inspector = NewClient();
  const Subscription subscription = Subscribe(bus, b.get());

  AcquireResult held =
      a->TryAcquire("handoff", {.lease = seconds(60), .owner = "retry:a"});
  ASSERT_TRUE(held);
  const int64_t a_fence = held.lease.fence();
  auto waiter = std::async(std::launch::async, [&] {
    return b->AcquireFor("handoff", seconds(60), {.owner = "retry:b"});
  });
  ASSERT_TRUE(WaitUntil(
      [&] { return inspector->Inspect("handoff").queue.size() == 1; }));

  const int connections = proxy_->accepted();
  proxy_->DropNextReply("retry:a");
  const ReleaseStatus released = held.lease.Release();
  EXPECT_EQ(released, ReleaseStatus::kReleased) << ReleaseStatusName(released);
  EXPECT_EQ(proxy_->dropped(), 1);  // the first try lost its reply ...
  EXPECT_GT(proxy_->accepted(), connections);  // ... the retry reconnected

  LockInfo info = inspector->Inspect("handoff");
  EXPECT_EQ(info.owner, "retry:b");  // handed off (or claimed already)
  EXPECT_GT(info.fence, a_fence);
  AcquireResult got = waiter.get();
  ASSERT_TRUE(got);
  EXPECT_EQ(got.lease.fence(), info.fence);
  EXPECT_EQ(a->stats().releases, 1u);
  EXPECT_EQ(a->stats().release_failures, 0u);
  EXPECT_EQ(got.lease.Release(), ReleaseStatus::kReleased);
}

// The grantee's first command after the hand-off loses its reply: the claim
// (a hand-off to claim, `in_full` false: an explicit lease and a
// caller-given token) or the read confirming a hand-off in full (the
// thread's own token and a watchdog lease). A claim's retry finds nothing
// pending any more, and a lost read is ridden out by a full attempt; either
// re-enters the grant with the same hold id: one hold, so one release frees
// the lock (a second hold would keep it for a whole lease, with nobody
// renewing it).
void RetrySafety::GranteeWhoseReplyWasLostIsOneHold(bool in_full) {
  const std::string name = in_full ? "confirm" : "claim";
  LoopbackBus bus;  // A's unlock event wakes B at once
  auto bus_ptr =
      std::shared_ptr<UnlockPublisher>(&bus, [](UnlockPublisher*) {});
  auto a = NewClient({.publisher = bus_ptr});
  // No spinning: B's checks would claim through another script, covered in
  // spin_test.
  auto b = NewProxiedClient(
      LongWindows({.spin_max_hold = std::chrono::milliseconds(0)}));
  auto inspector = NewClient();
  const Subscription subscription = Subscribe(bus, b.get());

  AcquireResult held = a->TryAcquire(name, {.owner = "retry:a"});
  ASSERT_TRUE(held);
  AcquireOptions options;
  if (!in_full) {
    options.lease = seconds(60);
    options.owner = "retry:b";
  }
  auto waiter = std::async(std::launch::async, [&] {
    return b->AcquireFor(name, seconds(60), options);
  });
  ASSERT_TRUE(
      WaitUntil([&] { return inspector->Inspect(name).queue.size() == 1; }));
  // B's next command: the read of its grant, or the claim.
  proxy_->DropNextReply(in_full ? "HMGET" : "retry:b");
  ASSERT_EQ(held.lease.Release(), ReleaseStatus::kReleased);
  AcquireResult got = waiter.get();
  ASSERT_TRUE(got) << got.last_error;
  EXPECT_EQ(proxy_->dropped(), 1);
  LockInfo info = inspector->Inspect(name);
  EXPECT_EQ(info.owner, got.lease.owner());
  if (!in_full) {
    EXPECT_EQ(info.owner, "retry:b");
  }
  EXPECT_EQ(info.hold_count, 1);
  EXPECT_TRUE(info.pending_waiter.empty());
  EXPECT_EQ(info.fence, got.lease.fence());
  EXPECT_EQ(got.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(inspector->Inspect(name).locked);
}

TEST_F(RetrySafety, ConfirmWhoseReplyWasLostIsOneHold) {
  GranteeWhoseReplyWasLostIsOneHold(/*in_full=*/true);
}

TEST_F(RetrySafety, ClaimWhoseReplyWasLostIsOneHold) {
  GranteeWhoseReplyWasLostIsOneHold(/*in_full=*/false);
}

// Latches: a count-down whose reply was lost, retried, counts once — the
// latch never opens early — and the one that opened it still learns so
// (and tells the other processes); a set whose reply was lost is still
// this call's.
TEST_F(RetrySafety, CountDownWhoseReplyWasLostCountsOnce) {
  auto client = NewProxiedClient();
  auto inspector = NewClient();
  ASSERT_TRUE(inspector->Latch("twice").TrySetCount(2));
  proxy_->DropNextReply("{twice}:countdown");
  const CountDownResult r = client->Latch("twice").CountDown("shard-1");
  EXPECT_EQ(proxy_->dropped(), 1);
  EXPECT_EQ(r.status, CountDownStatus::kCounted);
  EXPECT_EQ(r.remaining, 1);
  EXPECT_EQ(inspector->Latch("twice").Count(), 1) << "counted twice";
}

TEST_F(RetrySafety, OpeningCountDownWhoseReplyWasLostStillOpensAndTells) {
  LoopbackBus bus;
  auto bus_ptr =
      std::shared_ptr<UnlockPublisher>(&bus, [](UnlockPublisher*) {});
  auto client = NewProxiedClient({.publisher = bus_ptr});
  auto awaiter = NewClient({.park_cap = std::chrono::milliseconds(600000)});
  const Subscription subscription = Subscribe(bus, awaiter.get());
  ASSERT_TRUE(awaiter->Latch("last").TrySetCount(1));
  auto awaited = std::async(std::launch::async, [&] {
    return awaiter->Latch("last").AwaitFor(seconds(60));
  });
  // It found the latch counting and parks.
  ASSERT_TRUE(WaitUntil([&] { return awaiter->stats().latch_parks >= 1; }));
  proxy_->DropNextReply("{last}:countdown");
  EXPECT_EQ(client->Latch("last").CountDown("only").status,
            CountDownStatus::kOpened);
  EXPECT_EQ(proxy_->dropped(), 1);
  // Only the event can wake it within the test (a 600 s park).
  EXPECT_EQ(awaited.get(), AwaitStatus::kOpened);
}

TEST_F(RetrySafety, LatchSetWhoseReplyWasLostIsStillThisCalls) {
  auto client = NewProxiedClient();
  proxy_->DropNextReply("{set}:countdown");
  EXPECT_TRUE(client->Latch("set").TrySetCount(3));
  EXPECT_EQ(proxy_->dropped(), 1);
  EXPECT_FALSE(client->Latch("set").TrySetCount(3)) << "another call";
  EXPECT_EQ(client->Latch("set").Count(), 3);
}

// Semaphores: an acquisition, a release and an AddPermits whose replies
// were lost are each one change; a try that runs after its call gave up
// creates no permit set nobody holds.
TEST_F(RetrySafety, PermitAcquireWhoseReplyWasLostIsOneSet) {
  auto client = NewProxiedClient();
  auto inspector = NewClient();
  inspector->Semaphore("sem-a").SetPermits(3);
  proxy_->DropNextReply(LoadedSha(internal::SemAcquireScript()));
  PermitResult got =
      client->Semaphore("sem-a").TryAcquire(2, {.lease = seconds(60)});
  EXPECT_EQ(proxy_->dropped(), 1);
  ASSERT_TRUE(got);
  SemaphoreInfo info = inspector->Semaphore("sem-a").Inspect();
  EXPECT_EQ(info.used, 2) << "the retry granted a second set";
  EXPECT_EQ(info.holders, 1);
  // Its release leaves a tombstone (a try of it may still run late).
  EXPECT_EQ(got.permits.Release(), ReleaseStatus::kReleased);
  EXPECT_EQ(inspector->Semaphore("sem-a").Inspect().used, 0);
}

TEST_F(RetrySafety, PermitReleaseAndAddWhoseRepliesWereLostActOnce) {
  auto client = NewProxiedClient();
  auto inspector = NewClient();
  inspector->Semaphore("sem-r").SetPermits(1);
  PermitResult got =
      client->Semaphore("sem-r").TryAcquire(1, {.lease = seconds(60)});
  ASSERT_TRUE(got);
  proxy_->DropNextReply(LoadedSha(internal::SemReleaseScript()));
  EXPECT_EQ(got.permits.Release(), ReleaseStatus::kReleased)
      << "the retry returns the first try's answer";
  EXPECT_EQ(proxy_->dropped(), 1);
  proxy_->DropNextReply(LoadedSha(internal::SemAddScript()));
  EXPECT_EQ(client->Semaphore("sem-r").AddPermits(2), 3);
  EXPECT_EQ(proxy_->dropped(), 2);
  EXPECT_EQ(inspector->Semaphore("sem-r").Inspect().permits, 3)
      << "added twice";
}

TEST_F(RetrySafety, PermitTryThatRunsAfterItsGiveUpCreatesNoSet) {
  auto client = NewProxiedClient();
  auto inspector = NewClient();
  inspector->Semaphore("sem-late").SetPermits(2);
  const std::string sha = LoadedSha(internal::SemAcquireScript());
  // Both tries held back 3 s: each times out (1 s), the call gives up and
  // its give-back (not delayed) runs before either.
  proxy_->DelayNextRequest(sha, seconds(3));
  proxy_->DelayNextRequest(sha, seconds(3));
  try {
    client->Semaphore("sem-late").TryAcquire(1, {.lease = seconds(60)});
    ADD_FAILURE() << "the delayed tries did not time out";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kRedisTimeout) << e.what();
  }
  ASSERT_TRUE(WaitUntil([&] { return proxy_->dropped() == 2; }));
  // The late tries ran: the tombstone refused them.
  const SemaphoreInfo info = inspector->Semaphore("sem-late").Inspect();
  EXPECT_EQ(info.used, 0) << "a set nobody holds, for its whole lease";
  EXPECT_EQ(info.waiters, 0);
  EXPECT_TRUE(inspector->Semaphore("sem-late").TryAcquire(2));
}

// A try-only call whose first try was held up (it timed out) and whose
// retry was refused ends without an error; the first try may still run.
// Found by the model (model/README.md, semaphore finding 1): the call must
// leave its tombstone anyway.
TEST_F(RetrySafety, PermitTryWhoseRetryWasRefusedLeavesATombstoneToo) {
  auto client = NewProxiedClient();
  auto inspector = NewClient();
  inspector->Semaphore("sem-try").SetPermits(2);
  PermitResult full = inspector->Semaphore("sem-try").TryAcquire(2);
  ASSERT_TRUE(full);
  proxy_->DelayNextRequest(LoadedSha(internal::SemAcquireScript()), seconds(3));
  const PermitResult refused =
      client->Semaphore("sem-try").TryAcquire(1, {.lease = seconds(60)});
  EXPECT_EQ(refused.status, AcquireStatus::kTimedOut) << "the retry: 0 free";
  ASSERT_EQ(full.permits.Release(), ReleaseStatus::kReleased);
  // The held-up first try runs now, with both permits free.
  ASSERT_TRUE(WaitUntil([&] { return proxy_->dropped() == 1; }));
  EXPECT_EQ(inspector->Semaphore("sem-try").Inspect().used, 0)
      << "a set for a call that ended, for its whole lease";
}

// Read-write locks: a write acquisition whose reply was lost is one hold
// with one token (its retry re-claims it, it does not count the owner
// twice), and a read try that runs after its call gave up creates no hold
// nobody renews — which would keep every writer out for its whole lease.
TEST_F(RetrySafety, RwWriteWhoseReplyWasLostIsOneHold) {
  auto client = NewProxiedClient();
  auto inspector = NewClient();
  const std::string sha = LoadedSha(internal::RwAcquireScript());
  proxy_->DropNextReply(sha);
  RwResult w = client->ReadWriteLock("rw-a").TryAcquire(RwMode::kWrite,
                                                        {.lease = seconds(60)});
  EXPECT_EQ(proxy_->dropped(), 1);
  ASSERT_TRUE(w);
  RwInfo info = inspector->ReadWriteLock("rw-a").Inspect();
  ASSERT_EQ(info.holders.size(), 1u) << "the retry granted a second hold";
  EXPECT_EQ(info.holders[0].token, w.lease.token());
  EXPECT_EQ(info.last_token, w.lease.token()) << "one token, not two";
  const int64_t token = w.lease.token();
  EXPECT_EQ(w.lease.Release(), ReleaseStatus::kReleased);
  // The owner's count went back to 0: it is not taken for a holder (whose
  // write would then be refused as an upgrade, or granted past the queue).
  RwResult r = inspector->ReadWriteLock("rw-a").TryAcquire(RwMode::kRead);
  ASSERT_TRUE(r);
  EXPECT_EQ(r.lease.token(), token);
  r.lease.Release();
  const Reply owners = redis_->Execute({"HKEYS", "lockfleet:{rw-a}:rwlock"});
  for (const Reply& f : owners.elements) {
    EXPECT_NE(f.str.rfind("n:", 0), 0u) << f.str << " left behind";
    EXPECT_NE(f.str.rfind("x:", 0), 0u) << f.str << " left behind";
  }
}

TEST_F(RetrySafety, RwTryThatRunsAfterItsGiveUpCreatesNoHold) {
  auto client = NewProxiedClient();
  auto inspector = NewClient();
  const std::string sha = LoadedSha(internal::RwAcquireScript());
  proxy_->DelayNextRequest(sha, seconds(3));
  proxy_->DelayNextRequest(sha, seconds(3));
  try {
    client->ReadWriteLock("rw-late").TryAcquire(RwMode::kRead,
                                                {.lease = seconds(60)});
    ADD_FAILURE() << "the delayed tries did not time out";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kRedisTimeout) << e.what();
  }
  ASSERT_TRUE(WaitUntil([&] { return proxy_->dropped() == 2; }));
  const RwInfo info = inspector->ReadWriteLock("rw-late").Inspect();
  EXPECT_TRUE(info.holders.empty()) << "a hold nobody renews, for its lease";
  EXPECT_EQ(info.waiters, 0);
  EXPECT_TRUE(inspector->ReadWriteLock("rw-late").TryAcquire(RwMode::kWrite));
}

// A waiting call whose acquire tries were granted on the server but lost
// their replies, and that then gives up, gives those holds back: the lock
// is free at once, not blocked for a whole lease by holds nobody renews.
TEST_F(RetrySafety, GiveUpAfterLostAcquireRepliesFreesTheLock) {
  auto waiter = NewProxiedClient();
  auto other = NewClient();
  ASSERT_FALSE(waiter->Inspect("lost").locked);  // it has reached Redis
  // Every fair acquire the waiter sends (its EVALSHA names the script's
  // SHA1; nothing else it sends does) runs, and its reply is lost.
  const std::string sha =
      redis_
          ->Execute({"SCRIPT", "LOAD", internal::AcquireFairScript().source()})
          .str;
  for (int i = 0; i < 64; ++i) proxy_->DropNextReply(sha);
  AcquireResult r = waiter->AcquireFor("lost", milliseconds(500));
  EXPECT_EQ(r.status, AcquireStatus::kTimedOut);
  EXPECT_FALSE(r.last_error.empty());
  EXPECT_GE(proxy_->dropped(), 2) << "no try ran with its reply lost";
  LockInfo info = other->Inspect("lost");
  EXPECT_FALSE(info.locked)
      << "held by " << info.owner << " for " << info.ttl.count() << " ms";
  EXPECT_TRUE(other->TryAcquire("lost"));
}

// A try runs (a grant) but its reply comes back unreadable: a protocol
// error, not a broken connection, yet it says just as little about whether
// the script ran (a TLS record error looks the same). The client must count
// the grant as possible and give it back, or the lock sits out its lease.
TEST_F(RetrySafety, TryWhoseReplyIsUnreadableGivesBackItsGrant) {
  auto a = NewProxiedClient();
  auto inspector = NewClient();
  ASSERT_FALSE(a->Inspect("unreadable").locked);  // it has reached Redis
  proxy_->GarbleNextReply("unreadable");
  try {
    const AcquireResult r =
        a->TryAcquire("unreadable", {.lease = std::chrono::seconds(60)});
    ADD_FAILURE() << "acquired through an unreadable reply: "
                  << static_cast<int>(r.status);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kRedisProtocol) << e.what();
  }
  EXPECT_EQ(proxy_->dropped(), 1) << "the try's reply was not garbled";
  const LockInfo info = inspector->Inspect("unreadable");
  EXPECT_FALSE(info.locked)
      << "held by " << info.owner << " for " << info.ttl.count() << " ms";
  EXPECT_TRUE(inspector->TryAcquire("unreadable"));
}

// The first try of an acquire runs (granting a hold) but its reply is
// held back; before the retry, Redis fills up, so the retry is refused
// (OOM: kRedisBusy), not lost. That error says nothing about the first try,
// so the client must still count its hold as possibly granted and give it
// back. Else the lock keeps a hold nobody releases: it stays blocked for
// the lease, and every later acquire of that owner re-enters it, so its
// releases never free the lock (the chaos suite saw 4,976 such re-grants
// after a durable Redis restart answered LOADING to the retries).
TEST_F(RetrySafety, AcquireWhoseRetryIsRefusedStillGivesBackTheFirstTry) {
  auto a = NewProxiedClient();
  auto inspector = NewClient();
  ASSERT_FALSE(a->Inspect("refused").locked);  // it has reached Redis
  for (bool wait : {false, true}) {
    SCOPED_TRACE(wait ? "AcquireFor" : "TryAcquire");
    proxy_->StallNextReply("refused:a", seconds(3));
    auto first = std::async(std::launch::async, [&] {
      const AcquireOptions o{.lease = seconds(60), .owner = "refused:a"};
      // A waiting call rides out the refusals until its deadline.
      return wait ? a->AcquireFor("refused", seconds(2), o)
                  : a->TryAcquire("refused", o);
    });
    // The first try ran: the lock is A's. Fill Redis before the reply is
    // cut (at A's 1 s command timeout).
    ASSERT_TRUE(
        WaitUntil([&] { return inspector->Inspect("refused").locked; }));
    redis_->Execute({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
    redis_->Execute({"CONFIG", "SET", "maxmemory", "1"});
    if (wait) {
      AcquireResult r = first.get();
      EXPECT_EQ(r.status, AcquireStatus::kTimedOut);
      EXPECT_NE(r.last_error.find("OOM"), std::string::npos) << r.last_error;
    } else {
      try {
        first.get();
        ADD_FAILURE() << "the retry was not refused";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kRedisBusy) << e.what();
      }
    }
    redis_->Execute({"CONFIG", "SET", "maxmemory", "0"});
    LockInfo info = inspector->Inspect("refused");
    EXPECT_FALSE(info.locked)
        << "the lost hold was not given back: held by " << info.owner << " ("
        << info.hold_count << " holds)";
    // Re-granted to the same owner, one release frees it.
    AcquireResult again =
        a->TryAcquire("refused", {.lease = seconds(60), .owner = "refused:a"});
    ASSERT_TRUE(again);
    EXPECT_EQ(again.lease.Release(), ReleaseStatus::kReleased);
    EXPECT_FALSE(inspector->Inspect("refused").locked);
  }
  EXPECT_EQ(proxy_->dropped(), 2);
}

// A script that fails while running keeps the writes it made before the
// failure (Redis does not roll scripts back): its error reply does not say
// "did not run" as a refusal before running does (BUSY, OOM, NOSCRIPT...).
// Here a re-entry adds its hold, then trips over a waiters key of the wrong
// type: the call fails, and the hold it added must be given back, or the
// owner's releases would never free the lock.
TEST_F(RetrySafety, AScriptThatFailsWhileRunningGivesBackWhatItGranted) {
  auto a = NewClient();
  AcquireResult first = a->TryAcquire("wrongtype", {.owner = "wrongtype:a"});
  ASSERT_TRUE(first);
  const std::string lock = LockKey("wrongtype");
  redis_->Execute({"SET", "lockfleet:{wrongtype}:waiters", "not a hash"});
  try {
    a->TryAcquire("wrongtype", {.owner = "wrongtype:a"});
    ADD_FAILURE() << "the re-entry did not fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kRedisScript) << e.what();
    EXPECT_NE(std::string(e.what()).find("WRONGTYPE"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(redis_->Execute({"HGET", lock, "count"}).str, "1")
      << "the failed re-entry's hold was left in the lock";
  redis_->Execute({"DEL", "lockfleet:{wrongtype}:waiters"});
  EXPECT_EQ(first.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_EQ(redis_->Execute({"EXISTS", lock}).integer, 0);
}

// A force-unlock's first try frees A's grant and, in the same script, hands
// the lock to the queued waiter B; its reply is lost. The retry must return
// the first try's latched reply — A's grant removed — and leave B's grant
// alone. Without the latch the retry removed B's grant as well (and named
// B as the grant it removed; with an expected grant it reported a
// mismatch instead of A's removal).
void RetrySafety::ForceUnlockWhoseReplyWasLost(bool expect_grant) {
  auto a = NewClient();
  auto b = NewClient(LongWindows());
  auto inspector = NewClient();
  auto admin = NewProxiedClient(LongWindows());  // its hand-off's claim window
  const std::string sha = LoadedSha(internal::ForceUnlockScript());

  AcquireResult held =
      a->TryAcquire("force", {.lease = seconds(60), .owner = "force:a"});
  ASSERT_TRUE(held);
  const int64_t a_fence = held.lease.fence();
  auto waiter = std::async(std::launch::async, [&] {
    return b->AcquireFor("force", seconds(60), {.owner = "force:b"});
  });
  ASSERT_TRUE(
      WaitUntil([&] { return inspector->Inspect("force").queue.size() == 1; }));

  ForceUnlockOptions expect;
  if (expect_grant)
    expect = {.expect_owner = "force:a", .expect_fence = a_fence};
  proxy_->DropNextReply(sha);
  const ForceUnlockResult r = admin->ForceUnlock("force", expect);
  EXPECT_EQ(proxy_->dropped(), 1);  // the first try ran, its reply lost
  EXPECT_EQ(proxy_->armed(), 0);
  // The first try's answer: A's grant was removed (and handed on).
  EXPECT_TRUE(r.was_locked);
  EXPECT_FALSE(r.mismatch);
  EXPECT_EQ(r.previous_owner, "force:a");
  EXPECT_EQ(r.previous_fence, a_fence);
  EXPECT_EQ(admin->stats().force_unlocks, 1u);

  // B's grant (pending, or claimed already) is the one the first try made,
  // and the last one issued: the retry removed nothing and granted nothing.
  LockInfo info = inspector->Inspect("force");
  EXPECT_EQ(info.owner, "force:b");
  EXPECT_GT(info.fence, a_fence);
  EXPECT_EQ(info.fence, info.last_fence);
  EXPECT_TRUE(info.queue.empty());
  AcquireResult got = waiter.get();
  ASSERT_TRUE(got);
  EXPECT_EQ(got.lease.fence(), info.fence);
  info = inspector->Inspect("force");
  EXPECT_EQ(info.owner, "force:b");
  EXPECT_EQ(info.fence, got.lease.fence());
  EXPECT_EQ(info.hold_count, 1);
  EXPECT_TRUE(info.pending_waiter.empty());
  EXPECT_EQ(held.lease.Release(), ReleaseStatus::kNotOwner);
  EXPECT_EQ(got.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(inspector->Inspect("force").locked);
}

TEST_F(RetrySafety, ForceUnlockWhoseReplyWasLostLeavesTheHandOffAlone) {
  ForceUnlockWhoseReplyWasLost(false);
}

TEST_F(RetrySafety, ExpectingForceUnlockWhoseReplyWasLostReportsTheFirstTry) {
  ForceUnlockWhoseReplyWasLost(true);
}

// A fair waiter W whose call times out while queued ahead of C — with the
// lock handed to W and not yet claimed, or still A's — abandons through the
// proxy: the abandon's first try runs (passing W's grant on to C, or only
// leaving the queue) and its reply is lost. The retry must not act again: C
// keeps the one grant made for it (no second hand-off, no freed lock), and
// when a grant was passed on, W still announces it once — the latched reply
// is the only record of that hand-off the retry can return (without the
// latch it answered "nothing pending", and C was neither woken nor told).
void RetrySafety::AbandonWhoseReplyWasLost(bool handed_off, bool in_full) {
  auto a = NewClient(LongWindows());
  auto c = NewClient(LongWindows());
  auto inspector = NewClient();
  auto recorder = std::make_shared<RecordingPublisher>();
  // W's clock stands still until the hook moves it past W's deadline: the
  // call times out exactly there, and the abandon's retry is never out of
  // time (its budget is kGiveUpBudget of W's clock).
  auto clock = std::make_shared<FakeClock>();
  LockClientOptions wo = LongWindows();
  wo.clock = clock;
  wo.publisher = recorder;
  auto w = NewProxiedClient(wo);
  ASSERT_FALSE(w->Inspect("abandon").locked);  // it has reached Redis
  const std::string sha = LoadedSha(internal::AbandonScript());

  AcquireResult held =
      a->TryAcquire("abandon", {.lease = seconds(60), .owner = "abandon:a"});
  ASSERT_TRUE(held);
  const int64_t a_fence = held.lease.fence();
  std::string w_wid, c_wid, w_owner;
  std::future<AcquireResult> waiter_c;
  bool hooked = false;
  w->SetAfterFailedAttemptHookForTesting([&](std::string_view) {
    if (hooked) return;  // W's first failed attempt only: W is queued
    hooked = true;
    waiter_c = std::async(std::launch::async, [&] {
      return c->AcquireFor("abandon", seconds(60), {.owner = "abandon:c"});
    });
    LockInfo queued;
    ASSERT_TRUE(WaitUntil([&] {
      queued = inspector->Inspect("abandon");
      return queued.queue.size() == 2;
    }));
    w_wid = queued.queue[0].waiter_id;
    c_wid = queued.queue[1].waiter_id;
    w_owner = queued.queue[0].owner;
    if (!in_full) {
      ASSERT_EQ(w_owner, "abandon:w");
    }
    if (handed_off) {
      EXPECT_EQ(held.lease.Release(), ReleaseStatus::kReleased);
      const LockInfo handed = inspector->Inspect("abandon");
      EXPECT_EQ(handed.owner, w_owner);
      EXPECT_EQ(handed.pending_waiter, in_full ? "" : w_wid);
      EXPECT_EQ(handed.hold_count, in_full ? 1 : 0);
    }
    proxy_->DropNextReply(sha);
    clock->Advance(seconds(120));  // past W's deadline
  });
  // In full only under the thread's own owner token, and with a watchdog
  // lease; else a caller-given token and an explicit lease.
  AcquireOptions wopt;
  if (!in_full) {
    wopt.owner = "abandon:w";
    wopt.lease = seconds(60);
  }
  AcquireResult r = w->AcquireFor("abandon", seconds(60), wopt);
  w->SetAfterFailedAttemptHookForTesting(nullptr);
  ASSERT_TRUE(waiter_c.valid());
  EXPECT_EQ(r.status, AcquireStatus::kTimedOut);
  EXPECT_EQ(r.attempts, 1);
  EXPECT_EQ(proxy_->dropped(), 1);  // the abandon's first try lost its reply
  EXPECT_EQ(proxy_->armed(), 0);

  LockInfo info = inspector->Inspect("abandon");
  if (!handed_off) {
    // A still holds; W left the queue, C is its only entry; no event.
    EXPECT_EQ(info.owner, "abandon:a");
    EXPECT_EQ(info.fence, a_fence);
    EXPECT_EQ(info.fence, info.last_fence);
    EXPECT_TRUE(info.pending_waiter.empty());
    ASSERT_EQ(info.queue.size(), 1u);
    EXPECT_EQ(info.queue[0].waiter_id, c_wid);
    EXPECT_EQ(redis_->Execute({"HEXISTS", "lockfleet:{abandon}:waiters", w_wid})
                  .integer,
              0);
    std::lock_guard lock(recorder->mu);
    EXPECT_TRUE(recorder->events.empty());
  } else {
    // W's grant went to C, once: C's grant is the last fence issued (A's,
    // W's, C's), the queue is empty, and the lock is not free.
    EXPECT_EQ(info.owner, "abandon:c");
    EXPECT_GT(info.fence, a_fence);
    EXPECT_EQ(info.fence, info.last_fence);
    EXPECT_TRUE(info.pending_waiter == c_wid || info.pending_waiter.empty())
        << info.pending_waiter;
    EXPECT_TRUE(info.queue.empty());
    // The hand-off is announced once, naming C.
    std::lock_guard lock(recorder->mu);
    ASSERT_EQ(recorder->events.size(), 1u);
    EXPECT_EQ(recorder->events[0].next_waiter, c_wid);
    EXPECT_EQ(recorder->events[0].next_owner, "abandon:c");
    EXPECT_EQ(recorder->events[0].next_fence, info.fence);
  }
  if (!handed_off) {
    EXPECT_EQ(held.lease.Release(), ReleaseStatus::kReleased);
  }
  AcquireResult got = waiter_c.get();
  ASSERT_TRUE(got);
  info = inspector->Inspect("abandon");
  EXPECT_EQ(info.owner, "abandon:c");
  EXPECT_EQ(info.fence, got.lease.fence());
  EXPECT_EQ(info.fence, info.last_fence);
  EXPECT_TRUE(info.pending_waiter.empty());
  EXPECT_EQ(got.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(inspector->Inspect("abandon").locked);
}

TEST_F(RetrySafety, AbandonWhoseReplyWasLostPassesTheGrantOnOnce) {
  AbandonWhoseReplyWasLost(true);
}

// The same with the lock handed to W in full: the abandon gives W's hold
// back, which frees the lock and hands it to C, once.
TEST_F(RetrySafety, AbandonWhoseReplyWasLostPassesAGrantInFullOnOnce) {
  AbandonWhoseReplyWasLost(true, /*in_full=*/true);
}

TEST_F(RetrySafety, AbandonOfAQueuedWaiterWhoseReplyWasLostLeavesTheQueue) {
  AbandonWhoseReplyWasLost(false);
}

// Releasing one of two reentrant holds (count 2 -> 1) with the reply lost:
// the retry must return the first try's answer (still held, one hold left)
// and leave the count alone. The hold's own field keeps the count right;
// without the reply latch the retry found that field gone and reported
// kNotHeld for a hold it had just released.
TEST_F(RetrySafety, ReentrantReleaseWhoseReplyWasLostDecrementsOnce) {
  auto a = NewProxiedClient();
  auto inspector = NewClient();
  const AcquireOptions o{.lease = seconds(60), .owner = "re:a"};
  AcquireResult outer = a->TryAcquire("reentrant", o);
  AcquireResult inner = a->TryAcquire("reentrant", o);
  ASSERT_TRUE(outer && inner);
  ASSERT_EQ(inner.lease.fence(), outer.lease.fence());
  ASSERT_EQ(inspector->Inspect("reentrant").hold_count, 2);

  proxy_->DropNextReply("re:a");  // explicit leases: no renewal carries it
  const ReleaseStatus status = inner.lease.Release();
  EXPECT_EQ(status, ReleaseStatus::kStillHeld) << ReleaseStatusName(status);
  EXPECT_EQ(proxy_->dropped(), 1);
  EXPECT_EQ(proxy_->armed(), 0);
  LockInfo info = inspector->Inspect("reentrant");
  EXPECT_EQ(info.owner, "re:a");
  EXPECT_EQ(info.fence, outer.lease.fence());
  EXPECT_EQ(info.hold_count, 1);
  EXPECT_GT(info.ttl, milliseconds(0));
  EXPECT_EQ(a->stats().releases, 1u);
  EXPECT_EQ(a->stats().releases_not_held, 0u);
  EXPECT_EQ(a->stats().release_failures, 0u);
  EXPECT_FALSE(outer.lease.lost());

  EXPECT_EQ(outer.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(inspector->Inspect("reentrant").locked);
  EXPECT_EQ(proxy_->dropped(), 1);
}

// A reply that arrives late, for a grant that has ended since, must not
// revoke the newer grant the same owner token holds now. Call 1 of owner
// "shared" is granted fence F1, its reply delayed; the operator force-
// unlocks F1; call 2 of the same client and owner is granted F2 > F1. When
// call 1's reply finally arrives, the client used to take F2 for "an older
// grant that is gone" and mark it lost (a false revocation: Redis still
// shows F2 as the owner's), and return a Lease for the dead F1.
TEST_F(RetrySafety, LateReplyForAnEndedGrantLeavesTheNewerGrantAlone) {
  RedisOptions o;
  o.url = proxy_->url();
  o.command_timeout = seconds(20);  // the delayed reply is not a timeout
  LockClient a(std::make_shared<RedisClient>(o));
  auto admin = NewClient();
  ASSERT_FALSE(a.Inspect("late").locked);  // it has reached Redis
  const AcquireOptions shared{.lease = seconds(60), .owner = "late:shared"};
  proxy_->DelayNextReply("late:shared", seconds(3));
  auto first = std::async(std::launch::async,
                          [&] { return a.TryAcquire("late", shared); });
  ASSERT_TRUE(WaitUntil([&] { return admin->Inspect("late").locked; }));
  const ForceUnlockResult forced = admin->ForceUnlock("late");
  ASSERT_TRUE(forced.was_locked);
  AcquireResult second = a.TryAcquire("late", shared);
  ASSERT_TRUE(second);
  ASSERT_GT(second.lease.fence(), forced.previous_fence);

  AcquireResult late = first.get();  // the reply for F1, after F2
  EXPECT_EQ(proxy_->delayed(), 1) << "the reply was not delivered late";
  EXPECT_FALSE(late) << "a Lease for the force-unlocked grant "
                     << late.lease.fence();
  EXPECT_FALSE(second.lease.lost()) << "the newer grant was revoked";
  EXPECT_EQ(a.stats().leases_lost, 0u);
  LockInfo info = admin->Inspect("late");
  EXPECT_EQ(info.owner, "late:shared");
  EXPECT_EQ(info.fence, second.lease.fence());
  EXPECT_EQ(info.hold_count, 1);
  EXPECT_EQ(second.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(admin->Inspect("late").locked);
}

// Both tries of an acquire time out before they even reach Redis; the
// call gives its hold back at once, which finds nothing; then the tries run
// and grant the hold to nobody who knows of it. The client must keep
// counting that hold as possibly granted: else the owner's next grant of
// the lock re-enters it, one release never frees the lock, and an owner
// that keeps coming back keeps it from everyone for ever (its re-entries
// extend the lease).
TEST_F(RetrySafety, TryThatRunsAfterItsGiveBackIsGivenBackAtTheNextGrant) {
  auto a = NewProxiedClient();
  auto inspector = NewClient();
  ASSERT_FALSE(a->Inspect("after").locked);  // it has reached Redis
  const std::string sha =
      redis_
          ->Execute({"SCRIPT", "LOAD", internal::AcquireFairScript().source()})
          .str;
  const AcquireOptions o{.lease = seconds(60), .owner = "after:a"};
  // Each held back 3 s: both time out (1 s each) and the give-back (at
  // about 2 s) runs before either.
  proxy_->DelayNextRequest(sha, seconds(3));  // the first try ...
  proxy_->DelayNextRequest(sha, seconds(3));  // ... and its retry
  try {
    a->TryAcquire("after", o);
    ADD_FAILURE() << "the delayed tries did not time out";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kRedisTimeout) << e.what();
  }
  EXPECT_FALSE(inspector->Inspect("after").locked);  // nothing ran yet
  // The tries run now, late: the lock is the owner's, with a hold nobody
  // knows of.
  ASSERT_TRUE(WaitUntil([&] { return proxy_->dropped() == 2; }));
  LockInfo late = inspector->Inspect("after");
  ASSERT_TRUE(late.locked);
  EXPECT_EQ(late.owner, "after:a");
  EXPECT_EQ(late.hold_count, 1);

  AcquireResult again = a->TryAcquire("after", o);  // re-enters that grant
  ASSERT_TRUE(again);
  EXPECT_EQ(again.lease.fence(), late.fence);
  EXPECT_EQ(inspector->Inspect("after").hold_count, 1)
      << "the late hold was not given back";
  EXPECT_EQ(again.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(inspector->Inspect("after").locked);
}

// As above, but the give-back found the hold (the first try had run) and
// freed the lock — its answer latched under the hold id — and only then
// the retry ran late and granted the hold again. The owner's next grant
// must really release it: replaying the give-back's latched answer instead
// (review finding) left the hold in the lock, and published a release event
// for the owner's live grant.
TEST_F(RetrySafety, LateTryAfterAGiveBackThatFoundTheHoldIsGivenBackToo) {
  RedisOptions ro;
  ro.url = proxy_->url();
  ro.command_timeout = seconds(2);
  LoopbackBus bus;  // counts what A publishes
  LockClient a(std::make_shared<RedisClient>(ro),
               {.publisher = std::shared_ptr<UnlockPublisher>(
                    &bus, [](UnlockPublisher*) {})});
  auto inspector = NewClient();
  ASSERT_FALSE(a.Inspect("twice").locked);  // it has reached Redis
  const std::string sha =
      redis_
          ->Execute({"SCRIPT", "LOAD", internal::AcquireFairScript().source()})
          .str;
  const AcquireOptions o{.lease = seconds(60), .owner = "twice:a"};
  // The first try runs at 1 s and its reply is dropped; the retry (sent at
  // once) times out at 3 s, then the give-back finds and frees the hold;
  // the retry runs at 6 s and grants it again.
  proxy_->DelayNextRequest(sha, seconds(1));
  proxy_->DelayNextRequest(sha, seconds(5));
  try {
    a.TryAcquire("twice", o);
    ADD_FAILURE() << "the delayed retry did not time out";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kRedisTimeout) << e.what();
  }
  EXPECT_FALSE(inspector->Inspect("twice").locked);  // given back
  ASSERT_TRUE(WaitUntil([&] { return proxy_->dropped() == 2; }));
  LockInfo late = inspector->Inspect("twice");
  ASSERT_TRUE(late.locked) << "the retry did not run late";
  EXPECT_EQ(late.hold_count, 1);

  const uint64_t published = a.stats().events_published;
  AcquireResult again = a.TryAcquire("twice", o);
  ASSERT_TRUE(again);
  EXPECT_EQ(inspector->Inspect("twice").hold_count, 1)
      << "the late hold was not given back";
  EXPECT_EQ(a.stats().events_published, published)
      << "an unlock event for a grant still held";
  EXPECT_EQ(again.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(inspector->Inspect("twice").locked);
}

// Calls that fail before their script leaves the client (Redis down: the
// connect is refused) certainly granted nothing: they must not pile up
// holds to give back, which the next grant would then send one by one (a
// review measured 3,001 scripts for one grant after 3,000 such calls).
TEST_F(LockTest, CallsThatNeverReachedRedisLeaveNothingToGiveBack) {
  auto redis = NewRedis(1);
  LockClient client(redis);
  ASSERT_FALSE(client.Inspect("down").locked);  // the script cache is warm
  server_->Stop();
  // The pooled connection dies with the server: a command sent on it may
  // count as possibly run. Drop it first; then every connect is refused.
  EXPECT_THROW(redis->Execute({"PING"}), Error);
  for (int i = 0; i < 100; ++i) {
    EXPECT_THROW(client.TryAcquire("down", {.owner = "down:a"}), Error);
  }
  server_->Start();
  const uint64_t before = redis->round_trips();
  AcquireResult r = client.TryAcquire("down", {.owner = "down:a"});
  ASSERT_TRUE(r);
  // EVALSHA, NOSCRIPT after the restart, then EVAL: nothing else.
  EXPECT_LE(redis->round_trips() - before, 2u);
  EXPECT_EQ(r.lease.Release(), ReleaseStatus::kReleased);
}

// A multi-lock's script whose reply was lost: the retry finds every hold
// of the first try and returns the same grants, each lock held once.
TEST_F(RetrySafety, AMultiLockWhoseReplyWasLostHoldsEachLockOnce) {
  auto a = NewProxiedClient();
  auto inspector = NewClient();
  proxy_->DropNextReply(LoadedSha(internal::MultiAcquireScript()));
  AcquireAllResult r =
      a->TryAcquireAll({"rs-multi:2", "rs-multi:1"}, {.lease = seconds(60)});
  ASSERT_TRUE(r);
  EXPECT_EQ(proxy_->dropped(), 1);
  for (const char* name : {"rs-multi:1", "rs-multi:2"}) {
    LockInfo info = inspector->Inspect(name);
    EXPECT_EQ(info.hold_count, 1) << name << ": the retry added a hold";
    EXPECT_EQ(info.fence, r.lease.lease(name).fence()) << name;
  }
  EXPECT_EQ(r.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(inspector->Inspect("rs-multi:1").locked);
  EXPECT_FALSE(inspector->Inspect("rs-multi:2").locked);
}

// Neither try answered (both replies lost): the call fails, and gives back
// the holds its tries granted unseen — no lock stays held for its lease.
TEST_F(RetrySafety, AMultiLockLeftUnansweredGivesBackWhatItsTriesGranted) {
  auto a = NewProxiedClient();
  auto inspector = NewClient();
  const std::string sha = LoadedSha(internal::MultiAcquireScript());
  proxy_->DropNextReply(sha);
  proxy_->DropNextReply(sha);
  try {
    a->TryAcquireAll({"rs-gone:2", "rs-gone:1"}, {.lease = seconds(60)});
    ADD_FAILURE() << "acquired with no reply";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kRedisUnavailable) << e.what();
  }
  EXPECT_EQ(proxy_->dropped(), 2);
  EXPECT_FALSE(inspector->Inspect("rs-gone:1").locked);
  EXPECT_FALSE(inspector->Inspect("rs-gone:2").locked);
  EXPECT_TRUE(inspector->TryAcquireAll({"rs-gone:1", "rs-gone:2"}));
}

}  // namespace
}  // namespace lockfleet::testing
