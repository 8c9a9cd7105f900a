// Scenario 8e (docs/RELIABILITY.md): the master killed (SIGKILL) under
// contention, behind three real sentinels. Four LockClients on
// redis+sentinel:// with min_replicas 1 contend for one lock while the
// master dies and a replica is promoted. Checked throughout: never two
// holders at once (an in-process flag every holder sets and clears), fencing
// tokens strictly increasing across the failover, and the clients
// acquiring again on the new master without being restarted.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/redis_client.h"
#include "support/sentinel_group.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

TEST(SentinelChaos, TheMasterKilledUnderContention) {
  // Two replicas: the promoted one still has a replica to acknowledge
  // grants (min_replicas 1).
  SentinelGroup group({.replicas = 2, .down_after = milliseconds(1000)});
  std::atomic<bool> stop{false};
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> regressions{0};
  std::atomic<int> acquired{0};
  std::atomic<int> errors{0};
  std::mutex fence_mu;
  int64_t last_fence = 0;  // guarded by fence_mu

  auto contender = [&] {
    RedisOptions ro;
    ro.url = group.url();
    ro.connect_timeout = milliseconds(500);
    ro.command_timeout = milliseconds(1000);
    LockClientOptions lo;
    lo.min_replicas = 1;
    lo.replica_timeout = milliseconds(1000);
    lo.default_lease = seconds(3);
    lo.park_cap = milliseconds(100);
    LockClient locks(std::make_shared<RedisClient>(ro), lo);
    while (!stop.load()) {
      try {
        AcquireResult got = locks.AcquireFor("hot", seconds(1));
        if (!got) continue;
        if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
        {
          std::lock_guard lock(fence_mu);
          if (got.lease.fence() <= last_fence) regressions.fetch_add(1);
          last_fence = std::max(last_fence, got.lease.fence());
        }
        std::this_thread::sleep_for(milliseconds(1));
        inside.fetch_sub(1);
        acquired.fetch_add(1);
        got.lease.Release();
      } catch (const Error&) {
        // Redis down or failing over: counted, and tried again.
        errors.fetch_add(1);
        std::this_thread::sleep_for(milliseconds(50));
      }
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back(contender);

  ASSERT_TRUE(WaitUntil([&] { return acquired.load() >= 50; }, seconds(30)));
  const int old_master = group.MasterIndex();
  ASSERT_GE(old_master, 0);
  const auto killed_at = steady_clock::now();
  group.node(old_master).Kill();
  const int new_master = group.WaitForNewMaster(old_master);
  ASSERT_GE(new_master, 0) << "no replica was promoted";
  const int before = acquired.load();
  const bool recovered =
      WaitUntil([&] { return acquired.load() >= before + 50; }, seconds(60));
  const auto recovered_at = steady_clock::now();
  stop.store(true);
  for (std::thread& t : threads) t.join();

  EXPECT_TRUE(recovered) << "the clients did not acquire on the new master";
  EXPECT_EQ(overlaps.load(), 0) << "two holders at once";
  EXPECT_EQ(regressions.load(), 0) << "a fencing token went backwards";
  std::printf(
      "measured: master killed under contention: %d acquisitions, %d "
      "errors ridden out, 50 acquisitions on the new master %lld ms after "
      "the kill\n",
      acquired.load(), errors.load(),
      static_cast<long long>(
          std::chrono::duration_cast<milliseconds>(recovered_at - killed_at)
              .count()));
}

}  // namespace
}  // namespace lockfleet::testing
