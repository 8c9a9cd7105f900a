// Chaos scenario 7 — sustained load (docs/RELIABILITY.md): 8 contender
// processes x 8 threads on 100 locks for 60 s through `lockfleet bench`, in
// the product's mode (Kafka wake-ups, fair), against a test-started
// redis-server and a `lockfleet broker` process. Checks: zero violations,
// every contender finished, each contender's RSS at the end within a
// generous bound of its RSS after warm-up, open descriptors unchanged, and
// Redis back to its baseline of connected clients once the run is over.
// The figures are printed for the reliability report.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "cli/broker_process.h"
#include "cli/cli_process.h"
#include "lockfleet/lockcore/redis_client.h"
#include "support/redis_server.h"

namespace lockfleet::testing {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr long long kRssSlackKb = 20 * 1024;  // +20 MB, or x1.5 if larger
constexpr long long kFdSlack = 2;

long long ConnectedClients(RedisClient& redis) {
  const std::string info = redis.Execute({"INFO", "clients"}).str;
  const size_t at = info.find("connected_clients:");
  return at == std::string::npos
             ? -1
             : std::stoll(info.substr(at + sizeof("connected_clients:") - 1));
}

TEST(LoadChaosTest, SustainedLoadKeepsExclusionMemoryAndDescriptors) {
  RedisServer server;
  BrokerProcess broker;
  RedisClient redis(RedisOptions{.url = server.url(), .pool_size = 1});
  const long long clients_before = ConnectedClients(redis);

  const CliResult result = RunCli(
      {"bench", "--json", "--mode", "kafka", "--processes", "8", "--threads",
       "8", "--locks", "100", "--seconds", "60", "--hold-ms", "1", "--redis",
       server.url(), "--kafka", broker.bootstrap()},
      {}, seconds(240));
  ASSERT_EQ(result.status, 0) << result.err;
  const json report = json::parse(result.out);

  const auto acquisitions = report.at("acquisitions").get<uint64_t>();
  std::cout << "scenario 7: " << acquisitions << " acquisitions ("
            << report.at("acquisitions_per_second").get<double>()
            << "/s), violations " << report.at("violations") << ", errors "
            << report.at("errors").dump() << ", resources "
            << report.at("resources").dump() << ", redis clients "
            << report.at("redis_connected_clients").dump() << "\n";
  EXPECT_GT(acquisitions, 0u);
  EXPECT_EQ(report.at("violations").get<uint64_t>(), 0u);
  EXPECT_EQ(report.at("failed_processes").get<int>(), 0);

  for (const json& p : report.at("processes")) {
    SCOPED_TRACE(p.dump());
    ASSERT_TRUE(p.at("ok").get<bool>());
    const long long rss_warm = p.at("rss_kb_warm").get<long long>();
    const long long rss_end = p.at("rss_kb_end").get<long long>();
    std::cout << "  contender " << p.at("index") << ": rss " << rss_warm
              << " -> " << rss_end << " kB, fds " << p.at("fds_warm") << " -> "
              << p.at("fds_end") << ", acquisitions " << p.at("acquisitions")
              << "\n";
    EXPECT_GT(p.at("acquisitions").get<uint64_t>(), 0u);
    EXPECT_LE(rss_end, std::max(rss_warm + kRssSlackKb, rss_warm * 3 / 2));
    EXPECT_LE(std::abs(p.at("fds_end").get<long long>() -
                       p.at("fds_warm").get<long long>()),
              kFdSlack);
  }

  // No connection outlives the run: the tool's own view, and ours (the
  // server notices closed sockets asynchronously).
  const json& clients = report.at("redis_connected_clients");
  EXPECT_LE(clients.at("after").get<long long>(),
            clients.at("before").get<long long>());
  long long clients_after = ConnectedClients(redis);
  for (int i = 0; i < 100 && clients_after > clients_before; ++i) {
    std::this_thread::sleep_for(milliseconds(50));
    clients_after = ConnectedClients(redis);
  }
  std::cout << "  redis connected_clients (test's view): before "
            << clients_before << ", after " << clients_after << "\n";
  EXPECT_EQ(clients_after, clients_before);
}

}  // namespace
}  // namespace lockfleet::testing
