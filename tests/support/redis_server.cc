#include "redis_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/redis_client.h"
#include "support/spawn_server.h"

namespace lockfleet::testing {
namespace {

int FreeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot find a free loopback port");
  }
  int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

std::string RedisServerBinary() {
  const char* env = std::getenv("LOCKFLEET_REDIS_SERVER");
  return env != nullptr && *env != '\0' ? env : "redis-server";
}

}  // namespace

RedisServer::RedisServer() : RedisServer(Options{}) {}

RedisServer::RedisServer(Options options) : options_(std::move(options)) {
  char tmpl[] = "/tmp/lockfleet-redis-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  std::string auth =
      options_.requirepass.empty() ? "" : ":" + options_.requirepass + "@";
  if (!options_.tls.cert_file.empty()) {
    tls_port_ = FreeLoopbackPort();
    url_ = "rediss://" + auth + "127.0.0.1:" + std::to_string(tls_port_);
    if (options_.tls.also_plaintext) {
      port_ = FreeLoopbackPort();
      plain_url_ = "redis://" + auth + "127.0.0.1:" + std::to_string(port_);
    }
  } else if (options_.tcp || !options_.sentinel_config.empty()) {
    port_ = FreeLoopbackPort();
    url_ = "redis://" + auth + "127.0.0.1:" + std::to_string(port_);
  } else {
    socket_path_ = dir_ + "/redis.sock";
    url_ = "unix://" + auth + socket_path_;
  }
  if (options_.cluster) cluster_port_ = FreeLoopbackPort();
  try {
    if (!options_.sentinel_config.empty()) {
      std::ofstream(dir_ + "/sentinel.conf") << options_.sentinel_config;
    }
    Start();
  } catch (...) {
    std::filesystem::remove_all(dir_);
    throw;
  }
}

RedisServer::~RedisServer() {
  if (pid_ > 0) Kill();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

void RedisServer::Start() {
  if (pid_ > 0) return;
  std::vector<std::string> args{RedisServerBinary(),
                                "--save",
                                "",
                                "--appendonly",
                                options_.durable ? "yes" : "no",
                                "--dir",
                                dir_,
                                "--bind",
                                "127.0.0.1",
                                "--port",
                                std::to_string(port_),
                                "--daemonize",
                                "no",
                                "--loglevel",
                                "warning",
                                "--logfile",
                                dir_ + "/redis.log"};
  if (!options_.sentinel_config.empty()) {
    args.insert(args.begin() + 1, {dir_ + "/sentinel.conf", "--sentinel"});
  } else {
    // A replica's full sync starts at once (Redis 7 waits 5 s by default
    // for more replicas to share a diskless transfer).
    args.insert(args.end(), {"--repl-diskless-sync-delay", "0"});
  }
  if (options_.ipv6) {
    // After "--bind 127.0.0.1"; "-": only where the host has IPv6 loopback.
    args.insert(std::find(args.begin(), args.end(), "127.0.0.1") + 1, "-::1");
  }
  if (!socket_path_.empty()) {
    args.insert(args.end(),
                {"--unixsocket", socket_path_, "--unixsocketperm", "700"});
  }
  if (!options_.requirepass.empty())
    args.insert(args.end(), {"--requirepass", options_.requirepass});
  if (options_.durable) args.insert(args.end(), {"--appendfsync", "always"});
  if (options_.debug_command)
    args.insert(args.end(), {"--enable-debug-command", "local"});
  if (options_.cluster) {
    args.insert(args.end(), {"--cluster-enabled", "yes",
                             "--cluster-config-file", dir_ + "/nodes.conf",
                             "--cluster-port", std::to_string(cluster_port_)});
  }
  args.insert(args.end(), options_.extra_args.begin(),
              options_.extra_args.end());
  const Options::Tls& tls = options_.tls;
  if (!tls.cert_file.empty()) {
    args.insert(
        args.end(),
        {"--tls-port", std::to_string(tls_port_), "--tls-cert-file",
         tls.cert_file, "--tls-key-file", tls.key_file, "--tls-ca-cert-file",
         tls.ca_file, "--tls-auth-clients", tls.auth_clients ? "yes" : "no"});
  }
  pid_ = SpawnServer(std::move(args));
  // Wait until it answers PING (generous: loaded CI machines are slow).
  RedisOptions ro;
  ro.url = url_;
  ro.pool_size = 1;
  ro.connect_timeout = std::chrono::milliseconds(500);
  if (!tls.cert_file.empty()) {
    // Only whether it answers: the tests verify certificates themselves.
    ro.tls.insecure_skip_verify = true;
    if (tls.auth_clients) {
      ro.tls.cert_file = tls.client_cert_file;
      ro.tls.key_file = tls.client_key_file;
    }
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {  // exec failed or it died
      pid_ = -1;
      throw std::runtime_error("redis-server exited at start; see " + dir_ +
                               "/redis.log");
    }
    try {
      RedisClient client(ro);
      if (client.Execute({"PING"}).str == "PONG") return;
    } catch (const Error&) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Kill();
  throw std::runtime_error("redis-server did not answer PING within 20s");
}

void RedisServer::Stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGCONT);
  ::kill(pid_, SIGTERM);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void RedisServer::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void RedisServer::Pause() {
  if (pid_ > 0) ::kill(pid_, SIGSTOP);
}

void RedisServer::Resume() {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
}

}  // namespace lockfleet::testing
