// RedisClient: a thread-safe handle to one Redis server with a small
// connection pool — or, with a redis+sentinel:// URL, to the master a group
// of sentinels names, followed through failovers (docs/lockcore.md,
// "Sentinel") — or, with a redis+cluster:// URL, to a Redis Cluster: a pool
// per master, each command sent to the master of its first key's slot,
// MOVED and ASK redirects followed (at most 5 per command), TRYAGAIN
// retried within the call's budget (docs/lockcore.md, "Redis Cluster").
// A pipeline or an EvalPipeline is split per master (one round trip each,
// in turn; WAIT goes to each); a command without a key goes with its
// neighbours, or alone to a master. A master that fails its part fails only
// its commands ("ERR lockfleet: ..." error replies) when another command
// of the call got its answer; otherwise the call throws. MULTI/EXEC/WATCH
// in a pipeline are refused on a cluster (kInvalidArgument). Owns every
// connection (its own sockets, TLS through OpenSSL, hiredis only to encode
// commands and decode replies); no hiredis or OpenSSL type appears in this
// header.
//
// Connections are opened lazily and re-opened on the next use after a
// failure, so a restarted server is picked up without restarting anything.
// A command that fails on the connection level throws Error
// (kRedisUnavailable, kRedisTimeout, kRedisAuth, kRedisProtocol); an error
// *reply* to an ordinary command is returned as a Reply of type kError.
// TLS failures are kRedisAuth when a certificate was refused (the server's
// did not verify — unknown CA, wrong name, expired — or the server refused
// ours or wanted one), kRedisProtocol when the peer does not speak TLS, and
// kRedisTimeout / kRedisUnavailable as for any connection; each message
// names the endpoint and OpenSSL's reason.
//
// SIGPIPE: the first RedisClient sets SIGPIPE to SIG_IGN if it still has its
// default disposition, so a write to a closed connection is an error rather
// than the death of the process.
//
// Thread-safety: every method may be called from any thread concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lockfleet/config/config.h"
#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/redis_url.h"

namespace lockfleet {

// TLS for the connections to Redis (docs/lockcore.md, "TLS"). TLS is on when
// the URL is rediss:// or `enabled` is set; the other fields then say how
// the server is verified and how this client authenticates. Files are read
// once, by the RedisClient constructor (a certificate rotated on disk is
// picked up by a new RedisClient); a file that cannot be read or a key that
// does not match its certificate throws Error(kInvalidArgument) there.
// Setting any field while TLS is off is an error too (never a silent
// plaintext connection), as is TLS with a unix socket.
//
// Verified by default: the server's chain up to a trusted CA, its validity
// dates, and that it is issued for the server name (subjectAltName DNS or
// IP entry). TLS 1.2 at least.
//
// The fields are the config file's redis.tls (config::RedisTlsConfig:
// ca_file, ca_dir, cert_file, key_file, server_name, insecure_skip_verify),
// so a config maps over whole: TlsOptions{redis.tls}.
struct TlsOptions : config::RedisTlsConfig {
  bool enabled = false;  // TLS without a rediss:// URL. Default: the URL says
};

struct RedisOptions {
  std::string url = "redis://127.0.0.1:6379";  // see redis_url.h
  int pool_size = 4;                           // connections, >= 1
  // Bounds the TCP (or unix socket) connect and the TLS handshake together.
  std::chrono::milliseconds connect_timeout{2000};
  // Bounds each round trip (writing the commands and reading every reply)
  // and the wait for a pooled connection.
  std::chrono::milliseconds command_timeout{2000};
  TlsOptions tls;  // see TlsOptions; off unless rediss:// or tls.enabled
  // With a redis+sentinel:// url: AUTH for the sentinels (the url's user
  // and password are the master's). Empty: none. An error with another url.
  config::RedisAuthConfig sentinel_auth;
};

// One reply, decoded. Strings are binary-safe.
struct Reply {
  enum class Type { kNil, kInteger, kString, kStatus, kError, kArray };
  Type type = Type::kNil;
  long long integer = 0;        // kInteger
  std::string str;              // kString, kStatus, kError
  std::vector<Reply> elements;  // kArray

  bool is_nil() const { return type == Type::kNil; }
  bool is_error() const { return type == Type::kError; }
};

// The ErrorCode an error reply's text stands for: kRedisBusy for a server
// that is loading, busy, full, read-only or reconfiguring (BUSY, LOADING,
// OOM, READONLY, MASTERDOWN, TRYAGAIN, CLUSTERDOWN, a MOVED or ASK past the
// redirect bound), kRedisAuth for NOAUTH, WRONGPASS, NOPERM,
// kRedisUnavailable for a cluster master that failed its part of a call
// ("ERR lockfleet: ..."), else `otherwise`. For callers that read values
// from Execute/Pipeline replies: an error reply is never a value.
ErrorCode ErrorReplyCode(const std::string& message, ErrorCode otherwise);

// A command as its argument vector, e.g. {"SET", key, value}.
using Command = std::vector<std::string>;

// A Lua script. Immutable; cheap to share. The server-side SHA1 is learned on
// first use and then EVALSHA is sent; a server that lost its script cache
// (restart, SCRIPT FLUSH) is answered with EVAL transparently.
class Script {
 public:
  explicit Script(std::string source);
  Script(const Script&) = delete;
  Script& operator=(const Script&) = delete;

  const std::string& source() const { return source_; }

 private:
  friend class RedisClient;
  std::string source_;
  mutable std::mutex mu_;
  mutable std::string sha_;  // guarded by mu_; empty until learned
};

enum class OptimisticStatus {
  kCommitted,  // the commands were applied atomically
  kAborted,    // `decide` returned std::nullopt: nothing was written
  kConflict,   // every attempt lost to a concurrent writer: nothing written
};

struct OptimisticResult {
  OptimisticStatus status = OptimisticStatus::kConflict;
  int attempts = 0;            // transactions tried (>= 1)
  int conflicts = 0;           // EXECs aborted because a watched key changed
  std::vector<Reply> replies;  // EXEC's replies when kCommitted
};

// Sees the current values of the watched keys (std::nullopt for a missing
// key) and returns the commands to apply atomically, or std::nullopt to
// abort. Called once per attempt; must not talk to Redis itself.
using OptimisticDecide = std::function<std::optional<std::vector<Command>>(
    const std::vector<std::optional<std::string>>& values)>;

// Replica acknowledgement of a script's writes: after the scripts, on the
// same connection and in the same round trip, WAIT `replicas` `timeout`.
// WAIT answers how many replicas acknowledged every write the connection
// made up to then, so at least the scripts' (docs/lockcore.md, "Replica
// acknowledgement"). `timeout` lengthens the round trip's bound by as much
// (plus 250 ms for the server's timer).
struct ReplicaWait {
  int replicas = 0;                         // > 0
  std::chrono::milliseconds timeout{1000};  // > 0 (WAIT 0 would block)
  // Out: the fewest replicas any WAIT of the call answered (a NOSCRIPT
  // retry sends its own), or -1 when WAIT answered an error (on a replica:
  // "WAIT cannot be used with replica instances"), which `error` holds.
  int64_t acked = -1;
  std::string error;

  bool acknowledged() const { return acked >= replicas; }
};

class RedisClient {
 public:
  // Does not connect. Throws Error(kInvalidArgument) for a bad URL or option.
  explicit RedisClient(RedisOptions options);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // One command, one round trip. `timeout` (> 0) bounds the whole call, as
  // Eval's does: it shortens the options' timeouts, never lengthens them.
  Reply Execute(const Command& command, std::chrono::milliseconds timeout = {});

  // Several commands in one round trip on one connection; replies in order.
  std::vector<Reply> Pipeline(const std::vector<Command>& commands);

  // Runs `script`. An error reply throws Error(kRedisScript). `timeout`
  // (> 0) bounds the whole call — pool wait, connect, script load, each
  // socket read and write — instead of the options' timeouts; the call then
  // throws Error(kRedisTimeout) (or kRedisUnavailable) when it runs out.
  // Either way the script may still have run on the server.
  // With `wait`, the script is followed by WAIT (see ReplicaWait), whose
  // answer is left in *wait; the script's reply is returned either way.
  Reply Eval(const Script& script, const std::vector<std::string>& keys,
             const std::vector<std::string>& args,
             std::chrono::milliseconds timeout = {},
             ReplicaWait* wait = nullptr);

  struct EvalCall {
    const Script* script;
    std::vector<std::string> keys;
    std::vector<std::string> args;
  };
  // Several script calls in one round trip. Per-call error replies are
  // returned as kError replies, not thrown. With `wait`, one WAIT follows
  // them all (see ReplicaWait).
  std::vector<Reply> EvalPipeline(const std::vector<EvalCall>& calls,
                                  std::chrono::milliseconds timeout = {},
                                  ReplicaWait* wait = nullptr);

  // Check-and-set: WATCH `keys`, read them, ask `decide`, apply in
  // MULTI/EXEC; on a conflict retry up to `max_attempts` times with a short
  // randomized backoff. All keys must live in one hash slot on a cluster.
  OptimisticResult OptimisticUpdate(const std::vector<std::string>& keys,
                                    const OptimisticDecide& decide,
                                    int max_attempts = 16);

  // The servers to address one by one about the whole data set (SCAN walks
  // one master's keys, DBSIZE and INFO count one master's): on a cluster
  // the masters of the slot map, read again first; otherwise one entry
  // standing for the server.
  std::vector<RedisNode> Masters();
  // `command` on `master` (one of Masters()), not routed by key. Outside a
  // cluster the same as Execute.
  Reply ExecuteOn(const RedisNode& master, const Command& command);

  // Round trips sent so far (pipelines count once per node). For
  // benchmarks.
  uint64_t round_trips() const noexcept;

  // Cluster only (zeros otherwise): redirects followed and slot map reads.
  struct ClusterStats {
    uint64_t moved = 0;      // MOVED: the map was corrected
    uint64_t asked = 0;      // ASK: one command sent to a migration target
    uint64_t tryagain = 0;   // TRYAGAIN (or a migrating slot): waited
    uint64_t refreshes = 0;  // CLUSTER SLOTS read
  };
  ClusterStats cluster_stats() const noexcept;

  const RedisEndpoint& endpoint() const noexcept;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lockfleet
