// TlsContext: the TLS side of lockfleet's connections, through OpenSSL.
// Internal to lockcore; no OpenSSL type leaves lockcore/src.
//
// One TlsContext (an SSL_CTX) is built from TlsOptions per RedisClient and
// shared by all of its pooled connections: the CA store, the client
// certificate and the settings are loaded once. Each Handshake makes an SSL
// of its own over a connected socket and returns the Transport that
// encrypts over it.
//
// Verification, unless insecure_skip_verify: the server's chain up to a CA
// of ca_file / ca_dir (neither: OpenSSL's default verify paths, which
// honour $SSL_CERT_FILE and $SSL_CERT_DIR), its dates, and its name — the
// server_name, else the host the connection was made to — against the
// certificate's subjectAltName (DNS entries through SSL_set1_host, without
// partial wildcards; an IP address against IP entries). SNI carries the name
// unless it is an IP address. TLS 1.2 at least.
//
// Errors (Error, with OpenSSL's reason in the message):
//   kRedisAuth      a certificate was refused: the server's did not verify
//                   (unknown CA, wrong name, expired, ...), or the server
//                   refused ours or wanted one (mutual TLS)
//   kRedisProtocol  the peer does not speak TLS there (a plaintext port)
//                   or broke the protocol
//   kRedisTimeout   the deadline passed (the message says whether the
//                   server answered at all: a plaintext port stays silent)
//   kRedisUnavailable  the connection failed or was closed
//   kInvalidArgument   (constructor) a file cannot be read or used, or the
//                   key does not match the certificate
//
// Thread-safety: a constructed TlsContext is immutable; Handshake may be
// called from any number of threads at once (their CPU steps take turns;
// the waits for the server overlap). The Transport it returns is for one
// thread at a time.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "lockfleet/lockcore/redis_client.h"
#include "socket.h"
#include "transport.h"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX

namespace lockfleet::internal {

class TlsContext {
 public:
  // Builds the context. Throws Error(kInvalidArgument) naming the option, the
  // file and OpenSSL's reason.
  explicit TlsContext(const TlsOptions& options);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  // Runs the client handshake over `socket`, connected to `host`:`port`
  // (for SNI and verification when no server_name is set, and for messages),
  // by `deadline`. Throws Error as above.
  std::unique_ptr<Transport> Handshake(Socket socket, const std::string& host,
                                       int port, Deadline deadline) const;

 private:
  struct CtxFree {
    void operator()(ssl_ctx_st* ctx) const;
  };

  std::unique_ptr<ssl_ctx_st, CtxFree> ctx_;
  // Serializes SSL_connect steps (not the waits between them); see tls.cc.
  mutable std::mutex handshake_mu_;
  std::string server_name_;  // "" for the connection's host
  bool verify_ = true;
};

}  // namespace lockfleet::internal
