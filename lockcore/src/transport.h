// Transport: the byte stream of one connection to a Redis server — a plain
// socket, or TLS over one — with a deadline on every call. Internal to
// lockcore. RedisConnection speaks RESP over it (hiredis only encodes and
// decodes); anything else that talks to a Redis-protocol server (Sentinel)
// opens its connections with OpenTransport and the same TlsContext.
//
// Errors are lockfleet::Error with a bare reason ("timed out", "Connection
// refused", "TLS handshake with h:6380 failed: certificate verify failed
// (...)"); the caller puts the redacted endpoint in front.
//
// Thread-safety: one thread at a time per Transport.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>

#include "lockfleet/lockcore/redis_url.h"
#include "socket.h"

namespace lockfleet::internal {

class TlsContext;

class Transport {
 public:
  virtual ~Transport() = default;

  // Writes all of `data` by `deadline`. Throws Error (kRedisTimeout at the
  // deadline; kRedisUnavailable, or for TLS kRedisAuth / kRedisProtocol —
  // see tls.h — on failure).
  virtual void Write(std::string_view data, Deadline deadline) = 0;

  // Reads at least one byte and at most `size`, waiting until `deadline`.
  // Returns 0 when the peer closed the connection. Throws as Write.
  virtual size_t Read(char* buffer, size_t size, Deadline deadline) = 0;

  // True for TLS.
  virtual bool secure() const = 0;
};

// Connects to `endpoint` (TCP or its unix socket) and, when `tls` is not
// null, runs the TLS handshake, all by `deadline`. Throws Error.
std::unique_ptr<Transport> OpenTransport(const RedisEndpoint& endpoint,
                                         const TlsContext* tls,
                                         Deadline deadline);

}  // namespace lockfleet::internal
