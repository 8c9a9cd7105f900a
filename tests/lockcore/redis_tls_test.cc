// TLS to a real redis-server (--tls-port, --tls-auth-clients) with a private
// PKI the openssl CLI makes for the suite (support/tls_certs.h): locks end to
// end over TLS and mutual TLS, every way to point the client at its CAs, and
// every way verification must fail — wrong CA, wrong name, expired
// certificate, a missing or foreign client certificate, plaintext to a TLS
// port and TLS to a plaintext one — each a clear Error of the right code
// within its timeout, never a hang. Also the transport itself: pipelines,
// large values, per-call budgets, a connection cut in the middle of a reply
// (plain and TLS), IPv6, and the pool's shared TLS context under threads.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/redis_client.h"
#include "support/redis_server.h"
#include "support/tls_certs.h"

namespace lockfleet::testing {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

struct Failure {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
  milliseconds took{0};
};

// Runs `fn`, which must throw Error: what it threw, and how long it took.
Failure FailureOf(const std::function<void()>& fn) {
  const auto start = steady_clock::now();
  try {
    fn();
  } catch (const Error& e) {
    return {
        e.code(), e.what(),
        std::chrono::duration_cast<milliseconds>(steady_clock::now() - start)};
  }
  ADD_FAILURE() << "no lockfleet::Error was thrown";
  return {};
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// OpenSSL's reason for a chain that ends at no trusted CA: the server sent
// only its own certificate, or the chain up to its (untrusted) root too, as
// redis-server does when its CA file holds the issuer.
bool Untrusted(const std::string& message) {
  return Contains(message,
                  "certificate verify failed (unable to get local issuer "
                  "certificate)") ||
         Contains(message,
                  "certificate verify failed (self-signed certificate in "
                  "certificate chain)");
}

// Sets an environment variable for the scope, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// A TCP proxy on 127.0.0.1 in front of a real server that, once CutAfter(n)
// is called, passes only n more bytes of the server's answer and then closes
// both sides: a connection broken in the middle of a reply. It copies bytes,
// so TLS passes through untouched. One connection at a time.
class CuttingProxy {
 public:
  explicit CuttingProxy(int target_port) : target_port_(target_port) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (listen_fd_ < 0 ||
        ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(listen_fd_, 8) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) !=
            0) {
      throw std::runtime_error("CuttingProxy: cannot listen");
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { Loop(); });
  }
  ~CuttingProxy() {
    stop_ = true;
    thread_.join();
    ::close(listen_fd_);
  }

  int port() const { return port_; }
  void CutAfter(long keep) { keep_ = keep; }

 private:
  void Loop() {
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(static_cast<uint16_t>(target_port_));
      if (::connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) ==
          0) {
        Relay(client, server);
      }
      ::close(server);
      ::close(client);
    }
  }

  // Copies both ways until either side closes, the cut, or stop_.
  void Relay(int client, int server) {
    char buffer[64 * 1024];
    while (!stop_) {
      pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
      if (::poll(fds, 2, 20) <= 0) continue;
      if (fds[0].revents != 0) {
        const ssize_t n = ::recv(client, buffer, sizeof(buffer), 0);
        if (n <= 0 || ::send(server, buffer, n, MSG_NOSIGNAL) != n) return;
      }
      if (fds[1].revents != 0) {
        ssize_t n = ::recv(server, buffer, sizeof(buffer), 0);
        if (n <= 0) return;
        const long keep = keep_.load();
        if (keep >= 0 && n >= keep) {
          if (keep > 0) ::send(client, buffer, keep, MSG_NOSIGNAL);
          keep_ = -1;  // the next connection goes through whole
          return;
        }
        if (keep >= 0) keep_ = keep - n;
        if (::send(client, buffer, n, MSG_NOSIGNAL) != n) return;
      }
    }
  }

  int target_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<long> keep_{-1};
  std::thread thread_;
};

class Tls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!TlsCerts::OpenSslAvailable()) return;
    certs_ = new TlsCerts();
    RedisServer::Options options =
        ServerOptions(certs_->server_cert, certs_->server_key);
    options.tls.also_plaintext = true;
    server_ = new RedisServer(options);
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete certs_;
    certs_ = nullptr;
  }
  void SetUp() override {
    if (certs_ == nullptr) {
      GTEST_SKIP() << "the openssl CLI is missing; scripts/setup.sh installs "
                      "the openssl package";
    }
    if (server_->pid() <= 0) server_->Start();
  }

  static RedisServer::Options ServerOptions(const std::string& cert,
                                            const std::string& key,
                                            bool auth_clients = false) {
    RedisServer::Options options;
    options.tls.cert_file = cert;
    options.tls.key_file = key;
    options.tls.ca_file = certs_->ca_file;
    options.tls.auth_clients = auth_clients;
    options.tls.client_cert_file = certs_->client_cert;
    options.tls.client_key_file = certs_->client_key;
    return options;
  }

  // A client of `url` that trusts the test CA.
  static RedisOptions Trusting(const std::string& url) {
    RedisOptions options;
    options.url = url;
    options.pool_size = 2;
    options.tls.ca_file = certs_->ca_file;
    return options;
  }

  static std::string HostPort(int port) {
    return "127.0.0.1:" + std::to_string(port);
  }

  static TlsCerts* certs_;
  static RedisServer* server_;
};

TlsCerts* Tls::certs_ = nullptr;
RedisServer* Tls::server_ = nullptr;

// ---- working connections ---------------------------------------------------

TEST_F(Tls, LockAcquireAndReleaseOverTls) {
  auto redis = std::make_shared<RedisClient>(Trusting(server_->url()));
  EXPECT_EQ(redis->endpoint().Redacted(),
            "rediss://" + HostPort(server_->tls_port()));
  LockClient locks(redis);
  LockClient other(std::make_shared<RedisClient>(Trusting(server_->url())));
  AcquireResult first = locks.TryAcquire("tls:lock");
  ASSERT_TRUE(first);
  EXPECT_FALSE(other.TryAcquire("tls:lock"));
  EXPECT_EQ(first.lease.Release(), ReleaseStatus::kReleased);
  AcquireResult second = other.AcquireFor("tls:lock", 2s);
  ASSERT_TRUE(second);
  EXPECT_GT(second.lease.fence(), 0);
}

TEST_F(Tls, MutualTlsLockEndToEnd) {
  RedisServer mtls(
      ServerOptions(certs_->server_cert, certs_->server_key, true));
  RedisOptions options = Trusting(mtls.url());
  options.tls.cert_file = certs_->client_cert;
  options.tls.key_file = certs_->client_key;
  LockClient locks(std::make_shared<RedisClient>(options));
  AcquireResult result = locks.AcquireFor("mtls:lock", 2s);
  ASSERT_TRUE(result);
  EXPECT_EQ(result.lease.Release(), ReleaseStatus::kReleased);
}

TEST_F(Tls, PasswordDbAndHostNameOverTls) {
  RedisServer::Options server_options =
      ServerOptions(certs_->server_cert, certs_->server_key);
  server_options.requirepass = "tls-s3cret";
  RedisServer server(server_options);
  // localhost: verified against the certificate's DNS entry (and sent as
  // SNI); AUTH and SELECT run inside the TLS session.
  RedisOptions options = Trusting("rediss://:tls-s3cret@localhost:" +
                                  std::to_string(server.tls_port()) + "/2");
  RedisClient client(options);
  EXPECT_EQ(client.Execute({"SET", "where", "db2"}).str, "OK");
  RedisClient db0(Trusting(server.url()));
  EXPECT_TRUE(db0.Execute({"GET", "where"}).is_nil());
}

TEST_F(Tls, CaDirectoryIsTrusted) {
  RedisOptions options;
  options.url = server_->url();
  options.tls.ca_dir = certs_->ca_dir;
  EXPECT_EQ(RedisClient(options).Execute({"PING"}).str, "PONG");
}

TEST_F(Tls, WithoutACaTheDefaultVerifyPathsApply) {
  RedisOptions options;
  options.url = server_->url();
  {
    // OpenSSL's default verify paths honour SSL_CERT_FILE, as other
    // OpenSSL clients (curl, openssl s_client) do.
    ScopedEnv file("SSL_CERT_FILE", certs_->ca_file);
    EXPECT_EQ(RedisClient(options).Execute({"PING"}).str, "PONG");
  }
  {
    ScopedEnv dir("SSL_CERT_DIR", certs_->ca_dir);
    ScopedEnv file("SSL_CERT_FILE", certs_->dir + "/no-such-file.pem");
    EXPECT_EQ(RedisClient(options).Execute({"PING"}).str, "PONG");
  }
  // The system's own store does not know the test CA.
  ScopedEnv file("SSL_CERT_FILE", certs_->other_ca_file);
  ScopedEnv dir("SSL_CERT_DIR", certs_->dir + "/no-such-dir");
  const Failure f = FailureOf([&] { RedisClient(options).Execute({"PING"}); });
  EXPECT_EQ(f.code, ErrorCode::kRedisAuth) << f.message;
  EXPECT_TRUE(Untrusted(f.message)) << f.message;
}

TEST_F(Tls, InsecureSkipVerifyAcceptsAnyCertificate) {
  RedisServer expired(ServerOptions(certs_->expired_cert, certs_->expired_key));
  RedisOptions options;
  options.url = expired.url();
  options.tls.insecure_skip_verify = true;
  options.tls.server_name = "not-the-name.example";
  EXPECT_EQ(RedisClient(options).Execute({"PING"}).str, "PONG");
}

TEST_F(Tls, EnabledTurnsTlsOnForARedisUrl) {
  RedisOptions options = Trusting("redis://" + HostPort(server_->tls_port()));
  options.tls.enabled = true;
  RedisClient client(options);
  EXPECT_EQ(client.endpoint().Redacted(),
            "rediss://" + HostPort(server_->tls_port()));
  EXPECT_EQ(client.Execute({"PING"}).str, "PONG");
}

// ---- verification failures -------------------------------------------------

TEST_F(Tls, WrongCaIsRefused) {
  RedisOptions options = Trusting(server_->url());
  options.tls.ca_file = certs_->other_ca_file;
  const Failure f = FailureOf([&] { RedisClient(options).Execute({"PING"}); });
  EXPECT_EQ(f.code, ErrorCode::kRedisAuth) << f.message;
  EXPECT_TRUE(Contains(f.message, "TLS handshake with " +
                                      HostPort(server_->tls_port()) +
                                      " failed: certificate verify failed ("))
      << f.message;
  EXPECT_TRUE(Untrusted(f.message)) << f.message;
  EXPECT_TRUE(Contains(f.message, "cannot connect to Redis at rediss://"))
      << f.message;
  EXPECT_LT(f.took, 2s);
}

TEST_F(Tls, ServerCertificateFromAnotherCaIsRefused) {
  RedisServer foreign(
      ServerOptions(certs_->other_server_cert, certs_->other_server_key));
  const Failure f = FailureOf(
      [&] { RedisClient(Trusting(foreign.url())).Execute({"PING"}); });
  EXPECT_EQ(f.code, ErrorCode::kRedisAuth) << f.message;
  EXPECT_TRUE(Untrusted(f.message)) << f.message;
}

TEST_F(Tls, WrongServerNameIsRefused) {
  RedisOptions options = Trusting(server_->url());
  options.tls.server_name = "redis.example.com";
  const Failure f = FailureOf([&] { RedisClient(options).Execute({"PING"}); });
  EXPECT_EQ(f.code, ErrorCode::kRedisAuth) << f.message;
  EXPECT_TRUE(
      Contains(f.message, "certificate verify failed (hostname mismatch)"))
      << f.message;
  EXPECT_TRUE(Contains(f.message, "'redis.example.com'")) << f.message;

  // An IP address is checked against the certificate's IP entries.
  options.tls.server_name = "127.0.0.2";
  const Failure ip = FailureOf([&] { RedisClient(options).Execute({"PING"}); });
  EXPECT_EQ(ip.code, ErrorCode::kRedisAuth) << ip.message;
  EXPECT_TRUE(Contains(ip.message, "IP address mismatch")) << ip.message;

  // The right name works, also when the URL's host is an address.
  options.tls.server_name = "localhost";
  EXPECT_EQ(RedisClient(options).Execute({"PING"}).str, "PONG");
}

TEST_F(Tls, ExpiredServerCertificateIsRefused) {
  RedisServer expired(ServerOptions(certs_->expired_cert, certs_->expired_key));
  const Failure f = FailureOf(
      [&] { RedisClient(Trusting(expired.url())).Execute({"PING"}); });
  EXPECT_EQ(f.code, ErrorCode::kRedisAuth) << f.message;
  EXPECT_TRUE(Contains(f.message,
                       "certificate verify failed (certificate has expired)"))
      << f.message;
}

TEST_F(Tls, MissingClientCertificateIsRefused) {
  RedisServer mtls(
      ServerOptions(certs_->server_cert, certs_->server_key, true));
  RedisOptions options = Trusting(mtls.url());
  options.connect_timeout = 1s;
  const Failure f = FailureOf([&] { RedisClient(options).Execute({"PING"}); });
  EXPECT_EQ(f.code, ErrorCode::kRedisAuth) << f.message;
  EXPECT_TRUE(Contains(f.message, "the server requires a client certificate"))
      << f.message;
  EXPECT_LT(f.took, 2s);
}

TEST_F(Tls, ClientCertificateFromAnotherCaIsRefused) {
  RedisServer mtls(
      ServerOptions(certs_->server_cert, certs_->server_key, true));
  RedisOptions options = Trusting(mtls.url());
  options.tls.cert_file = certs_->other_client_cert;
  options.tls.key_file = certs_->other_client_key;
  const Failure f = FailureOf([&] { RedisClient(options).Execute({"PING"}); });
  EXPECT_EQ(f.code, ErrorCode::kRedisAuth) << f.message;
  EXPECT_TRUE(Contains(f.message, "alert")) << f.message;
}

// ---- protocol mismatches: fail fast, never hang ----------------------------

TEST_F(Tls, PlaintextClientToTlsPortFailsClearly) {
  RedisOptions options;
  options.url = "redis://" + HostPort(server_->tls_port());
  options.connect_timeout = 1s;
  options.command_timeout = 1s;
  const Failure f = FailureOf([&] { RedisClient(options).Execute({"PING"}); });
  EXPECT_TRUE(f.code == ErrorCode::kRedisUnavailable ||
              f.code == ErrorCode::kRedisProtocol)
      << ErrorCodeName(f.code) << ": " << f.message;
  EXPECT_TRUE(Contains(f.message, "use rediss://")) << f.message;
  EXPECT_LT(f.took, 1500ms);
}

TEST_F(Tls, TlsClientToPlaintextPortFailsWithinTheConnectTimeout) {
  RedisOptions options = Trusting("rediss://" + HostPort(server_->port()));
  options.connect_timeout = 500ms;
  options.command_timeout = 5s;
  // A ClientHello is read by a plaintext Redis as an inline command: it
  // answers an error (not TLS) or waits for the line's end (the handshake
  // times out). Each connection's random bytes decide which; try a few.
  for (int i = 0; i < 3; ++i) {
    const Failure f =
        FailureOf([&] { RedisClient(options).Execute({"PING"}); });
    EXPECT_TRUE(f.code == ErrorCode::kRedisProtocol ||
                f.code == ErrorCode::kRedisTimeout ||
                f.code == ErrorCode::kRedisUnavailable)
        << ErrorCodeName(f.code) << ": " << f.message;
    EXPECT_TRUE(
        Contains(f.message, "TLS handshake with " + HostPort(server_->port())))
        << f.message;
    EXPECT_TRUE(Contains(f.message, "redis://")) << f.message;
    EXPECT_LT(f.took, 1500ms) << f.message;
  }
}

// ---- the transport ---------------------------------------------------------

TEST_F(Tls, PipelinesAndLargeValuesOverTls) {
  RedisClient client(Trusting(server_->url()));
  std::vector<Command> incrs(2000, Command{"INCR", "tls:n"});
  const uint64_t before = client.round_trips();
  const std::vector<Reply> replies = client.Pipeline(incrs);
  EXPECT_EQ(client.round_trips() - before, 1u);
  ASSERT_EQ(replies.size(), 2000u);
  EXPECT_EQ(replies.back().integer, 2000);
  client.Execute({"DEL", "tls:n"});
  // Larger than any TLS record and socket buffer: partial writes and reads.
  std::string big(8 << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 4093) big[i] = static_cast<char>(i);
  EXPECT_EQ(client.Execute({"SET", "tls:big", big}).str, "OK");
  EXPECT_EQ(client.Execute({"GET", "tls:big"}).str, big);
  client.Execute({"DEL", "tls:big"});
}

TEST_F(Tls, PerCallBudgetAgainstAStalledServer) {
  RedisOptions options = Trusting(server_->url());
  options.command_timeout = 5s;
  RedisClient client(options);
  const Script script("return 1");
  EXPECT_EQ(client.Eval(script, {}, {}).integer, 1);  // connected, loaded
  server_->Pause();
  const Failure f =
      FailureOf([&] { client.Eval(script, {}, {}, milliseconds(200)); });
  server_->Resume();
  EXPECT_EQ(f.code, ErrorCode::kRedisTimeout) << f.message;
  EXPECT_TRUE(Contains(f.message, "timed out after")) << f.message;
  EXPECT_LT(f.took, 1500ms);
  EXPECT_EQ(client.Eval(script, {}, {}).integer, 1);  // and it recovers
}

TEST_F(Tls, HandshakeKeepsTheCallBudget) {
  RedisOptions options = Trusting(server_->url());
  options.command_timeout = 5s;
  options.connect_timeout = 5s;
  RedisClient client(options);
  const Script script("return 1");
  server_->Pause();  // the kernel accepts the TCP connection; TLS stalls
  const Failure f =
      FailureOf([&] { client.Eval(script, {}, {}, milliseconds(200)); });
  server_->Resume();
  EXPECT_EQ(f.code, ErrorCode::kRedisTimeout) << f.message;
  EXPECT_TRUE(Contains(f.message, "TLS handshake")) << f.message;
  EXPECT_LT(f.took, 1500ms);
}

TEST_F(Tls, ConnectionBrokenMidReplyIsDetected) {
  RedisServer plain({.tcp = true});
  for (const bool tls : {false, true}) {
    SCOPED_TRACE(tls ? "TLS" : "plain");
    CuttingProxy proxy(tls ? server_->tls_port() : plain.port());
    RedisOptions options =
        Trusting((tls ? "rediss://" : "redis://") + HostPort(proxy.port()));
    options.pool_size = 1;
    if (!tls) options.tls = {};
    RedisClient client(options);
    EXPECT_EQ(client.Execute({"SET", "cut:big", std::string(1 << 20, 'v')}).str,
              "OK");
    proxy.CutAfter(1000);  // the reply's first 1000 bytes, then nothing
    const Failure f = FailureOf([&] { client.Execute({"GET", "cut:big"}); });
    EXPECT_EQ(f.code, ErrorCode::kRedisUnavailable) << f.message;
    EXPECT_TRUE(Contains(f.message, "the server closed the connection"))
        << f.message;
    EXPECT_LT(f.took, 1500ms);
    // The broken connection is dropped, never reused.
    EXPECT_EQ(client.Execute({"STRLEN", "cut:big"}).integer, 1 << 20);
    client.Execute({"DEL", "cut:big"});
  }
}

TEST_F(Tls, SharedContextAcrossThreads) {
  // Six connections of one pool make their handshakes at once.
  RedisOptions options = Trusting(server_->url());
  options.pool_size = 6;
  auto client = std::make_shared<RedisClient>(options);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      const std::string key = "threads:" + std::to_string(t);
      for (int i = 0; i < 100; ++i) {
        if (client->Execute({"INCR", key}).integer == i + 1) ++ok;
      }
      client->Execute({"DEL", key});
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(ok.load(), 600);
}

TEST(Ipv6, PlainTcpAndTlsOverIpv6Loopback) {
  {
    const int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
    sockaddr_in6 addr{};
    addr.sin6_family = AF_INET6;
    addr.sin6_addr = in6addr_loopback;
    const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr),
                                      sizeof(addr)) == 0;
    if (fd >= 0) ::close(fd);
    if (!ok) GTEST_SKIP() << "this host has no IPv6 loopback";
  }
  RedisServer plain({.tcp = true, .ipv6 = true});
  RedisOptions options;
  options.url = "redis://[::1]:" + std::to_string(plain.port());
  RedisClient client(options);
  EXPECT_EQ(client.Execute({"PING"}).str, "PONG");
  EXPECT_EQ(client.endpoint().Redacted(), options.url);
}

// ---- options that cannot work are refused up front -------------------------

TEST_F(Tls, BadTlsOptionsAreInvalidArguments) {
  auto code_and_message = [](const RedisOptions& options) {
    return FailureOf([&] { RedisClient client(options); });
  };
  RedisOptions missing = Trusting(server_->url());
  missing.tls.ca_file = certs_->dir + "/missing-ca.pem";
  Failure f = code_and_message(missing);
  EXPECT_EQ(f.code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(Contains(f.message, "TLS ca_file '" + missing.tls.ca_file +
                                      "': No such file or directory"))
      << f.message;

  // A FIFO would block OpenSSL's read for ever: refused at once.
  const std::string fifo = certs_->dir + "/ca.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  RedisOptions blocking = Trusting(server_->url());
  blocking.tls.ca_file = fifo;
  f = code_and_message(blocking);
  EXPECT_EQ(f.code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(Contains(f.message, "not a regular file")) << f.message;
  ::unlink(fifo.c_str());

  RedisOptions mismatch = Trusting(server_->url());
  mismatch.tls.cert_file = certs_->client_cert;
  mismatch.tls.key_file = certs_->server_key;
  f = code_and_message(mismatch);
  EXPECT_EQ(f.code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(Contains(f.message, "does not match the certificate"))
      << f.message;

  RedisOptions swapped = Trusting(server_->url());
  swapped.tls.cert_file = certs_->client_key;
  swapped.tls.key_file = certs_->client_key;
  f = code_and_message(swapped);
  EXPECT_EQ(f.code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(Contains(f.message, "TLS cert_file")) << f.message;

  RedisOptions half = Trusting(server_->url());
  half.tls.cert_file = certs_->client_cert;
  EXPECT_EQ(code_and_message(half).code, ErrorCode::kInvalidArgument);

  // TLS settings with a plaintext URL: refused, never silently plaintext.
  RedisOptions plaintext = Trusting("redis://:pw-s3cret@127.0.0.1:1");
  f = code_and_message(plaintext);
  EXPECT_EQ(f.code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(Contains(f.message, "use rediss://")) << f.message;
  EXPECT_FALSE(Contains(f.message, "pw-s3cret")) << f.message;

  RedisOptions unix_socket;
  unix_socket.url = "unix:///tmp/redis.sock";
  unix_socket.tls.enabled = true;
  EXPECT_EQ(code_and_message(unix_socket).code, ErrorCode::kInvalidArgument);

  RedisOptions insecure_with_ca = Trusting(server_->url());
  insecure_with_ca.tls.insecure_skip_verify = true;
  EXPECT_EQ(code_and_message(insecure_with_ca).code,
            ErrorCode::kInvalidArgument);
}

// Files that exist and are readable but hold no PEM: refused up front, at
// once, naming the option and the file, before any connection is tried.
TEST_F(Tls, FilesWithoutPemAreInvalidArgumentsNamingTheFile) {
  const auto write = [](const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    ASSERT_TRUE(out.good()) << path;
  };
  const auto failure = [](const RedisOptions& options) {
    return FailureOf([&] { RedisClient client(options); });
  };
  const std::string text = certs_->dir + "/not-pem.txt";
  write(text, "this is not a certificate\nnor base64 of one\n");
  const std::string empty = certs_->dir + "/empty.pem";
  write(empty, "");
  const std::string garbled = certs_->dir + "/garbled.pem";
  write(
      garbled,
      "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n");

  for (const std::string& file : {text, empty, garbled}) {
    RedisOptions options = Trusting(server_->url());
    options.tls.ca_file = file;
    const Failure f = failure(options);
    EXPECT_EQ(f.code, ErrorCode::kInvalidArgument) << f.message;
    EXPECT_TRUE(Contains(
        f.message, "TLS ca_file '" + file + "': cannot load CA certificates: "))
        << f.message;
    EXPECT_LT(f.took, 2s) << f.message;
  }
  RedisOptions options = Trusting(server_->url());
  options.tls.ca_file = text;
  EXPECT_TRUE(Contains(failure(options).message, "no certificate or crl found"))
      << failure(options).message;
  // A private key where the CAs belong holds no certificate either.
  options.tls.ca_file = certs_->client_key;
  EXPECT_EQ(failure(options).code, ErrorCode::kInvalidArgument);

  // The client certificate and key: the same.
  RedisOptions cert = Trusting(server_->url());
  cert.tls.cert_file = text;
  cert.tls.key_file = certs_->client_key;
  Failure f = failure(cert);
  EXPECT_EQ(f.code, ErrorCode::kInvalidArgument) << f.message;
  EXPECT_TRUE(Contains(
      f.message, "TLS cert_file '" + text + "': cannot load the certificate"))
      << f.message;
  RedisOptions key = Trusting(server_->url());
  key.tls.cert_file = certs_->client_cert;
  key.tls.key_file = text;
  f = failure(key);
  EXPECT_EQ(f.code, ErrorCode::kInvalidArgument) << f.message;
  EXPECT_TRUE(Contains(
      f.message, "TLS key_file '" + text + "': cannot load the private key"))
      << f.message;
}

}  // namespace
}  // namespace lockfleet::testing
