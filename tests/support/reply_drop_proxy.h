// ReplyDropProxy: a TCP proxy in front of a Redis server that makes one
// command run on the server but lose its reply — what a connection that
// dies after the server answered looks like to a client. It is how tests
// prove that a command the client retries after a connection failure (the
// lock scripts EvalRetryOnce runs again) is idempotent: the first try ran,
// the client never learned its result, and the retry runs on top of it.
//
// The proxy listens on 127.0.0.1 at a port the kernel picks and forwards
// every accepted connection to the target, bytes both ways, from one thread
// of its own. A rule armed with DropNextReply(marker) applies to the next
// chunk a client sends that contains `marker` (a substring of the RESP
// bytes: pick something unique to the command, such as a lock name or an
// owner token). That chunk is forwarded; the proxy then waits until the
// server's first reply bytes arrive (at most 5 s), discards them, and closes
// both sides of that connection. The client reads EOF (lockfleet's
// RedisClient throws Error(kRedisUnavailable)) and a retry opens a fresh
// connection through the proxy, which forwards it normally. StallNextReply
// holds the reply instead, then drops the connection the same way: the
// client times out first if its command timeout is shorter.
//
// A reply that starts with -NOSCRIPT means the command did not run (the
// server lost its script cache and the client is about to send EVAL with
// the body): it is forwarded and the rule stays armed for that EVAL. Rules
// assume one command (or one pipelined batch) in flight per connection, as
// RedisClient does.
//
// Thread-safety: all methods may be called from any thread. The destructor
// closes every connection and joins the thread; clients still connected
// then read EOF.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace lockfleet::testing {

class ReplyDropProxy {
 public:
  // `target`: a Redis URL ("unix:///path/redis.sock" or
  // "redis://host:port", e.g. RedisServer::url(); credentials and db in it
  // are ignored: the client still sends its own AUTH/SELECT), a socket path
  // ("/path") or "host:port". Starts listening at once. Throws
  // std::runtime_error if it cannot.
  explicit ReplyDropProxy(const std::string& target);
  ~ReplyDropProxy();
  ReplyDropProxy(const ReplyDropProxy&) = delete;
  ReplyDropProxy& operator=(const ReplyDropProxy&) = delete;

  // "redis://127.0.0.1:PORT": a URL for RedisOptions (no credentials).
  std::string url() const;
  int port() const { return port_; }

  // The next client chunk containing `marker` runs on the server and its
  // reply is lost: the connection is closed once the server has answered.
  // Rules are matched in the order they were armed, each once.
  // REQUIRES: 0 < marker.size() <= 4096.
  void DropNextReply(std::string marker);

  // As DropNextReply, but the connection stays open, its reply withheld,
  // for `hold` after the chunk was forwarded (or until the client closes
  // it, e.g. at its command timeout), and is then closed; never before the
  // server has answered (bounded by 5 s).
  void StallNextReply(std::string marker, std::chrono::milliseconds hold);

  // As DropNextReply, but the client gets bytes that are no RESP reply
  // before the EOF: what a reply mangled on the way (a TLS record error, a
  // broken middlebox) looks like — a protocol error, after the command ran.
  void GarbleNextReply(std::string marker);

  // As StallNextReply, but the reply is then delivered, late, and the
  // connection goes on: a reply that arrives after later commands of other
  // connections were answered. The client's command timeout must be longer
  // than `hold` (else it gives up first and the connection is closed).
  void DelayNextReply(std::string marker, std::chrono::milliseconds hold);

  // The next client chunk containing `marker` is held back from the server
  // for `hold`, then sent — even if the client has given up and left
  // meanwhile — and its reply is dropped (the connection closed once the
  // server answered). A command that runs late, after whatever the client
  // did next on other connections.
  void DelayNextRequest(std::string marker, std::chrono::milliseconds hold);

  int dropped() const { return dropped_.load(); }  // connections cut by a rule
  int delayed() const { return delayed_.load(); }  // replies delivered late
  int accepted() const {
    return accepted_.load();
  }                   // client connections so far
  int armed() const;  // rules not yet matched

 private:
  struct Rule {
    std::string marker;
    bool stall = false;
    std::chrono::milliseconds hold{0};
    bool deliver = false;  // DelayNextReply: forward the reply after `hold`
    bool hold_request = false;  // DelayNextRequest: send the chunk late
    bool garble = false;        // GarbleNextReply: junk instead, then EOF
  };
  struct Conn;

  void Arm(Rule rule);
  void Loop();
  void Accept();
  bool TakeRule(const std::string& seen, size_t new_from, Rule* rule);
  void PutBack(Rule rule);

  sockaddr_storage target_addr_{};
  socklen_t target_len_ = 0;
  int listen_fd_ = -1;
  int wake_read_ = -1;  // self-pipe: the destructor wakes the loop
  int wake_write_ = -1;
  int port_ = 0;

  mutable std::mutex mu_;
  std::deque<Rule> rules_;  // guarded by mu_
  std::atomic<int> dropped_{0};
  std::atomic<int> delayed_{0};
  std::atomic<int> accepted_{0};
  std::atomic<bool> stopping_{false};
  std::vector<std::unique_ptr<Conn>> conns_;  // the loop thread's only
  std::thread thread_;  // last: starts after everything above exists
};

}  // namespace lockfleet::testing
