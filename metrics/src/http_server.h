// Internal: the small HTTP server behind MetricsServer and HealthServer,
// and the "HOST:PORT" listen syntax they share.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

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

struct Route {
  std::string path;  // exact; a query string in the request is ignored
  std::function<HttpReply()> handler;
  // Run on the serving thread itself, between two polls: only for handlers
  // that never block and take microseconds (/livez). Others run on the
  // handler threads. Default: false.
  bool on_serving_thread = false;
};

// What one client, or many, can hold. The defaults fit probes and scrapes:
// a request head arrives in one packet right after the connect.
struct ServerLimits {
  // Open client connections. A new one past this drops the oldest
  // connection still sending its request head (or, failing that, the
  // oldest still receiving its reply). Default: 128.
  size_t max_connections = 128;
  // From accept to the end of the request head; then the connection is
  // closed. Default: 5 s.
  std::chrono::milliseconds request_timeout{5000};
  // To send a whole reply. Default: 30 s.
  std::chrono::milliseconds write_timeout{30000};
  // A longer request head is answered 431. Default: 8 KiB.
  size_t max_request_head = 8192;
  // Threads that run the handlers not on the serving thread. Default: 2.
  int handler_threads = 2;
  // Requests waiting for a handler thread; one more is answered 503 at once.
  // Default: 16.
  size_t max_waiting = 16;
};

// Serves GET and HEAD requests for the `routes` (other paths get 404, other
// methods 405; a handler's exception becomes a 500), one request per
// connection. One serving thread owns every connection and never blocks on
// a client: it polls them all, reads request heads as they come, and writes
// replies as the clients take them. So idle, slow and numerous clients cost
// a descriptor and a few KiB each, within ServerLimits, and cannot hold up
// a client that sends its request.
//
// Thread-safety: port() and url() may be called from any thread.
class HttpServer {
 public:
  // `what` names the server in error messages ("metrics server"). Listening
  // when it returns; throws Error(kInvalidArgument) when it cannot listen.
  HttpServer(std::string_view what, std::string_view listen,
             std::vector<Route> routes, ServerLimits limits = {});
  // Stops serving and waits for the handlers running (queued requests are
  // dropped, their connections closed).
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const { return port_; }
  // "http://HOST:PORT" + `path`, HOST as given in `listen`.
  std::string url(std::string_view path) const;

 private:
  class Loop;

  ListenAddress address_;
  uint16_t port_ = 0;
  std::unique_ptr<Loop> loop_;
};

}  // namespace lockfleet::metrics::internal
