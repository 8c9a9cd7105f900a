// RedisClient's private parts, shared by redis_client.cc and optimistic.cc.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "lockfleet/lockcore/redis_client.h"
#include "redis_connection.h"
#include "sentinel.h"
#include "tls.h"

namespace lockfleet {

class RedisClient::Impl {
 public:
  explicit Impl(RedisOptions opts);
  ~Impl();

  // A connection lent out of the pool; returned (or dropped if broken) on
  // destruction.
  class Lent {
   public:
    Lent(Impl* pool, std::unique_ptr<internal::RedisConnection> conn)
        : pool_(pool), conn_(std::move(conn)) {}
    Lent(Lent&&) = default;
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

  // Sentinel only (null otherwise); its watch thread starts on first use.
  std::unique_ptr<internal::Sentinel> sentinel_;
  std::once_flag watching_;
  std::timed_mutex ask_mu_;  // one thread at a time asks the sentinels
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
