// SentinelGroup: a Redis master, its replicas and three sentinels watching
// it, all real redis-server processes on loopback (RedisServer), for tests
// of redis+sentinel:// clients. The sentinels declare a master down after
// `down_after` (5 s: a loaded machine does not fail over by accident; the
// tests that kill the master set 1 s).
//
// The constructor returns when every replica is in sync and every sentinel
// knows every replica and the other sentinels (so SENTINEL FAILOVER and a
// quorum failover can both run at once).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lockfleet/lockcore/redis_client.h"
#include "support/redis_server.h"

namespace lockfleet::testing {

class SentinelGroup {
 public:
  struct Options {
    int replicas = 1;
    int sentinels = 3;
    std::string master_name = "lockfleet";
    std::chrono::milliseconds down_after{5000};
    // TLS everywhere (master, replicas, sentinels, replication): the
    // server's certificate and key (for 127.0.0.1) and its CA.
    RedisServer::Options::Tls tls;
    std::string sentinel_password;  // requirepass of the sentinels
  };

  explicit SentinelGroup(Options options);
  SentinelGroup() : SentinelGroup(Options{}) {}
  ~SentinelGroup();

  // redis+sentinel://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3/<name>
  // (rediss+sentinel:// with TLS).
  std::string url() const;
  const std::string& master_name() const { return options_.master_name; }

  // The data nodes: 0 is the first master, 1.. the replicas.
  RedisServer& node(size_t i) { return *nodes_[i]; }
  size_t nodes() const { return nodes_.size(); }
  RedisServer& sentinel(size_t i) { return *sentinels_[i]; }

  // The node the first sentinel names master now (-1 if none answers).
  int MasterIndex();
  // SENTINEL FAILOVER, then waits (up to 60 s) until every sentinel names
  // the promoted node and it says ROLE master. Returns its index.
  int Failover();
  // Waits (up to 60 s) until every sentinel names a master other than
  // `old_index` that says ROLE master; returns its index, or -1.
  int WaitForNewMaster(int old_index);
  // Waits (up to 60 s) until the master has every other live node in sync.
  bool WaitForReplicas(size_t count);

  // A client of one node / sentinel (TLS options filled in).
  std::unique_ptr<RedisClient> Client(const std::string& url) const;

 private:
  // The client the waits above poll `url` through: one per endpoint, kept
  // (it reconnects on the next use after a failure). A new client per poll
  // opened hundreds of connections a second, and each closed one stays in
  // TIME_WAIT for 60 s: thousands of entries in /proc/net/tcp, which made
  // every kafka-local start of the same ctest run (it reads that file in
  // bash) take a minute instead of seconds.
  RedisClient& Poller(const std::string& url);

  int IndexOfPort(int port) const;
  int Port(const RedisServer& server) const;

  Options options_;
  std::vector<std::unique_ptr<RedisServer>> nodes_;
  std::vector<std::unique_ptr<RedisServer>> sentinels_;
  std::map<std::string, std::unique_ptr<RedisClient>> pollers_;
};

}  // namespace lockfleet::testing
