// HTTP endpoints: the Prometheus scrape endpoint, a health endpoint, and the
// small client the CLI scrapes its workers with.
//
// Both servers run on civetweb (its C library stays out of this header):
// a few worker threads of their own, started by the constructor and joined
// by the destructor, which returns only once no request is in flight (so a
// handler never runs after its server is gone).
//
// Listen addresses are "HOST:PORT": an IPv4 address or a host name
// ("127.0.0.1:9464", "0.0.0.0:9464" for every interface, "localhost:0"), or
// an IPv6 address in brackets ("[::1]:9464"). Port 0 picks a free port (see
// port()). IPv6 needs a civetweb built with IPv6 support; Debian 12's is
// not, and then an IPv6 address is refused with a message saying so.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace lockfleet::metrics {

class Metrics;

namespace internal {
class HttpServer;
}  // namespace internal

// Serves GET (and HEAD) /metrics: Metrics::Exposition(), rendered on the
// requesting thread at each scrape. Other paths answer 404, other methods
// 405.
//
// Thread-safety: all methods may be called from any thread concurrently.
class MetricsServer {
 public:
  // Listening when it returns. Throws Error(kInvalidArgument) for a
  // malformed, unusable or busy `listen` address, with the reason.
  MetricsServer(std::shared_ptr<const Metrics> metrics,
                std::string_view listen);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // The port it listens on (the chosen one when `listen` asked for 0).
  uint16_t port() const;
  // "http://HOST:PORT/metrics", HOST as given in `listen`.
  std::string url() const;

 private:
  std::unique_ptr<internal::HttpServer> server_;
};

struct HealthReport {
  bool healthy = false;
  std::string detail;  // the response body (text/plain), e.g. "ok"
};

// Serves GET (and HEAD) /healthz: 200 when the check reports healthy, 503
// otherwise (also when the check throws), with the detail as the body.
//
// Thread-safety: all methods may be called from any thread concurrently.
class HealthServer {
 public:
  // `check` runs on a server thread at every request: it must be
  // thread-safe and quick (load balancers time out). Listen rules and errors
  // as for MetricsServer.
  HealthServer(std::function<HealthReport()> check, std::string_view listen);
  ~HealthServer();
  HealthServer(const HealthServer&) = delete;
  HealthServer& operator=(const HealthServer&) = delete;

  uint16_t port() const;
  // "http://HOST:PORT/healthz".
  std::string url() const;

 private:
  std::unique_ptr<internal::HttpServer> server_;
};

struct HttpResponse {
  // The HTTP status code, or 0 when no response arrived (then `error` says
  // why: cannot resolve, refused, timed out, malformed reply).
  int status = 0;
  std::string body;
  std::string error;
};

// One blocking HTTP/1.0 GET of http://host:port/path, all of it (connect,
// send, read to the end) within `timeout`. `host` is a name, an IPv4
// address or an IPv6 address (with or without brackets). Network failures
// are results (status 0), not exceptions: a scraper polling many targets
// expects some to be down. Throws Error(kInvalidArgument) for an empty host,
// port 0, or a path that does not start with '/'. Bodies over 64 MiB are an
// error. Thread-safe.
HttpResponse HttpGet(std::string_view host, uint16_t port,
                     std::string_view path, std::chrono::milliseconds timeout);

}  // namespace lockfleet::metrics
