// RedisClient's private parts, shared by redis_client.cc and optimistic.cc.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "lockfleet/lockcore/redis_client.h"
#include "redis_connection.h"
#include "tls.h"

namespace lockfleet {

class RedisClient::Impl {
 public:
  explicit Impl(RedisOptions opts);

  // A connection lent out of the pool; returned (or dropped if broken) on
  // destruction.
  class Lent {
   public:
    Lent(Impl* pool, std::unique_ptr<internal::RedisConnection> conn)
        : pool_(pool), conn_(std::move(conn)) {}
    Lent(Lent&&) = default;
    ~Lent();
    internal::RedisConnection* operator->() { return conn_.get(); }

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

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<internal::RedisConnection>>
      idle_;      // guarded by mu_
  int open_ = 0;  // connections existing, idle or lent; guarded by mu_
};

}  // namespace lockfleet
