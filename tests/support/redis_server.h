// RedisServer: a private redis-server for one test (or one test suite).
//
// Starts Debian's redis-server (found on PATH, or $LOCKFLEET_REDIS_SERVER) on
// a unix socket in a fresh temporary directory — or on a free loopback TCP
// port when Options::tcp is set, or TLS on one (Options::tls; Debian's
// redis-server is built with TLS) — with persistence off (see
// Options::durable), and waits until it answers PING. The destructor stops it
// and removes the directory. No test ever talks to a Redis it did not start.
// The server gets /dev/null for its stdio and is killed if the thread that
// started it dies (PR_SET_PDEATHSIG), so an aborted test leaves no orphan:
// start it from a long-lived thread.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace lockfleet::testing {

class RedisServer {
 public:
  struct Options {
    bool tcp = false;         // loopback TCP on a free port instead of a socket
    std::string requirepass;  // non-empty: require this password
    // Durable: append-only file with an fsync per write (appendfsync always),
    // so a Stop()/Kill() + Start() keeps every acknowledged write, lock keys
    // and their expiry included. Default: persistence off.
    bool durable = false;
    // Allows DEBUG (e.g. DEBUG SLEEP) from local connections; Redis 7 refuses
    // it by default. Default: off (the server's default).
    bool debug_command = false;
    // Also listen on [::1] (TCP and TLS ports), where the host has it.
    bool ipv6 = false;
    // Non-empty: run a sentinel (redis-server FILE --sentinel; needs tcp)
    // whose config file starts as this text. The sentinel rewrites the file
    // as it learns, and a Start() after Stop() reads it back.
    std::string sentinel_config;
    // A Redis Cluster node (needs tcp or TLS): --cluster-enabled yes, its
    // nodes.conf in the server's directory (kept across Stop()/Start()),
    // the cluster bus on a free port of its own.
    bool cluster = false;
    // More redis-server arguments, e.g. {"--rename-command", "AUTH", ""}.
    std::vector<std::string> extra_args;
    // TLS (tests/support/tls_certs.h makes the files). Set cert_file to
    // serve TLS on a free loopback port (--tls-port), then url() is
    // rediss://127.0.0.1:PORT and, unless also_plaintext, the plaintext port
    // is off (--port 0).
    struct Tls {
      std::string cert_file;  // the server's certificate; "" for no TLS
      std::string key_file;
      std::string ca_file;  // CAs for client certificates (Redis wants one)
      // --tls-auth-clients yes: a client must show a certificate of ca_file
      // (mutual TLS). Default: no.
      bool auth_clients = false;
      // The client certificate the start-up PING shows when auth_clients.
      std::string client_cert_file;
      std::string client_key_file;
      // Also serve plaintext on a port of its own (plain_url()).
      bool also_plaintext = false;
    } tls;
  };

  RedisServer();  // unix socket, no password
  explicit RedisServer(Options options);
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // "unix:///tmp/lockfleet-redis-XXXX/redis.sock", "redis://127.0.0.1:PORT"
  // or, with TLS, "rediss://127.0.0.1:TLS_PORT" (with ":password@" when
  // requirepass is set).
  const std::string& url() const { return url_; }
  // With TLS and also_plaintext: "redis://127.0.0.1:PORT"; else "".
  const std::string& plain_url() const { return plain_url_; }
  int port() const { return port_; }          // 0 for a unix socket or TLS only
  int tls_port() const { return tls_port_; }  // 0 without TLS
  // The port clients use: tls_port() with TLS, else port().
  int client_port() const { return tls_port_ != 0 ? tls_port_ : port_; }
  pid_t pid() const { return pid_; }

  void Stop();    // SIGTERM and wait; the address stays reserved for Start()
  void Start();   // (re)starts on the same address; throws on failure
  void Kill();    // SIGKILL and wait
  void Pause();   // SIGSTOP
  void Resume();  // SIGCONT

 private:
  Options options_;
  std::string dir_;
  std::string socket_path_;
  int port_ = 0;
  int tls_port_ = 0;
  int cluster_port_ = 0;
  std::string url_;
  std::string plain_url_;
  pid_t pid_ = -1;
};

}  // namespace lockfleet::testing
