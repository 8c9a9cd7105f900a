// One hiredis connection. Internal: the only place hiredis types live, and
// the only place hiredis errors become lockfleet::Error.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/redis_client.h"
#include "lockfleet/lockcore/redis_url.h"

struct redisContext;

namespace lockfleet::internal {

class RedisConnection {
 public:
  // Connects, authenticates and selects the db. Throws Error. `budget`, if
  // positive, bounds the whole of it (connect, AUTH, SELECT) for a call
  // with a deadline; the connection's commands later use command_timeout.
  RedisConnection(const RedisEndpoint& endpoint,
                  std::chrono::milliseconds connect_timeout,
                  std::chrono::milliseconds command_timeout,
                  std::chrono::milliseconds budget = {});
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Sends all commands, then reads all replies (one round trip). Error
  // replies come back as Reply::Type::kError. Connection failures throw
  // Error and leave the connection broken().
  // `timeout` (> 0) bounds this call's socket reads and writes instead of
  // the command timeout the connection was opened with.
  std::vector<Reply> Run(const std::vector<const Command*>& commands,
                         std::chrono::milliseconds timeout = {});
  Reply RunOne(const Command& command);

  bool broken() const { return broken_; }
  // For callers that leave the connection in a state it cannot be reused in
  // (a WATCH still active, say): it is closed instead of going back to the
  // pool.
  void MarkBroken() { broken_ = true; }

 private:
  struct ContextDeleter {
    void operator()(redisContext* ctx) const;
  };
  [[noreturn]] void Fail(const char* what);

  std::unique_ptr<redisContext, ContextDeleter> ctx_;
  std::string where_;  // redacted endpoint, for messages
  std::chrono::milliseconds command_timeout_;  // the connection's default
  std::chrono::milliseconds set_timeout_;      // the one set on the socket
  bool broken_ = false;
};

// Classifies an error reply ("BUSY ...", "NOAUTH ...") into an ErrorCode.
ErrorCode CodeForErrorReply(const std::string& message, ErrorCode otherwise);

// A failure before the command left the client — no free connection, the
// connect, AUTH or SELECT failed, the script could not be loaded — so it
// certainly did not run. RedisClient throws it for those; callers that must
// know whether a failed command may have run (EvalRetryOnce) tell it apart.
class NotSentError : public Error {
 public:
  explicit NotSentError(const Error& e) : Error(e.code(), e.what()) {}
};

}  // namespace lockfleet::internal
