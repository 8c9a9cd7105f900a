// redis+cluster:// against a real Redis Cluster (tests/support/redis_cluster.h:
// three masters with a replica each, created by `redis-cli --cluster
// create`): commands go to the master of their slot, locks spread over the
// masters, pipelines split per master with WAIT on each, a slot moved under
// the client is followed (MOVED), a slot in migration is followed (ASK,
// TRYAGAIN) under contention without ever two holders, a script cache
// flushed on one node is refilled there, and bad set-ups fail clearly —
// a seed that is no cluster node, a slot whose ASK and MOVED point at each
// other (bounded, never a loop).
#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "key_slot.h"
#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/fenced_resource.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/multi_lock.h"
#include "lockfleet/lockcore/redis_client.h"
#include "support/contention.h"
#include "support/redis_cluster.h"
#include "support/redis_server.h"
#include "support/tls_certs.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::string LockKey(const std::string& name) {
  return "lockfleet:{" + name + "}:lock";
}

// A lock name whose keys live in `slot`.
std::string NameInSlot(uint16_t slot, const std::string& base) {
  for (int i = 0;; ++i) {
    const std::string name = base + std::to_string(i);
    if (internal::KeySlot(LockKey(name)) == slot) return name;
  }
}

// Expects `call` to throw Error with `code` and `text` in its message.
template <typename Call>
void ExpectError(Call call, ErrorCode code, const std::string& text) {
  try {
    call();
    ADD_FAILURE() << "no error; expected one with '" << text << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

class Cluster : public ::testing::Test {
 protected:
  // One cluster for the suite (six servers take a few seconds to meet).
  // Tests that move slots leave them moved; each asks where a slot is.
  static void SetUpTestSuite() {
    cluster_ = new RedisCluster({.masters = 3, .replicas = 1});
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }

  std::shared_ptr<RedisClient> Connect(int pool_size = 4) {
    RedisOptions o = cluster_->ClientOptions(cluster_->url());
    o.pool_size = pool_size;
    return std::make_shared<RedisClient>(o);
  }
  // Node `i`'s own view of `key` (not routed).
  Reply Direct(size_t i, const Command& command) {
    return cluster_->Client(i)->Execute(command);
  }
  // A master other than `not_this` (a node index).
  size_t OtherMaster(int not_this) {
    auto redis = Connect(1);
    for (size_t i = 0; i < cluster_->nodes(); ++i) {
      if (static_cast<int>(i) == not_this) continue;
      const std::string info = Direct(i, {"INFO", "replication"}).str;
      if (info.find("role:master") != std::string::npos) return i;
    }
    ADD_FAILURE() << "no other master";
    return 0;
  }

  static RedisCluster* cluster_;
};

RedisCluster* Cluster::cluster_ = nullptr;

TEST_F(Cluster, CommandsGoToTheMasterOfTheirSlot) {
  auto redis = Connect();
  const std::vector<RedisNode> masters = redis->Masters();
  ASSERT_EQ(masters.size(), 3u);
  // Keys over many slots: each lands on the master that serves it (which
  // would answer MOVED otherwise), and reads back through the client.
  std::set<int> owners;
  for (int i = 0; i < 60; ++i) {
    const std::string key = "spread:" + std::to_string(i);
    ASSERT_EQ(redis->Execute({"SET", key, std::to_string(i)}).str, "OK");
    const int owner = cluster_->OwnerOf(internal::KeySlot(key));
    ASSERT_GE(owner, 0);
    owners.insert(owner);
    EXPECT_EQ(Direct(owner, {"GET", key}).str, std::to_string(i));
    EXPECT_EQ(redis->Execute({"GET", key}).str, std::to_string(i));
  }
  EXPECT_EQ(owners.size(), 3u) << "60 keys all on fewer than 3 masters";
  // The first map read was enough: nothing was redirected.
  EXPECT_EQ(redis->cluster_stats().moved, 0u);
  EXPECT_GE(redis->cluster_stats().refreshes, 1u);
  // Every master answers for its own keys (SCAN, DBSIZE go one by one).
  long long keys = 0;
  for (const RedisNode& m : masters)
    keys += redis->ExecuteOn(m, {"DBSIZE"}).integer;
  EXPECT_GE(keys, 60);
  // The URL shown in messages is the cluster one.
  EXPECT_EQ(redis->endpoint().Redacted(), cluster_->url());
}

TEST_F(Cluster, APipelineSpanningMastersKeepsItsOrder) {
  auto redis = Connect();
  std::vector<Command> sets, gets;
  for (int i = 0; i < 100; ++i) {
    sets.push_back({"SET", "pipe:" + std::to_string(i), std::to_string(i * 7)});
    gets.push_back({"GET", "pipe:" + std::to_string(i)});
  }
  redis->Execute({"PING"});  // the slot map read
  const uint64_t before = redis->round_trips();
  for (const Reply& r : redis->Pipeline(sets)) ASSERT_EQ(r.str, "OK");
  // One round trip per master, not per command.
  EXPECT_LE(redis->round_trips() - before, 3u);
  const std::vector<Reply> got = redis->Pipeline(gets);
  ASSERT_EQ(got.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(got[i].str, std::to_string(i * 7));
}

// Replica acknowledgement on a cluster: the WAIT of a pipeline that wrote
// to three masters goes to each of them (a WAIT on one master says nothing
// of another's writes); every master has one replica, so each answers 1.
TEST_F(Cluster, WaitGoesToEveryMasterWrittenTo) {
  auto redis = Connect();
  Script script("redis.call('SET', KEYS[1], ARGV[1]) return 1");
  std::vector<RedisClient::EvalCall> calls;
  std::set<int> owners;
  for (int i = 0; i < 30; ++i) {
    const std::string key = "acked:" + std::to_string(i);
    owners.insert(cluster_->OwnerOf(internal::KeySlot(key)));
    calls.push_back({&script, {key}, {"v"}});
  }
  ASSERT_EQ(owners.size(), 3u);
  ReplicaWait wait{.replicas = 1, .timeout = milliseconds(5000)};
  const std::vector<Reply> replies = redis->EvalPipeline(calls, {}, &wait);
  for (const Reply& r : replies) EXPECT_EQ(r.integer, 1) << r.str;
  EXPECT_TRUE(wait.acknowledged()) << wait.acked << " " << wait.error;
  EXPECT_EQ(wait.acked, 1);
  // Two replicas are asked for where each master has one: not acknowledged.
  ReplicaWait more{.replicas = 2, .timeout = milliseconds(100)};
  redis->EvalPipeline(calls, {}, &more);
  EXPECT_FALSE(more.acknowledged());
}

TEST_F(Cluster, LocksSpreadOverTheMastersAndExcludeEachOther) {
  auto redis = Connect();
  LockClient locks(redis);
  LockClient rival(Connect());
  std::set<int> owners;
  std::vector<Lease> held;
  for (int i = 0; i < 30; ++i) {
    const std::string name = "spread-lock-" + std::to_string(i);
    AcquireResult got = locks.TryAcquire(name);
    ASSERT_TRUE(got) << name;
    const int owner = cluster_->OwnerOf(internal::KeySlot(LockKey(name)));
    owners.insert(owner);
    EXPECT_EQ(Direct(owner, {"EXISTS", LockKey(name)}).integer, 1);
    EXPECT_FALSE(rival.TryAcquire(name)) << name;
    held.push_back(std::move(got.lease));
  }
  EXPECT_EQ(owners.size(), 3u);
  for (Lease& lease : held)
    EXPECT_EQ(lease.Release(), ReleaseStatus::kReleased);
  AcquireResult again = rival.TryAcquire("spread-lock-0");
  ASSERT_TRUE(again);
  again.lease.Release();
}

// A multi-lock whose names share a slot (a common part before their first
// '}', the keys' hash tag) is one script on that slot's master; names in
// different slots are taken one by one. Either way all or nothing.
TEST_F(Cluster, AMultiLockInOneSlotIsOneScriptAndAcrossSlotsStillWorks) {
  auto redis = Connect();
  LockClient locks(redis);
  LockClient rival(Connect());
  const std::vector<std::string> same = {"acct-7}credit", "acct-7}debit",
                                         "acct-7}audit"};
  const uint16_t slot = internal::KeySlot(LockKey(same[0]));
  for (const std::string& name : same)
    ASSERT_EQ(internal::KeySlot(LockKey(name)), slot) << name;
  ASSERT_TRUE(locks.TryAcquireAll(same));  // loads the script
  uint64_t trips = redis->round_trips();
  AcquireAllResult one = locks.AcquireAllFor(same, seconds(10));
  ASSERT_TRUE(one);
  EXPECT_EQ(redis->round_trips() - trips, 1u);
  const int owner = cluster_->OwnerOf(slot);
  for (const std::string& name : same) {
    EXPECT_EQ(Direct(owner, {"EXISTS", LockKey(name)}).integer, 1) << name;
    EXPECT_FALSE(rival.TryAcquire(name)) << name;
  }
  // One of them held elsewhere: the try takes none.
  EXPECT_EQ(one.lease.Release(), ReleaseStatus::kReleased);
  AcquireResult blocker = rival.TryAcquire("acct-7}debit");
  ASSERT_TRUE(blocker);
  AcquireAllResult refused = locks.TryAcquireAll(same);
  EXPECT_EQ(refused.blocked_on, "acct-7}debit");
  EXPECT_EQ(Direct(owner, {"EXISTS", LockKey("acct-7}audit")}).integer, 0);
  EXPECT_EQ(Direct(owner, {"EXISTS", LockKey("acct-7}credit")}).integer, 0);
  blocker.lease.Release();
  // Across slots (no CROSSSLOT error): one acquisition per lock.
  const std::vector<std::string> spread = {"multi-a", "multi-b", "multi-c"};
  ASSERT_NE(internal::KeySlot(LockKey("multi-a")),
            internal::KeySlot(LockKey("multi-b")));
  trips = redis->round_trips();
  AcquireAllResult each = locks.AcquireAllFor(spread, seconds(10));
  ASSERT_TRUE(each);
  EXPECT_GE(redis->round_trips() - trips, 3u);
  for (const std::string& name : spread)
    EXPECT_FALSE(rival.TryAcquire(name)) << name;
  EXPECT_EQ(each.lease.Release(), ReleaseStatus::kReleased);
}

// The fenced resource's keys and the lock's have hash tags of their own:
// each script stays in one slot (a CROSSSLOT error otherwise), and a stale
// holder's write is refused on the cluster as on one server.
TEST_F(Cluster, FencedWritesAndOptimisticUpdatesWork) {
  auto redis = Connect();
  LockClient locks(redis);
  FencedResource stock(redis, "stock-item");
  AcquireResult first = locks.TryAcquire("stock-item");
  ASSERT_TRUE(first);
  const int64_t old_fence = first.lease.fence();
  ASSERT_TRUE(
      stock.Write(first.lease, {{"SET", stock.Key("count"), "10"}}).accepted);
  ASSERT_EQ(first.lease.Release(), ReleaseStatus::kReleased);
  AcquireResult second = locks.TryAcquire("stock-item");
  ASSERT_TRUE(second);
  ASSERT_TRUE(
      stock.Write(second.lease, {{"SET", stock.Key("count"), "9"}}).accepted);
  EXPECT_FALSE(stock
                   .Write(FenceGrant{old_fence, ""},
                          {{"SET", stock.Key("count"), "stale"}})
                   .accepted);
  EXPECT_EQ(redis->Execute({"GET", stock.Key("count")}).str, "9");
  second.lease.Release();

  // WATCH/MULTI/EXEC on the master of the keys' slot.
  const std::vector<std::string> keys{"{opt}:a", "{opt}:b"};
  OptimisticResult r = redis->OptimisticUpdate(
      keys,
      [](const std::vector<std::optional<std::string>>& values)
          -> std::optional<std::vector<Command>> {
        const int a = values[0] ? std::stoi(*values[0]) : 0;
        return std::vector<Command>{{"SET", "{opt}:a", std::to_string(a + 1)},
                                    {"SET", "{opt}:b", "done"}};
      });
  EXPECT_EQ(r.status, OptimisticStatus::kCommitted);
  EXPECT_EQ(redis->Execute({"GET", "{opt}:a"}).str, "1");
}

// A node that lost its script cache answers EVALSHA with NOSCRIPT: the
// client sends the body to that node, and the locks there keep working.
TEST_F(Cluster, AFlushedScriptCacheIsRefilledPerNode) {
  auto redis = Connect();
  LockClient locks(redis);
  const std::string name = "noscript-lock";
  AcquireResult got = locks.TryAcquire(name);
  ASSERT_TRUE(got);
  got.lease.Release();
  const int owner = cluster_->OwnerOf(internal::KeySlot(LockKey(name)));
  ASSERT_EQ(Direct(owner, {"SCRIPT", "FLUSH"}).str, "OK");
  AcquireResult again = locks.TryAcquire(name);
  ASSERT_TRUE(again);
  EXPECT_EQ(again.lease.Release(), ReleaseStatus::kReleased);
}

// A slot moved (keys and all) to another master behind the client's back:
// the old owner answers MOVED, the client corrects its map and goes to the
// new one. The lock held across the move is still held by its owner there.
TEST_F(Cluster, FollowsAMovedSlot) {
  auto redis = Connect();
  LockClient locks(redis);
  const std::string name = NameInSlot(777, "moved-");
  AcquireResult held = locks.TryAcquire(name);
  ASSERT_TRUE(held);
  const uint16_t slot = internal::KeySlot(LockKey(name));
  const int from = cluster_->OwnerOf(slot);
  const size_t to = OtherMaster(from);
  cluster_->BeginMigration(slot, to);
  while (cluster_->MigrateKeys(slot, to, 100) > 0) {
  }
  cluster_->FinishMigration(slot, to);
  ASSERT_EQ(cluster_->OwnerOf(slot, to), static_cast<int>(to));

  LockClient rival(redis);
  EXPECT_FALSE(rival.TryAcquire(name));
  EXPECT_GE(redis->cluster_stats().moved, 1u);
  EXPECT_EQ(Direct(to, {"EXISTS", LockKey(name)}).integer, 1);
  EXPECT_EQ(held.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_EQ(Direct(to, {"EXISTS", LockKey(name)}).integer, 0);
  AcquireResult next = rival.TryAcquire(name);
  ASSERT_TRUE(next);
  EXPECT_GT(next.lease.fence(), held.lease.fence());
  next.lease.Release();
}

// One key of a slot migrated (IMPORTING / MIGRATING, MIGRATE of that key)
// while the slot is still its old owner's: the owner answers ASK for it,
// and the client sends ASKING and the command to the importing node, once
// per command and without touching its slot map. A key of the same slot not
// yet migrated is still served by the owner, without a redirect.
TEST_F(Cluster, AMigratedKeyIsReachedThroughAsk) {
  const std::string moved_key = "{ask-one}:moved";
  const std::string staying_key = "{ask-one}:staying";
  const uint16_t slot = internal::KeySlot(moved_key);
  ASSERT_EQ(internal::KeySlot(staying_key), slot);
  auto redis = Connect();
  ASSERT_EQ(redis->Execute({"SET", moved_key, "before"}).str, "OK");
  ASSERT_EQ(redis->Execute({"SET", staying_key, "stays"}).str, "OK");
  const int from = cluster_->OwnerOf(slot);
  ASSERT_GE(from, 0);
  const size_t to = OtherMaster(from);

  {
    cluster_->BeginMigration(slot, to);
    // However this block ends, the slot ends up moved (the suite shares the
    // cluster, and each test asks where a slot is).
    struct Finish {
      RedisCluster* cluster;
      uint16_t slot;
      size_t to;
      ~Finish() {
        try {
          while (cluster->MigrateKeys(slot, to, 100) > 0) {
          }
          cluster->FinishMigration(slot, to);
        } catch (const std::exception& e) {
          ADD_FAILURE() << "finishing the migration: " << e.what();
        }
      }
    } finish{cluster_, slot, to};
    const Reply migrated =
        Direct(from, {"MIGRATE", "127.0.0.1",
                      std::to_string(cluster_->node(to).client_port()), "", "0",
                      "5000", "KEYS", moved_key});
    ASSERT_EQ(migrated.str, "OK") << migrated.str;
    ASSERT_EQ(Direct(from, {"EXISTS", moved_key}).integer, 0);
    ASSERT_EQ(cluster_->OwnerOf(slot), from) << "the slot moved already";

    const RedisClient::ClusterStats before = redis->cluster_stats();
    EXPECT_EQ(redis->Execute({"GET", moved_key}).str, "before");
    const RedisClient::ClusterStats after_get = redis->cluster_stats();
    EXPECT_GE(after_get.asked, before.asked + 1) << "GET was not sent by ASK";
    // A write follows the key to the importing node too.
    EXPECT_EQ(redis->Execute({"APPEND", moved_key, "+asked"}).integer, 12);
    EXPECT_EQ(redis->Execute({"GET", moved_key}).str, "before+asked");
    const RedisClient::ClusterStats after_write = redis->cluster_stats();
    EXPECT_GE(after_write.asked, after_get.asked + 2);
    // ASK is for one command: the slot map is not corrected.
    EXPECT_EQ(after_write.moved, before.moved);
    // The key still at the owner is answered there, with no redirect.
    EXPECT_EQ(redis->Execute({"GET", staying_key}).str, "stays");
    EXPECT_EQ(redis->cluster_stats().asked, after_write.asked);
    EXPECT_EQ(Direct(from, {"GET", staying_key}).str, "stays");
    EXPECT_EQ(Direct(from, {"EXISTS", moved_key}).integer, 0)
        << "the write landed on the migrating node";
  }
  // The slot moved: both keys are at the new owner, reached through MOVED.
  ASSERT_EQ(cluster_->OwnerOf(slot, to), static_cast<int>(to));
  EXPECT_EQ(redis->Execute({"GET", moved_key}).str, "before+asked");
  EXPECT_EQ(redis->Execute({"GET", staying_key}).str, "stays");
  EXPECT_EQ(Direct(to, {"GET", moved_key}).str, "before+asked");
}

// A slot migrated key by key while four clients contend for locks in it:
// keys already moved are reached with ASKING (ASK), scripts whose keys the
// migration split wait (TRYAGAIN: every lock script names a key that does
// not exist yet, so none runs in a slot while it migrates), and at the end
// MOVED. Never two holders of one lock, fences only growing, and every
// client acquiring again once the slot has moved.
TEST_F(Cluster, MigrationUnderContentionKeepsOneHolder) {
  const uint16_t slot = 4242;
  std::vector<std::string> names;
  for (int i = 0; i < 3; ++i)
    names.push_back(NameInSlot(slot, "migrating-" + std::to_string(i) + "-"));
  std::vector<std::shared_ptr<RedisClient>> clients;
  for (int i = 0; i < 4; ++i) clients.push_back(Connect());
  Contention::Options options;
  options.wait = seconds(2);
  options.locks.park_cap = milliseconds(50);
  Contention run(clients, names, options);
  ASSERT_TRUE(WaitUntil([&] { return run.acquired() >= 40; }, seconds(30)))
      << run.errors() << " errors";

  const int from = cluster_->OwnerOf(slot);
  const size_t to = OtherMaster(from);
  cluster_->BeginMigration(slot, to);
  // One key at a time, with the contenders running in between (their
  // scripts, which use several keys, wait: TRYAGAIN until the slot moved).
  while (cluster_->MigrateKeys(slot, to, 1) > 0)
    std::this_thread::sleep_for(milliseconds(20));
  cluster_->FinishMigration(slot, to);
  const int before = run.acquired();
  const bool recovered =
      WaitUntil([&] { return run.acquired() >= before + 40; }, seconds(30));
  run.Stop();

  EXPECT_TRUE(recovered) << "no acquisitions after the migration";
  EXPECT_EQ(run.overlaps(), 0) << "two holders at once";
  EXPECT_EQ(run.regressions(), 0) << "a fencing token went backwards";
  const RedisClient::ClusterStats stats = run.cluster_stats();
  EXPECT_GE(stats.moved, 1u) << "nobody was sent to the new owner by MOVED";
  EXPECT_GE(stats.asked + stats.tryagain, 1u)
      << "the migration was never noticed";
  std::printf(
      "measured: slot %u migrated under contention: %d acquisitions, %d "
      "errors, ASK %llu, TRYAGAIN %llu, MOVED %llu\n",
      slot, run.acquired(), run.errors(),
      static_cast<unsigned long long>(stats.asked),
      static_cast<unsigned long long>(stats.tryagain),
      static_cast<unsigned long long>(stats.moved));
}

// A slot set MIGRATING on its owner towards a node that is not importing it
// (a migration half set up): the owner answers ASK for a missing key, the
// target answers MOVED back. The client gives up after a bounded number of
// redirects with an error naming the redirect — never a loop.
TEST_F(Cluster, AnAskMovedLoopIsBounded) {
  const uint16_t slot = 9000;
  const int from = cluster_->OwnerOf(slot);
  const size_t to = OtherMaster(from);
  ASSERT_EQ(Direct(from, {"CLUSTER", "SETSLOT", std::to_string(slot),
                          "MIGRATING", cluster_->NodeId(to)})
                .str,
            "OK");
  auto redis = Connect();
  const std::string name = NameInSlot(slot, "loop-");
  const Reply r = redis->Execute({"GET", LockKey(name)});
  EXPECT_TRUE(r.is_error());
  EXPECT_NE(r.str.find("gave up after 5 redirects"), std::string::npos)
      << r.str;
  ExpectError([&] { LockClient(redis).TryAcquire(name); },
              ErrorCode::kRedisBusy, "redirects");
  ASSERT_EQ(
      Direct(from, {"CLUSTER", "SETSLOT", std::to_string(slot), "STABLE"}).str,
      "OK");
  AcquireResult got = LockClient(redis).TryAcquire(name);
  ASSERT_TRUE(got);
  got.lease.Release();
}

// A transaction through Pipeline would be split over masters, or a queued
// command resent alone after a MOVED: refused before anything is sent.
TEST_F(Cluster, APipelinedTransactionIsRefused) {
  auto redis = Connect();
  ExpectError(
      [&] {
        redis->Pipeline({{"MULTI"}, {"SET", "{tx}:a", "1"}, {"EXEC"}});
      },
      ErrorCode::kInvalidArgument, "use OptimisticUpdate");
  EXPECT_EQ(redis->Execute({"EXISTS", "{tx}:a"}).integer, 0);
}

// A master that died fails only its own commands of a pipeline that spans
// masters (the watchdog's renewal batch must not lose every lease for one
// node); a command for it alone fails as on one server.
TEST(ClusterSetup, ADeadMasterFailsOnlyItsOwnCommands) {
  RedisCluster cluster({.masters = 3, .replicas = 0});
  RedisOptions o = cluster.ClientOptions(cluster.url(true));
  o.connect_timeout = milliseconds(500);
  RedisClient redis(o);
  std::vector<Command> sets, gets;
  for (int i = 0; i < 30; ++i) {
    sets.push_back({"SET", "iso:" + std::to_string(i), std::to_string(i)});
    gets.push_back({"GET", "iso:" + std::to_string(i)});
  }
  for (const Reply& r : redis.Pipeline(sets)) ASSERT_EQ(r.str, "OK");
  const int dead = cluster.OwnerOf(internal::KeySlot("iso:0"));
  // A slot moved to the master about to die, behind the client's back: its
  // old owner will answer MOVED, and the redirect meets a dead node.
  std::string moved_key;
  for (int i = 0; moved_key.empty(); ++i) {
    const std::string key = "moved-to-dead:" + std::to_string(i);
    if (cluster.OwnerOf(internal::KeySlot(key)) != dead) moved_key = key;
  }
  const uint16_t moved_slot = internal::KeySlot(moved_key);
  cluster.BeginMigration(moved_slot, dead);
  cluster.FinishMigration(moved_slot, dead);
  cluster.node(dead).Kill();
  const std::vector<Reply> got = redis.Pipeline(gets);
  int failed = 0;
  for (int i = 0; i < 30; ++i) {
    const std::string key = "iso:" + std::to_string(i);
    const int owner = cluster.OwnerOf(internal::KeySlot(key),
                                      static_cast<size_t>(cluster.AnyLive()));
    if (owner == dead) {
      ++failed;
      EXPECT_TRUE(got[i].is_error()) << key;
      EXPECT_EQ(got[i].str.rfind("ERR lockfleet: ", 0), 0u) << got[i].str;
    } else {
      EXPECT_EQ(got[i].str, std::to_string(i)) << key;
    }
  }
  EXPECT_GT(failed, 0);
  EXPECT_LT(failed, 30);
  // One command alone: the call fails (an error, never an error *reply*
  // that a caller could read as a value), also when it got there by MOVED.
  for (const std::string& key : {std::string("iso:0"), moved_key}) {
    ExpectError(
        [&] {
          redis.Execute({"GET", key});
        },
        ErrorCode::kRedisUnavailable, "");
  }
}

TEST(ClusterSetup, ASeedNotInClusterModeIsAClearError) {
  RedisServer plain({.tcp = true});
  RedisOptions o;
  o.url = "redis+cluster://127.0.0.1:" + std::to_string(plain.port());
  RedisClient redis(o);
  ExpectError([&] { redis.Execute({"PING"}); }, ErrorCode::kInvalidArgument,
              "is not in cluster mode");
}

TEST(ClusterSetup, UnreachableSeedsFailWithinTheTimeout) {
  RedisServer gone({.tcp = true});
  const int port = gone.port();
  gone.Stop();
  RedisOptions o;
  o.url = "redis+cluster://127.0.0.1:" + std::to_string(port) +
          ",127.0.0.1:" + std::to_string(port);
  o.connect_timeout = milliseconds(300);
  o.command_timeout = milliseconds(300);
  RedisClient redis(o);
  const auto start = std::chrono::steady_clock::now();
  ExpectError([&] { redis.Execute({"PING"}); }, ErrorCode::kRedisUnavailable,
              "gave its slot map");
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(10));
}

TEST(ClusterSetup, ClusterOverTls) {
  TlsCerts certs;
  RedisServer::Options::Tls tls{.cert_file = certs.server_cert,
                                .key_file = certs.server_key,
                                .ca_file = certs.ca_file,
                                .client_cert_file = certs.client_cert,
                                .client_key_file = certs.client_key};
  RedisCluster cluster({.masters = 3, .replicas = 0, .tls = tls});
  ASSERT_EQ(cluster.url().rfind("rediss+cluster://", 0), 0u);
  auto redis =
      std::make_shared<RedisClient>(cluster.ClientOptions(cluster.url()));
  LockClient locks(redis);
  for (int i = 0; i < 10; ++i) {
    AcquireResult got = locks.TryAcquire("tls-lock-" + std::to_string(i));
    ASSERT_TRUE(got);
    EXPECT_EQ(got.lease.Release(), ReleaseStatus::kReleased);
  }
  EXPECT_EQ(redis->Masters().size(), 3u);
}

}  // namespace
}  // namespace lockfleet::testing
