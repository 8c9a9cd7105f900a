// RedisServer: a private redis-server for one test (or one test suite).
//
// Starts Debian's redis-server (found on PATH, or $LOCKFLEET_REDIS_SERVER) on
// a unix socket in a fresh temporary directory — or on a free loopback TCP
// port when Options::tcp is set — with persistence off (see Options::durable),
// and waits until it answers PING. The destructor stops it and removes the
// directory. No test ever talks to a Redis it did not start. The server gets
// /dev/null for its stdio and is killed if the thread that started it dies
// (PR_SET_PDEATHSIG), so an aborted test leaves no orphan: start it from a
// long-lived thread.
#pragma once

#include <sys/types.h>

#include <string>

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
  };

  RedisServer();  // unix socket, no password
  explicit RedisServer(Options options);
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // "unix:///tmp/lockfleet-redis-XXXX/redis.sock" or "redis://127.0.0.1:PORT"
  // (with ":password@" when requirepass is set).
  const std::string& url() const { return url_; }
  int port() const { return port_; }  // 0 for a unix socket
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
  std::string url_;
  pid_t pid_ = -1;
};

}  // namespace lockfleet::testing
