// Internal: one civetweb server answering one path, and the "HOST:PORT"
// listen syntax shared by MetricsServer and HealthServer.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

struct mg_context;
struct mg_connection;

namespace lockfleet::metrics::internal {

struct ListenAddress {
  std::string host;  // as written, without IPv6 brackets
  uint16_t port = 0;
  bool ipv6 = false;  // written in brackets
};

// Parses "HOST:PORT" / "[IPV6]:PORT". Throws Error(kInvalidArgument).
ListenAddress ParseListenAddress(std::string_view listen);

struct HttpReply {
  int status = 200;
  std::string body;
  std::string content_type = "text/plain; charset=utf-8";
};

// Serves GET and HEAD requests for exactly `path` with `handler` (which
// runs on civetweb's threads; an exception from it becomes a 500). Other
// paths get 404, other methods 405.
//
// Thread-safety: port() and url() may be called from any thread.
class HttpServer {
 public:
  // `what` names the server in error messages ("metrics server").
  HttpServer(std::string_view what, std::string_view listen, std::string path,
             std::function<HttpReply()> handler);
  // Stops accepting and waits for the requests in flight.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const { return port_; }
  std::string url() const;

 private:
  static int Handle(mg_connection* conn, void* self);

  const std::string path_;
  const std::function<HttpReply()> handler_;
  ListenAddress address_;
  uint16_t port_ = 0;
  mg_context* ctx_ = nullptr;
  std::string wake_host_;  // numeric; see ~HttpServer
};

}  // namespace lockfleet::metrics::internal
