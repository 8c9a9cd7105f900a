#include "tls.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <utility>

#include "lockfleet/lockcore/error.h"

namespace lockfleet::internal {
namespace {

struct SslFree {
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};
using SslPtr = std::unique_ptr<SSL, SslFree>;

// The reasons on this thread's OpenSSL error queue, oldest first and
// "; "-joined, and the first one's SSL reason code (0 if it is none).
// Empties the queue.
std::string TakeErrors(int* first_reason = nullptr) {
  std::string out;
  if (first_reason != nullptr) *first_reason = 0;
  while (const unsigned long e = ERR_get_error()) {
    std::string text;
    if (const char* reason = ERR_reason_error_string(e); reason != nullptr) {
      text = reason;
    } else {
      char buffer[256];
      ERR_error_string_n(e, buffer, sizeof(buffer));
      text = buffer;
    }
    if (out.empty() && first_reason != nullptr &&
        ERR_GET_LIB(e) == ERR_LIB_SSL) {
      *first_reason = ERR_GET_REASON(e);
    }
    if (out.find(text) == std::string::npos) {
      if (!out.empty()) out += "; ";
      out += text;
    }
  }
  return out;
}

[[noreturn]] void BadOption(const char* option, const std::string& path,
                            const std::string& why) {
  throw Error(ErrorCode::kInvalidArgument,
              std::string("TLS ") + option + " '" + path + "': " + why);
}

// A readable regular file (or directory): a FIFO or a device given as a
// certificate would block OpenSSL's read.
void MustBeReadable(const char* option, const std::string& path,
                    bool directory = false) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || ::access(path.c_str(), R_OK) != 0) {
    BadOption(option, path, std::strerror(errno));
  }
  if (directory ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
    BadOption(option, path,
              directory ? "not a directory" : "not a regular file");
  }
}

bool IsIpAddress(const std::string& name) {
  unsigned char buffer[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, name.c_str(), buffer) == 1 ||
         ::inet_pton(AF_INET6, name.c_str(), buffer) == 1;
}

std::string HostPort(const std::string& host, int port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port);
}

// The Error for a failed SSL call: `ssl_error` is SSL_get_error's verdict,
// `saved_errno` errno right after the call. `what` starts the message
// ("TLS handshake with h:p failed"); `name` is the name verified.
Error Failure(SSL* ssl, int ssl_error, int saved_errno, const std::string& what,
              const std::string& name, bool handshake) {
  int reason = 0;
  const std::string reasons = TakeErrors(&reason);
  const std::string closed =
      what + ": the server closed the connection" +
      (handshake ? " (not a TLS port? use redis:// for a plaintext one)" : "");
  if (ssl_error == SSL_ERROR_SYSCALL || ssl_error == SSL_ERROR_ZERO_RETURN) {
    if (reasons.empty() && saved_errno != 0) {
      return Error(ErrorCode::kRedisUnavailable,
                   what + ": " + std::strerror(saved_errno));
    }
    return Error(ErrorCode::kRedisUnavailable, closed);
  }
  if (ssl_error != SSL_ERROR_SSL) {
    return Error(ErrorCode::kRedisProtocol,
                 what + ": " + (reasons.empty() ? "unknown error" : reasons));
  }
  const long verify = SSL_get_verify_result(ssl);
  if (reason == SSL_R_CERTIFICATE_VERIFY_FAILED && verify != X509_V_OK) {
    std::string detail = std::string("certificate verify failed (") +
                         X509_verify_cert_error_string(verify) + ")";
    if (verify == X509_V_ERR_HOSTNAME_MISMATCH ||
        verify == X509_V_ERR_IP_ADDRESS_MISMATCH) {
      detail += ": the server's certificate is not issued for '" + name +
                "' (the TLS server_name sets the name to verify)";
    }
    return Error(ErrorCode::kRedisAuth, what + ": " + detail);
  }
  switch (reason) {
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
    case SSL_R_SSLV3_ALERT_NO_CERTIFICATE:
      return Error(ErrorCode::kRedisAuth,
                   what + ": " + reasons +
                       " (the server requires a client certificate: set "
                       "the TLS cert_file and key_file)");
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_TLSV1_ALERT_ACCESS_DENIED:
    case SSL_R_TLSV1_ALERT_DECRYPT_ERROR:
      return Error(ErrorCode::kRedisAuth,
                   what + ": " + reasons +
                       " (the server refused this client's certificate)");
    case SSL_R_UNEXPECTED_EOF_WHILE_READING:
      return Error(ErrorCode::kRedisUnavailable, closed);
    case SSL_R_WRONG_VERSION_NUMBER:
    case SSL_R_PACKET_LENGTH_TOO_LONG:
      return Error(ErrorCode::kRedisProtocol,
                   what + ": " + reasons +
                       " (the server does not speak TLS there: a plaintext "
                       "port? use redis:// for one)");
    default:
      return Error(ErrorCode::kRedisProtocol,
                   what + ": " + (reasons.empty() ? "unknown error" : reasons));
  }
}

class TlsTransport final : public Transport {
 public:
  TlsTransport(Socket socket, SslPtr ssl)
      : socket_(std::move(socket)), ssl_(std::move(ssl)) {}

  void Write(std::string_view data, Deadline deadline) override {
    size_t done = 0;
    while (done < data.size()) {
      ERR_clear_error();
      errno = 0;  // SSL_ERROR_SYSCALL with errno 0 is an EOF
      size_t n = 0;
      const int ok =
          SSL_write_ex(ssl_.get(), data.data() + done, data.size() - done, &n);
      const int saved_errno = errno;
      if (ok == 1) {
        done += n;
        continue;
      }
      const int error = SSL_get_error(ssl_.get(), ok);
      if (WaitFor(error, deadline)) continue;
      Error failure = Failure(ssl_.get(), error, saved_errno, "TLS", "", false);
      if (error == SSL_ERROR_SYSCALL) ThrowPendingAlert();
      throw failure;
    }
  }

  size_t Read(char* buffer, size_t size, Deadline deadline) override {
    while (true) {
      ERR_clear_error();
      errno = 0;  // SSL_ERROR_SYSCALL with errno 0 is an EOF
      size_t n = 0;
      const int ok = SSL_read_ex(ssl_.get(), buffer, size, &n);
      const int saved_errno = errno;
      if (ok == 1) return n;
      const int error = SSL_get_error(ssl_.get(), ok);
      if (WaitFor(error, deadline)) continue;
      // The peer closed: with close_notify, or (OpenSSL 3) without it.
      if (error == SSL_ERROR_ZERO_RETURN) return 0;
      if (error == SSL_ERROR_SYSCALL && ERR_peek_error() == 0 &&
          saved_errno == 0) {
        return 0;
      }
      if (error == SSL_ERROR_SSL && ERR_GET_REASON(ERR_peek_error()) ==
                                        SSL_R_UNEXPECTED_EOF_WHILE_READING) {
        ERR_clear_error();
        return 0;
      }
      throw Failure(ssl_.get(), error, saved_errno, "TLS", "", false);
    }
  }

  bool secure() const override { return true; }

 private:
  // For SSL_ERROR_WANT_READ / _WRITE: waits for the socket and returns true
  // (try again), or throws at the deadline. False for any other verdict.
  bool WaitFor(int error, Deadline deadline) {
    if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) {
      return false;
    }
    if (!socket_.Wait(error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT,
                      deadline)) {
      throw Error(ErrorCode::kRedisTimeout, "timed out");
    }
    return true;
  }

  // A TLS 1.3 server checks the client's certificate after the client has
  // finished its handshake: it refuses one with an alert and closes, and
  // the first write then fails (reset by the peer). The alert that says why
  // may still wait to be read: if it does, throws the Error for it.
  void ThrowPendingAlert() {
    ERR_clear_error();
    errno = 0;
    char byte = 0;
    size_t n = 0;
    const int ok = SSL_read_ex(ssl_.get(), &byte, 1, &n);
    const int saved_errno = errno;
    if (ok != 1 && SSL_get_error(ssl_.get(), ok) == SSL_ERROR_SSL &&
        ERR_GET_REASON(ERR_peek_error()) !=
            SSL_R_UNEXPECTED_EOF_WHILE_READING) {
      throw Failure(ssl_.get(), SSL_ERROR_SSL, saved_errno, "TLS", "", false);
    }
    ERR_clear_error();
  }

  Socket socket_;  // outlives ssl_ (members are destroyed in reverse order)
  SslPtr ssl_;
};

}  // namespace

void TlsContext::CtxFree::operator()(ssl_ctx_st* ctx) const {
  SSL_CTX_free(ctx);
}

TlsContext::TlsContext(const TlsOptions& options)
    : server_name_(options.server_name),
      verify_(!options.insecure_skip_verify) {
  ERR_clear_error();
  ctx_.reset(SSL_CTX_new(TLS_client_method()));
  if (!ctx_) {
    throw Error(ErrorCode::kInternal,
                "cannot create a TLS context: " + TakeErrors());
  }
  SSL_CTX* ctx = ctx_.get();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_mode(
      ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // An encrypted key must fail here, never prompt on the terminal.
  SSL_CTX_set_default_passwd_cb(
      ctx, [](char*, int, int, void*) -> int { return 0; });

  if (!options.ca_file.empty() || !options.ca_dir.empty()) {
    if (!options.ca_file.empty()) MustBeReadable("ca_file", options.ca_file);
    if (!options.ca_dir.empty())
      MustBeReadable("ca_dir", options.ca_dir, /*directory=*/true);
    if (SSL_CTX_load_verify_locations(
            ctx, options.ca_file.empty() ? nullptr : options.ca_file.c_str(),
            options.ca_dir.empty() ? nullptr : options.ca_dir.c_str()) != 1) {
      const bool file = !options.ca_file.empty();
      BadOption(file ? "ca_file" : "ca_dir",
                file ? options.ca_file : options.ca_dir,
                "cannot load CA certificates: " + TakeErrors());
    }
  } else if (verify_ && SSL_CTX_set_default_verify_paths(ctx) != 1) {
    throw Error(
        ErrorCode::kInvalidArgument,
        "TLS: cannot load the system's CA certificates: " + TakeErrors());
  }

  if (options.cert_file.empty() != options.key_file.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                "TLS cert_file and key_file go together: mutual TLS needs "
                "the certificate and its private key");
  }
  if (!options.cert_file.empty()) {
    MustBeReadable("cert_file", options.cert_file);
    MustBeReadable("key_file", options.key_file);
    if (SSL_CTX_use_certificate_chain_file(ctx, options.cert_file.c_str()) !=
        1) {
      BadOption("cert_file", options.cert_file,
                "cannot load the certificate: " + TakeErrors());
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, options.key_file.c_str(),
                                    SSL_FILETYPE_PEM) != 1) {
      const bool mismatch =
          ERR_GET_LIB(ERR_peek_error()) == ERR_LIB_X509 &&
          ERR_GET_REASON(ERR_peek_error()) == X509_R_KEY_VALUES_MISMATCH;
      const std::string reasons = TakeErrors();
      BadOption("key_file", options.key_file,
                mismatch ? "does not match the certificate in '" +
                               options.cert_file + "': " + reasons
                         : "cannot load the private key (PEM, not "
                           "encrypted): " +
                               reasons);
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
      BadOption("key_file", options.key_file,
                "does not match the certificate in '" + options.cert_file +
                    "': " + TakeErrors());
    }
  }
  SSL_CTX_set_verify(ctx, verify_ ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
}

TlsContext::~TlsContext() = default;

std::unique_ptr<Transport> TlsContext::Handshake(Socket socket,
                                                 const std::string& host,
                                                 int port,
                                                 Deadline deadline) const {
  const std::string peer = HostPort(host, port);
  const std::string& name = server_name_.empty() ? host : server_name_;
  ERR_clear_error();
  SslPtr ssl(SSL_new(ctx_.get()));
  if (!ssl || SSL_set_fd(ssl.get(), socket.fd()) != 1) {
    throw Error(ErrorCode::kRedisUnavailable,
                "TLS handshake with " + peer +
                    " failed: cannot set up the session: " + TakeErrors());
  }
  bool named = true;
  if (IsIpAddress(name)) {
    // An IP address is checked against the certificate's IP entries, and
    // never sent as SNI (RFC 6066 allows host names only).
    if (verify_) {
      named = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl.get()),
                                            name.c_str()) == 1;
    }
  } else {
    named = SSL_set_tlsext_host_name(ssl.get(), name.c_str()) == 1;
    if (verify_ && named) {
      // subjectAltName only: a certificate naming its host only in the
      // subject's CN is refused, as browsers and RFC 6125 do.
      SSL_set_hostflags(ssl.get(), X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS |
                                       X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
      named = SSL_set1_host(ssl.get(), name.c_str()) == 1;
    }
  }
  if (!named) {
    throw Error(
        ErrorCode::kInvalidArgument,
        "TLS server name '" + name + "' cannot be verified: " + TakeErrors());
  }
  SSL_set_connect_state(ssl.get());
  const std::string what = "TLS handshake with " + peer + " failed";
  while (true) {
    ERR_clear_error();
    errno = 0;
    int ok = 0;
    int saved_errno = 0;
    {
      // One handshake step at a time per context (never held while waiting
      // for the server): verification fills OpenSSL's lazy caches of the
      // shared CA certificates (their extensions), which OpenSSL 3.0 guards
      // with an unsynchronized first check; concurrent pooled connects then
      // race on them. A step is CPU only, a fraction of a millisecond.
      std::lock_guard lock(handshake_mu_);
      ok = SSL_connect(ssl.get());
      saved_errno = errno;
    }
    if (ok == 1) break;
    const int error = SSL_get_error(ssl.get(), ok);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      if (socket.Wait(error == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT,
                      deadline)) {
        continue;
      }
      // A plaintext Redis reads a ClientHello as the start of an inline
      // command and waits for the rest: say so when nothing came back.
      const bool silent = BIO_number_read(SSL_get_rbio(ssl.get())) == 0;
      throw Error(ErrorCode::kRedisTimeout,
                  "TLS handshake with " + peer + " timed out" +
                      (silent ? " without an answer (a plaintext port? use "
                                "redis:// for one; or a stalled server)"
                              : ""));
    }
    throw Failure(ssl.get(), error, saved_errno, what, name, true);
  }
  return std::make_unique<TlsTransport>(std::move(socket), std::move(ssl));
}

}  // namespace lockfleet::internal
