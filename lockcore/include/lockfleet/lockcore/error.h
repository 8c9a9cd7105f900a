// The one error model of lockfleet.
//
// Contention, timeouts and cancellation are ordinary results (see
// AcquireResult). Real failures — Redis unreachable, a protocol error, a bad
// argument — throw lockfleet::Error, which carries an ErrorCode. The code's
// name (ErrorCodeName) is stable and is used as the label value of error
// metrics, so adding a code is fine but renaming one is a breaking change.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace lockfleet {

enum class ErrorCode {
  kInvalidArgument,   // bad lock name, URL, option value (caller's fault)
  kRedisUnavailable,  // cannot connect, or the connection broke (I/O, EOF)
  kRedisTimeout,      // connect or command timeout expired
  kRedisAuth,         // AUTH / SELECT refused, or a TLS certificate refused
  kRedisProtocol,     // unexpected reply shape, protocol error
  kRedisScript,       // a Lua script returned an error
  kRedisBusy,         // server answered BUSY / LOADING / OOM / READONLY ...
  kKafka,             // the Kafka transport failed (notifier)
  kCancelled,         // a blocking call was cancelled through its stop token
  kInternal,          // a bug in lockfleet; please report
  // Fewer replicas than LockClientOptions::min_replicas acknowledged a
  // lock's change in time (WAIT); a grant is given back. Added after the
  // others: the codes' values are stable.
  kRedisReplicas,
};

// Stable lowercase name, e.g. "redis_unavailable". Never empty.
std::string_view ErrorCodeName(ErrorCode code) noexcept;

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message)
      : std::runtime_error(message), code_(code) {}

  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace lockfleet
