// Sentinel: where the master of a redis+sentinel:// URL is, and when it
// moves. Internal to lockcore; RedisClient's pool connects to the address it
// gives (and checks with ROLE that it is a master).
//
// Two ways to learn the address, as Redis's guidelines for Sentinel clients
// describe them:
// - AskMaster: SENTINEL get-master-addr-by-name on each sentinel in turn
//   (the last one that answered first) until one names the master. The pool
//   asks when it has no address, or after the one it had failed it (a
//   broken connection, READONLY, a ROLE that is not master).
// - Watch: one thread per client keeps a connection to one sentinel,
//   subscribed to +switch-master, and reports every switch of this master
//   (asking once more after each (re)subscribe for a switch it missed). A
//   sentinel that stops answering (PING after a second of silence) is left
//   for the next. Each of its steps takes about a second at most (name
//   resolution aside), so the client's destruction (which joins it) waits
//   that long at most.
//   A switch that reaches no client costs availability until the old
//   master's refusal (READONLY) or its connection's failure makes the pool
//   ask again; it is never a reason to write to a replica.
//
// Thread-safety: AskMaster may be called from any thread; Watch once.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "lockfleet/config/config.h"
#include "lockfleet/lockcore/redis_url.h"
#include "socket.h"

namespace lockfleet::internal {

class RedisConnection;
class TlsContext;

// The new address in a +switch-master message ("<name> <old-ip> <old-port>
// <new-ip> <new-port>") when it is about `master_name`; std::nullopt for
// another master's or a malformed one.
std::optional<RedisNode> ParseSwitchMaster(std::string_view text,
                                           std::string_view master_name);

class Sentinel {
 public:
  // `url` is a redis+sentinel:// endpoint; `auth` the sentinels' own
  // credentials; `tls` (null: plain) must outlive this object.
  Sentinel(RedisEndpoint url, config::RedisAuthConfig auth,
           const TlsContext* tls, std::chrono::milliseconds connect_timeout,
           std::chrono::milliseconds command_timeout);
  ~Sentinel();  // stops the watch thread
  Sentinel(const Sentinel&) = delete;
  Sentinel& operator=(const Sentinel&) = delete;

  // The master's address (host and port), from the first sentinel that
  // names one by `deadline`. Throws Error(kRedisUnavailable) naming every
  // sentinel's failure, or that none knows the master's name; or
  // kRedisTimeout when the deadline passed first.
  RedisNode AskMaster(Deadline deadline);

  // Starts the watch thread; `on_switch` gets each address the master moves
  // to (and the current one after every (re)subscribe). Called from that
  // thread, never concurrently with itself.
  void Watch(std::function<void(const RedisNode&)> on_switch);

  // "redis+sentinel://s1:26379,.../name" (redacted), for messages.
  const std::string& where() const { return where_; }

 private:
  RedisEndpoint SentinelEndpoint(size_t index) const;
  // One sentinel's answer: the address, or std::nullopt when it does not
  // know the master. Throws Error for a connection failure.
  std::optional<RedisNode> Ask(RedisConnection& conn, Deadline deadline);
  void WatchLoop(std::stop_token stop);

  const RedisEndpoint url_;
  const config::RedisAuthConfig auth_;
  const TlsContext* const tls_;
  const std::chrono::milliseconds connect_timeout_;
  const std::chrono::milliseconds command_timeout_;
  const std::string where_;

  std::mutex mu_;
  size_t preferred_ = 0;  // the sentinel that answered last; guarded by mu_
  std::condition_variable_any stop_cv_;  // wakes the watch loop's back-off

  std::function<void(const RedisNode&)> on_switch_;
  std::jthread watcher_;  // last: stopped and joined first
};

}  // namespace lockfleet::internal
