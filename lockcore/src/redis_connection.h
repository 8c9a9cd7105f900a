// One connection to Redis: RESP over a Transport (transport.h: lockfleet's
// own socket, optionally TLS). Internal. hiredis serves only as the codec —
// redisFormatCommandArgv writes commands, a redisReader parses replies — and
// this is the only place its types live and the only place connection
// failures become lockfleet::Error with the redacted endpoint in front.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/redis_client.h"
#include "lockfleet/lockcore/redis_url.h"

struct redisReader;

namespace lockfleet::internal {

class TlsContext;
class Transport;

class RedisConnection {
 public:
  // Connects (and, with `tls`, runs the TLS handshake), authenticates and
  // selects the db. Throws Error. connect_timeout bounds the connect and
  // the handshake together; `budget`, if positive, bounds the whole of it
  // (connect, handshake, AUTH, SELECT) for a call with a deadline. The
  // connection's commands later use command_timeout. `tls` (null: plain)
  // must outlive the constructor only. `must_be_master`: ask ROLE too and
  // throw Error(kRedisUnavailable) unless the server is a master (a
  // Sentinel client's check that the address it was given is still the
  // master's).
  RedisConnection(const RedisEndpoint& endpoint, const TlsContext* tls,
                  std::chrono::milliseconds connect_timeout,
                  std::chrono::milliseconds command_timeout,
                  std::chrono::milliseconds budget = {},
                  bool must_be_master = false);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Sends all commands, then reads all replies (one round trip). Error
  // replies come back as Reply::Type::kError. Connection failures throw
  // Error and leave the connection broken().
  // `timeout` (> 0) bounds this call — writing every command and reading
  // every reply — instead of the command timeout the connection was opened
  // with.
  std::vector<Reply> Run(const std::vector<const Command*>& commands,
                         std::chrono::milliseconds timeout = {});
  Reply RunOne(const Command& command);

  // For a subscribed connection, where replies come unasked: Send writes
  // `command` without reading; ReadOne returns the next reply, or
  // std::nullopt when none came by `deadline` (the connection stays
  // usable). Failures throw Error and leave the connection broken().
  void Send(const Command& command,
            std::chrono::steady_clock::time_point deadline);
  std::optional<Reply> ReadOne(std::chrono::steady_clock::time_point deadline);

  // The pool's mark on the connection (the master generation it was opened
  // for, on a Sentinel client).
  uint64_t tag() const { return tag_; }
  void set_tag(uint64_t tag) { tag_ = tag; }

  bool broken() const { return broken_; }
  // Broken by a timeout (the server slow, not gone): the others in the pool
  // are likely fine.
  bool timed_out() const { return timed_out_; }
  // For callers that leave the connection in a state it cannot be reused in
  // (a WATCH still active, say): it is closed instead of going back to the
  // pool.
  void MarkBroken() { broken_ = true; }

 private:
  struct ReaderFree {
    void operator()(redisReader* reader) const;
  };
  // Marks the connection broken and throws `e` again with the endpoint and
  // `what` ("send", "read reply") in front.
  [[noreturn]] void Fail(const char* what, const Error& e,
                         std::chrono::milliseconds timeout);
  // Reads and decodes until `count` replies are in `replies`.
  void ReadReplies(size_t count, std::vector<Reply>& replies,
                   std::chrono::steady_clock::time_point deadline);

  std::unique_ptr<Transport> transport_;
  std::unique_ptr<redisReader, ReaderFree> reader_;
  std::string where_;  // redacted endpoint, for messages
  std::chrono::milliseconds command_timeout_;  // the connection's default
  uint64_t tag_ = 0;
  bool broken_ = false;
  bool timed_out_ = false;
  bool replied_ = false;  // a reply was read: the peer speaks RESP
  int first_byte_ = -1;   // the first byte the server sent, for hints
};

// Classifies an error reply ("BUSY ...", "NOAUTH ...") into an ErrorCode;
// a FailedNodeReply is kRedisUnavailable.
ErrorCode CodeForErrorReply(const std::string& message, ErrorCode otherwise);

// Whether an error reply to EVAL/EVALSHA is one Redis gives before the
// script starts (NOSCRIPT, BUSY, LOADING, OOM and READONLY for a script
// without allow-oom / no-writes flags, an ACL or cluster refusal, a compile
// error). A script that fails while running (WRONGTYPE from redis.call,
// "user_script:N: ...") keeps the writes it made before: not this.
bool IsRefusedBeforeRunning(const std::string& message);

// A failure before the command left the client — no free connection, the
// connect, TLS handshake, AUTH or SELECT failed, the script could not be
// loaded — so it certainly did not run. RedisClient throws it for those;
// callers that must know whether a failed command may have run
// (EvalRetryOnce) tell it apart.
class NotSentError : public Error {
 public:
  explicit NotSentError(const Error& e) : Error(e.code(), e.what()) {}
};

// Redis answered with an error reply it gives before running the command
// (BUSY, OOM, NOAUTH, ... see IsRefusedBeforeRunning): the command reached
// it and did not run. With
// NotSentError it tells "did not run" from "may have run": any other Error
// from a command (a broken connection, a timeout, an unreadable reply, a
// TLS alert on the way back) came after it was sent, unanswered.
class RefusedError : public Error {
 public:
  RefusedError(ErrorCode code, const std::string& message)
      : Error(code, message) {}
};

// Whether the command that failed with `e` may have run on the server.
inline bool MayHaveRun(const Error& e) {
  return dynamic_cast<const NotSentError*>(&e) == nullptr &&
         dynamic_cast<const RefusedError*>(&e) == nullptr;
}

// The error reply that stands for a command whose connection failed with
// `e` while other commands of the same call were answered (a cluster master
// that failed its part of a pipeline): "ERR lockfleet: <what>", with "not
// sent: " before the reason when the command certainly did not run.
inline constexpr std::string_view kFailedNodeReply = "ERR lockfleet: ";
inline Reply FailedNodeReply(const Error& e) {
  return Reply{.type = Reply::Type::kError,
               .str = std::string(kFailedNodeReply) +
                      (MayHaveRun(e) ? "" : "not sent: ") + e.what()};
}

}  // namespace lockfleet::internal
