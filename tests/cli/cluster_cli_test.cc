// The CLI on a Redis Cluster (redis+cluster://): `lockfleet lock` runs a
// command under a lock, `lockfleet locks` finds held locks on every master
// (SCAN walks each one), and a plain server given as a cluster seed is a
// clear error with a non-zero exit.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "cli/cli_process.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/redis_client.h"
#include "support/redis_cluster.h"
#include "support/redis_server.h"

namespace lockfleet::testing {
namespace {

using json = nlohmann::json;

TEST(ClusterCli, LockAndLocksOnACluster) {
  RedisCluster cluster({.masters = 3, .replicas = 0});
  const std::string url = cluster.url();
  const CliResult ran = RunCli({"lock", "--redis", url, "cli-cluster", "--",
                                "sh", "-c", "echo fence=$LOCKFLEET_FENCE"});
  ASSERT_EQ(ran.status, 0) << ran.err;
  EXPECT_NE(ran.out.find("fence="), std::string::npos) << ran.out;

  auto redis = std::make_shared<RedisClient>(cluster.ClientOptions(url));
  LockClient holder(redis);
  std::vector<Lease> held;
  for (int i = 0; i < 12; ++i) {
    AcquireResult got = holder.TryAcquire("listed-" + std::to_string(i),
                                          {.lease = std::chrono::seconds(60)});
    ASSERT_TRUE(got);
    held.push_back(std::move(got.lease));
  }
  const CliResult listed = RunCli({"locks", "--redis", url, "--json"});
  ASSERT_EQ(listed.status, 0) << listed.err;
  const json all = json::parse(listed.out);
  std::set<std::string> names;
  for (const json& lock : all["locks"]) names.insert(lock["name"]);
  EXPECT_EQ(names.size(), 12u) << listed.out;  // from all three masters
  for (Lease& lease : held) lease.Release();

  RedisServer plain({.tcp = true});
  const CliResult wrong =
      RunCli({"lock", "--redis",
              "redis+cluster://127.0.0.1:" + std::to_string(plain.port()), "x",
              "--", "true"});
  EXPECT_NE(wrong.status, 0);
  EXPECT_NE(wrong.err.find("is not in cluster mode"), std::string::npos)
      << wrong.err;
}

}  // namespace
}  // namespace lockfleet::testing
