// RedisCluster: a real Redis Cluster on loopback for tests of
// redis+cluster:// clients — `masters` redis-server processes in cluster
// mode (plus `replicas` per master), joined and given the 16384 slots by
// `redis-cli --cluster create ... --cluster-yes`, as an operator would.
//
// The constructor returns when every node says cluster_state:ok, agrees on
// the slot map, and (with replicas) every replica is in sync. The node
// timeout (failure detection) defaults to 5 s so a loaded machine does not
// fail a node over by accident; tests that kill a master set less.
//
// Slot migration by hand, the way `redis-cli --cluster reshard` does it
// (CLUSTER SETSLOT IMPORTING / MIGRATING, MIGRATE key by key, SETSLOT
// NODE), in steps a test can interleave with its clients.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lockfleet/lockcore/redis_client.h"
#include "support/redis_server.h"

namespace lockfleet::testing {

class RedisCluster {
 public:
  struct Options {
    int masters = 3;
    int replicas = 0;  // per master
    std::chrono::milliseconds node_timeout{5000};
    // TLS everywhere (clients, the cluster bus, replication): the server's
    // certificate and key (for 127.0.0.1), its CA, and a client
    // certificate (the cluster bus is always mutual TLS).
    RedisServer::Options::Tls tls;
  };

  explicit RedisCluster(Options options);
  RedisCluster() : RedisCluster(Options{}) {}
  ~RedisCluster();

  // redis+cluster://127.0.0.1:P (the first node as the only seed), or with
  // every node: redis+cluster://127.0.0.1:P1,127.0.0.1:P2,...
  // (rediss+cluster:// with TLS).
  std::string url(bool all_seeds = false) const;

  RedisServer& node(size_t i) { return *nodes_[i]; }
  size_t nodes() const { return nodes_.size(); }
  // A plain client of node i (TLS options filled in), not routed.
  std::unique_ptr<RedisClient> Client(size_t i) const;
  // RedisOptions for `url` with the TLS options filled in.
  RedisOptions ClientOptions(const std::string& url) const;
  std::string NodeId(size_t i) const;

  // The node (index) serving `slot`, as node `asked` (a live one) says.
  int OwnerOf(uint16_t slot, size_t asked = 0) const;
  // The index of the first live node that answers, or -1.
  int AnyLive() const;

  // Moving `slot` from its owner to node `to`:
  // 1. IMPORTING on `to`, MIGRATING on the owner (clients now get ASK for
  //    keys already moved);
  void BeginMigration(uint16_t slot, size_t to);
  // 2. MIGRATE up to `batch` keys still at the owner; returns how many
  //    (0: none left);
  int MigrateKeys(uint16_t slot, size_t to, int batch);
  // 3. CLUSTER SETSLOT NODE on both, then the others: clients get MOVED.
  void FinishMigration(uint16_t slot, size_t to);

  // Waits (up to 60 s) until every live node says cluster_state:ok and
  // they agree on the owners of every slot.
  bool WaitForStable();
  // Waits (up to 60 s) until a node other than `killed` serves `slot` (one
  // `killed` served) and the live nodes are stable. Returns that node, or
  // -1.
  int WaitForPromotion(size_t killed, uint16_t slot);

 private:
  Options options_;
  std::vector<std::unique_ptr<RedisServer>> nodes_;
};

}  // namespace lockfleet::testing
