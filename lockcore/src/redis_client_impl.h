// RedisClient's private parts, shared by redis_client.cc and optimistic.cc.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cluster.h"
#include "lockfleet/lockcore/redis_client.h"
#include "redis_connection.h"
#include "sentinel.h"
#include "timed_mutex.h"
#include "tls.h"

namespace lockfleet {

class RedisClient::Impl {
 public:
  explicit Impl(RedisOptions opts);
  // The pool of one cluster node `node`, with the options, credentials and
  // TLS context of `cluster`.
  Impl(const Impl& cluster, const RedisNode& node);
  ~Impl();

  // A connection lent out of the pool; returned (or dropped if broken) on
  // destruction.
  class Lent {
   public:
    Lent(Impl* pool, std::unique_ptr<internal::RedisConnection> conn)
        : pool_(pool), conn_(std::move(conn)) {}
    Lent(Lent&&) = default;
    Lent& operator=(Lent&& other) noexcept;  // returns the one it held
    ~Lent();
    internal::RedisConnection* operator->() { return conn_.get(); }
    internal::RedisConnection& operator*() { return *conn_; }

   private:
    Impl* pool_;
    std::unique_ptr<internal::RedisConnection> conn_;
  };

  // Waits up to `timeout` (> 0; else command_timeout) for a free
  // connection, connecting within the shorter of it and connect_timeout.
  // Throws Error.
  Lent Borrow(std::chrono::milliseconds timeout = {});
  // `timeout` (> 0) bounds the whole call: pool wait, connect (and TLS
  // handshake), and the round trip. `server_wait` (a WAIT's timeout) is
  // added to the round trip's bound.
  std::vector<Reply> Run(const std::vector<const Command*>& commands,
                         std::chrono::milliseconds timeout = {},
                         std::chrono::milliseconds server_wait = {});
  std::string ShaOf(const Script& script,
                    std::chrono::milliseconds timeout = {});

  // Redis Cluster (redis+cluster://); null otherwise.
  bool cluster() const { return slots_ != nullptr; }
  // Cluster: the pool of `node`, made on first use. Pools live as long as
  // the client (a Lent may point into one).
  std::shared_ptr<Impl> NodePool(const RedisNode& node);
  // Cluster: reads the slot map (CLUSTER SLOTS) from the known masters,
  // then the seeds, by `deadline` — unless another thread read it since
  // this call began, or (`force` false) it was read in the last 100 ms.
  // Throws NotSentError, or Error(kInvalidArgument) for a seed that is not
  // in cluster mode.
  void RefreshSlots(internal::Deadline deadline, bool force);
  // Cluster: a MOVED — the map takes the hint and is read again soon.
  void FollowMoved(const internal::Redirect& to);
  // Cluster: the master serving `slot` (reading the map first if it was
  // never read or a MOVED made it stale). Throws NotSentError.
  RedisNode OwnerOf(std::optional<uint16_t> slot, internal::Deadline deadline);
  std::unique_ptr<internal::SlotMap> slots_;
  std::atomic<bool> stale_{false};  // a MOVED or a failed node: read again
  std::atomic<uint64_t> moved{0}, asked{0}, tryagain{0}, refreshes{0};

  RedisOptions options;
  RedisEndpoint endpoint;  // .tls set when options.tls.enabled
  // The TLS context every connection of the pool shares; null without TLS.
  std::shared_ptr<const internal::TlsContext> tls;
  std::atomic<uint64_t> round_trips{0};

 private:
  void Return(std::unique_ptr<internal::RedisConnection> conn);
  // Opens a connection: to `endpoint`, or on a Sentinel client to the
  // master (asking the sentinels first if its address is unknown), tagged
  // with the master generation it was opened for.
  std::unique_ptr<internal::RedisConnection> Open(
      std::chrono::milliseconds budget);
  // Sentinel: where the master is, and the generation of that address.
  struct MasterAt {
    RedisEndpoint endpoint;
    uint64_t generation = 0;
  };
  // The master's address, asking the sentinels (by `deadline`) if it is
  // unknown. Throws Error.
  MasterAt Master(internal::Deadline deadline);
  MasterAt KnownMaster();  // REQUIRES: master_mu_ held, master_ set
  // `endpoint` (credentials, db, TLS) at `node` instead of its sentinels or
  // seeds: a master's or a cluster node's.
  RedisEndpoint EndpointAt(const RedisNode& node) const;
  // Sentinel: the master moved to `node` (a +switch-master, or an answer).
  void MasterIs(const RedisNode& node);
  // Sentinel: the master of generation `generation` failed a connection
  // (or is a replica now): forget its address, so the next connection asks
  // the sentinels again. No-op for an older generation.
  void MasterFailed(uint64_t generation);
  // Whether `conn` is to the master as it is now (always without Sentinel).
  bool Current(const internal::RedisConnection& conn) const;

  // Runs `commands` on `conn`; a connection failure on a Sentinel client
  // forgets the master's address (MasterFailed).
  std::vector<Reply> RunOn(Lent& conn,
                           const std::vector<const Command*>& commands,
                           std::chrono::milliseconds bound);

  // Cluster: Run, routed by slot (redis_client.cc).
  std::vector<Reply> RunCluster(const std::vector<const Command*>& commands,
                                std::chrono::milliseconds timeout,
                                std::chrono::milliseconds server_wait);
  std::mutex nodes_mu_;
  std::map<RedisNode, std::shared_ptr<Impl>> nodes_;  // guarded by nodes_mu_
  internal::TimedMutex refresh_mu_;  // one thread at a time reads the map
  // The last read of the map (answered or not); guarded by refresh_mu_.
  std::chrono::steady_clock::time_point refreshed_at_;
  // Nodes whose connection failed the last read: asked last next time.
  std::vector<RedisNode> unreadable_;  // guarded by refresh_mu_

  // Sentinel only (null otherwise); its watch thread starts on first use.
  std::unique_ptr<internal::Sentinel> sentinel_;
  std::once_flag watching_;
  internal::TimedMutex ask_mu_;  // one thread at a time asks the sentinels
  std::mutex master_mu_;
  std::optional<RedisNode> master_;      // guarded by master_mu_
  std::atomic<uint64_t> generation_{1};  // changes with master_

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<internal::RedisConnection>>
      idle_;      // guarded by mu_
  int open_ = 0;  // connections existing, idle or lent; guarded by mu_
};

}  // namespace lockfleet
