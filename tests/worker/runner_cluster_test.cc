// JobRunner on a Redis Cluster (redis+cluster://, three masters from
// `redis-cli --cluster create`): the flash sale across four workers never
// oversells with every job delivered twice — the lock, the fenced stock,
// the done markers and the dead letters each routed by their own keys —
// and a failing job is dead-lettered there.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "key_slot.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/worker/builtin_handlers.h"
#include "lockfleet/worker/runner.h"
#include "support/loopback_bus.h"
#include "support/redis_cluster.h"

namespace lockfleet::worker {
namespace {

using std::chrono::milliseconds;

Job Purchase(std::string id, std::string product) {
  return Job{.id = std::move(id),
             .lock = std::move(product),
             .type = "inventory.purchase"};
}

TEST(RunnerCluster, FlashSaleAcrossWorkersNeverOversellsOnACluster) {
  testing::RedisCluster cluster({.masters = 3, .replicas = 0});
  auto handlers = std::make_shared<HandlerRegistry>();
  RegisterBuiltinHandlers(*handlers);
  std::atomic<int> calls{0};
  handlers->Register("flaky", {.run = [&](JobContext&) -> JobResult {
                       ++calls;
                       throw std::runtime_error("boom");
                     }});
  auto bus = std::make_shared<testing::LoopbackBus>();
  auto admin =
      std::make_shared<RedisClient>(cluster.ClientOptions(cluster.url()));
  constexpr int kProducts = 6, kUnits = 20, kJobs = 200, kWorkers = 4;
  std::set<int> masters;
  for (int p = 0; p < kProducts; ++p) {
    const std::string product = "product:" + std::to_string(p);
    SeedStock(*admin, "lockfleet", product, kUnits);
    masters.insert(
        cluster.OwnerOf(internal::KeySlot("lockfleet:{" + product + "}:lock")));
  }
  ASSERT_GE(masters.size(), 2u) << "the products all on one master";

  std::vector<std::shared_ptr<LockClient>> clients;
  std::vector<std::shared_ptr<JobRunner>> runners;
  for (int w = 0; w < kWorkers; ++w) {
    auto redis =
        std::make_shared<RedisClient>(cluster.ClientOptions(cluster.url()));
    auto locks = std::make_shared<LockClient>(
        redis, LockClientOptions{.publisher = bus});
    bus->Subscribe(locks.get());
    clients.push_back(locks);
    runners.push_back(std::make_shared<JobRunner>(
        locks, redis, handlers,
        RunnerOptions{.max_attempts = 2, .retry_backoff = milliseconds(1)}));
  }
  std::atomic<int> next{0}, ok{0}, duplicate{0}, rejected{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kWorkers * 2; ++t) {
    threads.emplace_back([&, t] {
      for (int i; (i = next++) < kJobs;) {
        for (int copy = 0; copy < 2; ++copy) {  // every job delivered twice
          const JobResult r = runners[(t + copy) % kWorkers]->Run(
              Purchase("o" + std::to_string(i),
                       "product:" + std::to_string(i % kProducts)),
              JobSource::kKafka, {});
          if (r == JobResult::kOk) ++ok;
          if (r == JobResult::kDuplicate) ++duplicate;
          if (r == JobResult::kRejected) ++rejected;
          if (r == JobResult::kFailed) ++failed;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int p = 0; p < kProducts; ++p) {
    const StockAudit audit =
        AuditStock(*admin, "lockfleet", "product:" + std::to_string(p));
    EXPECT_EQ(audit.sold, kUnits) << p;
    EXPECT_EQ(audit.stock, 0) << p;
    EXPECT_EQ(audit.oversold(), 0) << p;
  }
  EXPECT_EQ(ok.load(), kProducts * kUnits);
  EXPECT_EQ(rejected.load(), kJobs - kProducts * kUnits);
  EXPECT_EQ(duplicate.load(), kJobs);
  EXPECT_EQ(failed.load(), 0);

  const Job flaky{.id = "f1", .lock = "l", .type = "flaky"};
  EXPECT_EQ(runners[0]->Run(flaky, JobSource::kKafka, {}), JobResult::kFailed);
  EXPECT_EQ(calls.load(), 2);
  EXPECT_EQ(
      admin->Execute({"LLEN", JobRunner::DeadLetterKey("lockfleet")}).integer,
      1);
  for (const auto& locks : clients) bus->Unsubscribe(locks.get());
}

}  // namespace
}  // namespace lockfleet::worker
