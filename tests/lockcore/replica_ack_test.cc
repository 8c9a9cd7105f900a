// Replica acknowledgement (LockClientOptions::min_replicas) against a real
// master and replica: every change of a lock is followed by WAIT on its
// connection; a grant the replica does not confirm is given back and the
// call fails with kRedisReplicas; an unconfirmed renewal does not extend
// validity. The replica is stopped with SIGSTOP (its link stays up, so WAIT
// runs out its timeout, as with a lagging replica).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/latch.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/multi_lock.h"
#include "lockfleet/lockcore/observer.h"
#include "lockfleet/lockcore/redis_client.h"
#include "lockfleet/lockcore/semaphore.h"
#include "support/redis_server.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::shared_ptr<RedisClient> Connect(const std::string& url) {
  RedisOptions o;
  o.url = url;
  return std::make_shared<RedisClient>(o);
}

// The number after "<field>:" in an INFO section, or -1.
long long InfoField(RedisClient& redis, const std::string& section,
                    const std::string& field) {
  const std::string info = redis.Execute({"INFO", section}).str;
  const size_t at = info.find(field + ":");
  if (at == std::string::npos) return -1;
  return std::stoll(info.substr(at + field.size() + 1));
}

// WAITs the master has run, from its command statistics.
long long WaitCalls(RedisClient& master) {
  const std::string info = master.Execute({"INFO", "commandstats"}).str;
  const size_t at = info.find("cmdstat_wait:calls=");
  if (at == std::string::npos) return 0;
  return std::stoll(info.substr(at + 19));
}

class CountingObserver : public LockObserver {
 public:
  void OnError(ErrorCode code) noexcept override {
    if (code == ErrorCode::kRedisReplicas) replica_errors.fetch_add(1);
  }
  std::atomic<int> replica_errors{0};
};

int CodeOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return static_cast<int>(e.code());
  }
  return -1;
}

class ReplicaAck : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    master_ = new RedisServer({.tcp = true});
    replica_ = new RedisServer({.tcp = true});
    auto r = Connect(replica_->url());
    ASSERT_EQ(
        r->Execute({"REPLICAOF", "127.0.0.1", std::to_string(master_->port())})
            .str,
        "OK");
    auto m = Connect(master_->url());
    ASSERT_TRUE(WaitUntil([&] {
      return InfoField(*m, "replication", "connected_slaves") == 1 &&
             r->Execute({"INFO", "replication"})
                     .str.find("master_link_status:up") != std::string::npos;
    })) << "the replica did not connect";
  }
  static void TearDownTestSuite() {
    delete replica_;
    delete master_;
    replica_ = master_ = nullptr;
  }
  void SetUp() override {
    master_redis_ = Connect(master_->url());
    replica_redis_ = Connect(replica_->url());
    master_redis_->Execute({"FLUSHALL"});
    // Replicated before the test starts: WAIT 1 answers 1 at once.
    ASSERT_EQ(master_redis_->Execute({"WAIT", "1", "10000"}).integer, 1);
  }
  void TearDown() override {
    if (paused_) replica_->Resume();
  }
  void PauseReplica() {
    replica_->Pause();
    paused_ = true;
  }
  void ResumeReplica() {
    replica_->Resume();
    paused_ = false;
  }

  // A client that waits for the replica: generously (`timeout` 10 s) for
  // what it does while the replica runs, so a loaded machine never fails
  // it; briefly for what it does while the replica is stopped.
  std::unique_ptr<LockClient> Acked(LockClientOptions o = {},
                                    milliseconds timeout = seconds(10)) {
    o.min_replicas = 1;
    o.replica_timeout = timeout;
    return std::make_unique<LockClient>(Connect(master_->url()), o);
  }
  static constexpr milliseconds kBrief{300};
  // A client that does not wait: another process of an older setup.
  std::unique_ptr<LockClient> Plain(LockClientOptions o = {}) {
    return std::make_unique<LockClient>(Connect(master_->url()), o);
  }
  bool LockExists(const std::string& name) {
    return master_redis_->Execute({"EXISTS", "lockfleet:{" + name + "}:lock"})
               .integer == 1;
  }

  static RedisServer* master_;
  static RedisServer* replica_;
  std::shared_ptr<RedisClient> master_redis_, replica_redis_;
  bool paused_ = false;
};

RedisServer* ReplicaAck::master_ = nullptr;
RedisServer* ReplicaAck::replica_ = nullptr;

// With the replica up, grant and release each wait for it, and what the
// client was granted is on the replica when the call returns.
TEST_F(ReplicaAck, EveryChangeOfALockWaitsForTheReplica) {
  for (bool fair : {true, false}) {
    SCOPED_TRACE(fair ? "fair" : "barging");
    auto client = Acked({.fair = fair});
    const long long before = WaitCalls(*master_redis_);
    AcquireResult got = client->TryAcquire("stock");
    ASSERT_TRUE(got);
    EXPECT_EQ(WaitCalls(*master_redis_), before + 1);
    // Acknowledged: the replica has the grant, with its fence.
    EXPECT_EQ(
        replica_redis_->Execute({"HGET", "lockfleet:{stock}:lock", "fence"})
            .str,
        std::to_string(got.lease.fence()));
    got.lease.Release();
    EXPECT_EQ(WaitCalls(*master_redis_), before + 2);
    EXPECT_EQ(
        replica_redis_->Execute({"EXISTS", "lockfleet:{stock}:lock"}).integer,
        0);
    EXPECT_EQ(client->stats().replica_shortfalls, 0u);
  }
}

// The safety property: a grant the replica did not confirm is not a grant.
// The call fails with its own code, the lock is free on the master, and
// another client takes it — one holder at a time.
TEST_F(ReplicaAck, AGrantTheReplicaDoesNotConfirmIsGivenBack) {
  for (bool fair : {true, false}) {
    SCOPED_TRACE(fair ? "fair" : "barging");
    auto observer = std::make_shared<CountingObserver>();
    auto client = Acked({.fair = fair, .observer = observer}, kBrief);
    PauseReplica();
    const long long waits_before = WaitCalls(*master_redis_);
    std::string what;
    try {
      client->TryAcquire("order-17");
      ADD_FAILURE() << "an unconfirmed grant was reported as acquired";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kRedisReplicas) << e.what();
      what = e.what();
    }
    EXPECT_NE(what.find("0 of 1 replicas"), std::string::npos) << what;
    EXPECT_NE(what.find("given back"), std::string::npos) << what;
    EXPECT_FALSE(LockExists("order-17"));
    // The grant's WAIT only: the give-back is bounded by kGiveUpBudget,
    // which a lagging replica must not stretch.
    EXPECT_EQ(WaitCalls(*master_redis_), waits_before + 1);
    EXPECT_GE(client->stats().replica_shortfalls, 1u);
    EXPECT_GE(observer->replica_errors.load(), 1);
    // Another client (not waiting for replicas) gets it at once.
    auto other = Plain();
    AcquireResult taken = other->TryAcquire("order-17");
    EXPECT_TRUE(taken);
    ResumeReplica();
    taken.lease.Release();
    ASSERT_EQ(master_redis_->Execute({"WAIT", "1", "10000"}).integer, 1);
  }
}

// A multi-lock taken in one script that the replica does not confirm is
// given back whole: no lock of it stays held.
TEST_F(ReplicaAck, AnUnconfirmedMultiLockIsGivenBackWhole) {
  auto client = Acked({}, kBrief);
  PauseReplica();
  std::string what;
  try {
    client->TryAcquireAll({"order-2", "order-1"});
    ADD_FAILURE() << "an unconfirmed multi-lock was reported as acquired";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kRedisReplicas) << e.what();
    what = e.what();
  }
  EXPECT_NE(what.find("given back"), std::string::npos) << what;
  EXPECT_FALSE(LockExists("order-1"));
  EXPECT_FALSE(LockExists("order-2"));
  EXPECT_EQ(client->stats().acquisitions, 0u);
  ResumeReplica();
  ASSERT_EQ(master_redis_->Execute({"WAIT", "1", "10000"}).integer, 1);
  // Confirmed, it is taken.
  auto confirmed = Acked();
  AcquireAllResult r = confirmed->TryAcquireAll({"order-2", "order-1"});
  ASSERT_TRUE(r);
  EXPECT_TRUE(LockExists("order-1"));
}

// A re-entry the replica does not confirm gives back only itself: the
// first hold (confirmed) stays, with its grant.
TEST_F(ReplicaAck, AnUnconfirmedReentryGivesBackOnlyItself) {
  // Two clients sharing one owner token: the second re-enters the first's
  // grant.
  auto client = Acked();
  auto brief = Acked({}, kBrief);
  const AcquireOptions owner{.owner = "report:o"};
  AcquireResult first = client->TryAcquire("report", owner);
  ASSERT_TRUE(first);
  PauseReplica();
  EXPECT_EQ(CodeOf([&] { brief->TryAcquire("report", owner); }),
            static_cast<int>(ErrorCode::kRedisReplicas));
  LockInfo info = client->Inspect("report");
  EXPECT_TRUE(info.locked);
  EXPECT_EQ(info.hold_count, 1);
  EXPECT_EQ(info.fence, first.lease.fence());
  EXPECT_FALSE(first.lease.lost());
  ResumeReplica();
  first.lease.Release();
  EXPECT_FALSE(LockExists("report"));
}

// A queued waiter handed the lock claims it; unconfirmed, the claim is
// given back, and the lock goes on to the next client — it is neither held
// twice nor stuck.
TEST_F(ReplicaAck, AWaiterHandedTheLockGivesBackAnUnconfirmedClaim) {
  auto holder = Plain();
  AcquireResult held = holder->TryAcquire("sku-9");
  ASSERT_TRUE(held);
  auto waiter = Acked({}, kBrief);  // its queueing is not a grant: counted
  auto waited = std::async(std::launch::async, [&] {
    return CodeOf([&] { waiter->AcquireFor("sku-9", seconds(60)); });
  });
  ASSERT_TRUE(
      WaitUntil([&] { return holder->Inspect("sku-9").queue.size() == 1; }));
  PauseReplica();
  held.lease.Release();  // hands the lock to the waiter
  ASSERT_EQ(waited.wait_for(seconds(30)), std::future_status::ready);
  EXPECT_EQ(waited.get(), static_cast<int>(ErrorCode::kRedisReplicas));
  auto next = Plain();
  AcquireResult taken = next->AcquireFor("sku-9", seconds(20));
  ASSERT_TRUE(taken);
  LockInfo info = next->Inspect("sku-9");
  EXPECT_EQ(info.owner, next->DefaultOwner());
  EXPECT_EQ(info.hold_count, 1);
  EXPECT_TRUE(info.queue.empty());
  ResumeReplica();
  taken.lease.Release();
}

// No lost wake-up: in one process, the holder's release hands the lock to
// queued waiter A and wakes it; A's claim is not confirmed, so A's call
// gives the lock back, which hands it to waiter B and wakes B at once (not
// at its park bound, 10 s away) — through the give-back's hand-off, or the
// wake-up A's call did not use, passed on when it leaves. B's claim is not
// confirmed either: both calls fail, and the lock ends free — never two
// holders, never stuck.
TEST_F(ReplicaAck, AClaimGivenBackWakesTheNextWaiter) {
  auto client = Acked({.park_cap = seconds(30),
                       .presence_window = seconds(30),
                       .claim_window = seconds(20)},
                      seconds(2));
  AcquireResult held = client->TryAcquire("wake", {.owner = "wake:h"});
  ASSERT_TRUE(held);
  auto wait_for = [&](const char* owner) {
    return std::async(std::launch::async, [&, owner] {
      return CodeOf(
          [&] { client->AcquireFor("wake", seconds(60), {.owner = owner}); });
    });
  };
  auto a = wait_for("wake:a");
  ASSERT_TRUE(
      WaitUntil([&] { return client->Inspect("wake").queue.size() == 1; }));
  auto b = wait_for("wake:b");
  ASSERT_TRUE(
      WaitUntil([&] { return client->Inspect("wake").queue.size() == 2; }));
  PauseReplica();
  const uint64_t local_before = client->stats().wakeups_local;
  held.lease.Release();  // hands the lock to A (its WAIT falls short)
  ASSERT_EQ(a.wait_for(seconds(30)), std::future_status::ready);
  ASSERT_EQ(b.wait_for(seconds(30)), std::future_status::ready);
  EXPECT_EQ(a.get(), static_cast<int>(ErrorCode::kRedisReplicas));
  EXPECT_EQ(b.get(), static_cast<int>(ErrorCode::kRedisReplicas));
  EXPECT_GE(client->stats().wakeups_local, local_before + 2)
      << "a waiter was not woken by the release or the give-back";
  // A's grant came from a release in its own process, but unconfirmed: it
  // was not handed over directly (A's own try waited for the replica).
  EXPECT_EQ(client->stats().direct_grants, 0u);
  LockInfo info = client->Inspect("wake");
  EXPECT_FALSE(info.locked) << "held by " << info.owner;
  EXPECT_TRUE(info.queue.empty());
  ResumeReplica();
}

// Renewals the replica confirms extend the lease; unconfirmed ones do not
// (a failover could bring back the shorter one), so the lease ends at its
// last confirmed validity and is reported lost. While the replica is
// stopped, an unconfirmed re-entry with a long explicit lease (given back)
// leaves the key's TTL at 60 s on the master: a renewal that then wrote
// nothing would have a WAIT that answers for this connection's older,
// confirmed writes, and the lease would be extended for ever.
// Latches with min_replicas: a set or count-down the replica did not
// acknowledge throws kRedisReplicas (a failover could undo it: repeat it
// with the same id, which counts once); an unacknowledged opening still
// wakes this process's awaiters first — here one parked for up to 600 s,
// which only that wake-up can end within the test.
TEST_F(ReplicaAck, UnacknowledgedLatchChangesThrowAndAnOpeningStillWakes) {
  const int replicas = static_cast<int>(ErrorCode::kRedisReplicas);
  ASSERT_TRUE(Acked()->Latch("merge").TrySetCount(2));
  auto brief = Acked({.park_cap = seconds(600)}, kBrief);
  auto awaited = std::async(std::launch::async, [&] {
    return brief->Latch("merge").AwaitFor(seconds(300));
  });
  ASSERT_TRUE(WaitUntil([&] { return brief->stats().latch_parks >= 1; }));
  PauseReplica();
  EXPECT_EQ(CodeOf([&] { brief->Latch("merge").CountDown("shard-1"); }),
            replicas);
  EXPECT_EQ(CodeOf([&] { brief->Latch("other").TrySetCount(1); }), replicas);
  CodeOf([&] { brief->Latch("merge").CountDown("shard-1"); });  // repeated
  EXPECT_EQ(brief->Latch("merge").Count(), 1) << "a repeat counted twice";
  EXPECT_EQ(awaited.wait_for(milliseconds(100)), std::future_status::timeout);
  EXPECT_EQ(CodeOf([&] { brief->Latch("merge").CountDown("shard-2"); }),
            replicas);
  ASSERT_EQ(awaited.wait_for(seconds(60)), std::future_status::ready)
      << "the awaiter slept through an unacknowledged opening";
  EXPECT_EQ(awaited.get(), AwaitStatus::kOpened);
  ResumeReplica();
}

// Semaphores with min_replicas: grants and changes wait for the replica; a
// permit set it does not confirm is given back (free again on the master)
// and the call throws kRedisReplicas; so does an unconfirmed permit change.
TEST_F(ReplicaAck, AnUnconfirmedPermitGrantIsGivenBack) {
  const int replicas = static_cast<int>(ErrorCode::kRedisReplicas);
  auto acked = Acked();
  const long long before = WaitCalls(*master_redis_);
  acked->Semaphore("api").SetPermits(2);
  PermitResult one = acked->Semaphore("api").TryAcquire(1);
  ASSERT_TRUE(one);
  EXPECT_GE(WaitCalls(*master_redis_), before + 2);
  EXPECT_EQ(replica_redis_
                ->Execute({"HGET", "lockfleet:{api}:semaphore",
                           "p:" + one.permits.id()})
                .str,
            "1")
      << "the replica has the set when the call returns";
  auto brief = Acked({}, kBrief);
  PauseReplica();
  EXPECT_EQ(CodeOf([&] { brief->Semaphore("api").TryAcquire(1); }), replicas);
  EXPECT_EQ(Plain()->Semaphore("api").Inspect().used, 1)
      << "the unconfirmed set was given back";
  EXPECT_EQ(CodeOf([&] { brief->Semaphore("api").AddPermits(1); }), replicas);
  EXPECT_EQ(CodeOf([&] { brief->Semaphore("new").TrySetPermits(1); }),
            replicas);
  ResumeReplica();
  ASSERT_EQ(master_redis_->Execute({"WAIT", "1", "10000"}).integer, 1);
  EXPECT_EQ(one.permits.Release(), ReleaseStatus::kReleased);
}

TEST_F(ReplicaAck, AnUnconfirmedRenewalDoesNotExtendTheLease) {
  auto client = Acked({.default_lease = milliseconds(1500)}, seconds(1));
  auto brief = Acked({}, kBrief);
  AcquireResult got = client->TryAcquire("nightly", {.owner = "nightly:o"});
  ASSERT_TRUE(got);
  const auto first_validity = got.lease.valid_until();
  // Renewed (every lease / 3) and confirmed: validity moves on.
  ASSERT_TRUE(
      WaitUntil([&] { return got.lease.valid_until() > first_validity; }));
  PauseReplica();
  EXPECT_EQ(CodeOf([&] {
              brief->TryAcquire("nightly",
                                {.lease = seconds(60), .owner = "nightly:o"});
            }),
            static_cast<int>(ErrorCode::kRedisReplicas));
  EXPECT_GT(
      master_redis_->Execute({"PTTL", "lockfleet:{nightly}:lock"}).integer,
      30000);
  const auto confirmed = got.lease.valid_until();
  ASSERT_TRUE(WaitUntil([&] { return got.lease.lost(); }));
  EXPECT_LE(got.lease.valid_until(), confirmed + milliseconds(1500));
  // The renewal in flight when the lease ran out answers within its WAIT
  // (its hold is lost by then: counted as a shortfall only).
  EXPECT_TRUE(
      WaitUntil([&] { return client->stats().replica_shortfalls >= 1; }));
  ResumeReplica();
}

TEST(ReplicaAckOptions, AreChecked) {
  RedisOptions ro;
  ro.url = "redis://127.0.0.1:1";
  auto redis = std::make_shared<RedisClient>(ro);
  EXPECT_EQ(CodeOf([&] { LockClient(redis, {.min_replicas = -1}); }),
            static_cast<int>(ErrorCode::kInvalidArgument));
  EXPECT_EQ(CodeOf([&] { LockClient(redis, {.min_replicas = 101}); }),
            static_cast<int>(ErrorCode::kInvalidArgument));
  EXPECT_EQ(CodeOf([&] {
              LockClient(redis, {.min_replicas = 1, .replica_timeout = {}});
            }),
            static_cast<int>(ErrorCode::kInvalidArgument));
  EXPECT_EQ(ErrorCodeName(ErrorCode::kRedisReplicas), "redis_replicas");
}

}  // namespace
}  // namespace lockfleet::testing
