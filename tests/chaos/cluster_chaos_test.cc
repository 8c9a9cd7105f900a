// Scenario 8f (docs/RELIABILITY.md): a Redis Cluster changing under
// contention. LockClients on redis+cluster:// contend for locks whose
// slots are on one master while (a) that master is killed (SIGKILL) and its
// replica promoted, with min_replicas 1, and (b) `redis-cli --cluster
// reshard` moves those slots to another master. Checked throughout: never
// two holders of a lock (an in-process count every holder raises and
// lowers), fencing tokens strictly increasing per lock, and the clients
// acquiring again afterwards without being restarted.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "key_slot.h"
#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/redis_client.h"
#include "support/contention.h"
#include "support/redis_cluster.h"
#include "support/shell.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

// Lock names whose slots node `node` serves (the lowest slots first).
std::vector<std::string> NamesOn(RedisCluster& cluster, size_t node,
                                 int count) {
  std::vector<std::string> names;
  for (int i = 0; static_cast<int>(names.size()) < count; ++i) {
    const std::string name = "hot-" + std::to_string(i);
    const uint16_t slot = internal::KeySlot("lockfleet:{" + name + "}:lock");
    if (cluster.OwnerOf(slot) == static_cast<int>(node)) names.push_back(name);
  }
  return names;
}

// Four contenders on `names`, each with its own client of every seed.
std::unique_ptr<Contention> Contend(RedisCluster& cluster,
                                    std::vector<std::string> names,
                                    int min_replicas) {
  std::vector<std::shared_ptr<RedisClient>> clients;
  for (int i = 0; i < 4; ++i) {
    RedisOptions ro = cluster.ClientOptions(cluster.url(true));
    ro.connect_timeout = milliseconds(500);
    ro.command_timeout = milliseconds(1000);
    clients.push_back(std::make_shared<RedisClient>(ro));
  }
  Contention::Options options;
  options.locks.min_replicas = min_replicas;
  options.locks.replica_timeout = milliseconds(1000);
  options.locks.default_lease = seconds(3);
  options.locks.park_cap = milliseconds(100);
  options.error_pause = milliseconds(100);
  return std::make_unique<Contention>(std::move(clients), std::move(names),
                                      options);
}

TEST(ClusterChaos, AMasterKilledUnderContention) {
  // Two replicas per master: the promoted one still has a replica to
  // acknowledge grants (min_replicas 1).
  RedisCluster cluster(
      {.masters = 3, .replicas = 2, .node_timeout = milliseconds(1000)});
  const int victim = cluster.OwnerOf(0);
  ASSERT_GE(victim, 0);
  const std::vector<std::string> names = NamesOn(cluster, victim, 3);
  const uint16_t slot = internal::KeySlot("lockfleet:{" + names[0] + "}:lock");
  auto run = Contend(cluster, names, /*min_replicas=*/1);
  ASSERT_TRUE(WaitUntil([&] { return run->acquired() >= 50; }, seconds(30)));

  const auto killed_at = steady_clock::now();
  cluster.node(victim).Kill();
  const int promoted = cluster.WaitForPromotion(victim, slot);
  ASSERT_GE(promoted, 0) << "no replica was promoted";
  const int before = run->acquired();
  const bool recovered =
      WaitUntil([&] { return run->acquired() >= before + 50; }, seconds(60));
  const auto recovered_at = steady_clock::now();
  run->Stop();

  EXPECT_TRUE(recovered) << "the clients did not acquire on the new master";
  EXPECT_EQ(run->overlaps(), 0) << "two holders at once";
  EXPECT_EQ(run->regressions(), 0) << "a fencing token went backwards";
  EXPECT_GE(run->cluster_stats().refreshes, 2u)
      << "the slot map was never re-read";
  std::printf(
      "measured: cluster master killed under contention: %d acquisitions, "
      "%d errors ridden out, 50 acquisitions on the promoted replica %lld ms "
      "after the kill (node timeout 1 s)\n",
      run->acquired(), run->errors(),
      static_cast<long long>(
          std::chrono::duration_cast<milliseconds>(recovered_at - killed_at)
              .count()));
}

TEST(ClusterChaos, ReshardUnderContention) {
  RedisCluster cluster({.masters = 3, .replicas = 0});
  const int from = cluster.OwnerOf(0);
  const int to = cluster.OwnerOf(16383);
  ASSERT_GE(from, 0);
  ASSERT_NE(from, to);
  // redis-cli moves the source's lowest slots first: the hot locks' slots
  // are among the first 200.
  std::vector<std::string> names;
  for (int i = 0; names.size() < 3; ++i) {
    const std::string name = "reshard-" + std::to_string(i);
    if (internal::KeySlot("lockfleet:{" + name + "}:lock") < 200)
      names.push_back(name);
  }
  auto run = Contend(cluster, names, /*min_replicas=*/0);
  ASSERT_TRUE(WaitUntil([&] { return run->acquired() >= 50; }, seconds(30)));

  const ShellResult moved =
      RunShell("timeout 120 redis-cli --cluster reshard 127.0.0.1:" +
               std::to_string(cluster.node(from).client_port()) +
               " --cluster-from " + cluster.NodeId(from) + " --cluster-to " +
               cluster.NodeId(to) + " --cluster-slots 200 --cluster-yes");
  ASSERT_EQ(moved.status, 0) << moved.output;
  ASSERT_EQ(cluster.OwnerOf(0), to);
  const int before = run->acquired();
  const bool recovered =
      WaitUntil([&] { return run->acquired() >= before + 50; }, seconds(60));
  run->Stop();

  EXPECT_TRUE(recovered) << "no acquisitions after the reshard";
  EXPECT_EQ(run->overlaps(), 0) << "two holders at once";
  EXPECT_EQ(run->regressions(), 0) << "a fencing token went backwards";
  const RedisClient::ClusterStats stats = run->cluster_stats();
  EXPECT_GE(stats.moved, 1u) << "nobody followed the slots (MOVED)";
  std::printf(
      "measured: 200 slots resharded under contention: %d acquisitions, %d "
      "errors, MOVED %llu, ASK %llu, TRYAGAIN %llu, map reads %llu\n",
      run->acquired(), run->errors(),
      static_cast<unsigned long long>(stats.moved),
      static_cast<unsigned long long>(stats.asked),
      static_cast<unsigned long long>(stats.tryagain),
      static_cast<unsigned long long>(stats.refreshes));
}

}  // namespace
}  // namespace lockfleet::testing
