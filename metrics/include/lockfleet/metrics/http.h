// HTTP endpoints: the Prometheus scrape endpoint, the health endpoints, and
// the small client the CLI scrapes its workers with.
//
// Both servers run one serving thread that polls every connection (so no
// client can hold it: idle, slow and numerous clients cost a descriptor
// each) and two handler threads for the answers that take time (a scrape,
// a readiness check), all started by the constructor and joined by the
// destructor, which returns only once no handler runs (so a handler never
// runs after its server is gone). One request per connection (no
// keep-alive). Limits: 128 open connections per server, and a new one
// past that drops the oldest one still sending its request head; 5 s from
// the connect to the end of the request head; 8 KiB of request head; 30 s
// to send a reply; 16 requests waiting for a handler thread, more get 503.
//
// Listen addresses are "HOST:PORT": an IPv4 address or a host name
// ("127.0.0.1:9464", "0.0.0.0:9464" for every interface, "localhost:0"), or
// an IPv6 address in brackets ("[::1]:9464"). Port 0 picks a free port (see
// port()).
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

// Serves GET (and HEAD) /metrics: Metrics::Exposition(), rendered on a
// handler thread at each scrape. Other paths answer 404, other methods
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

// Serves GET (and HEAD) the health endpoints:
//   /livez   200 "ok\n" whenever the server's serving thread answers; runs
//            no check (a failing dependency is no reason to restart).
//   /readyz  the check: 200 when it reports healthy, 503 otherwise (also
//            when it throws), with the detail as the body.
//   /healthz the same as /readyz (the endpoint before the split).
// Other paths answer 404, other methods 405.
//
// Thread-safety: all methods may be called from any thread concurrently.
class HealthServer {
 public:
  // `check` runs on a handler thread at every /readyz or /healthz request:
  // it must be thread-safe and should be quick (probes time out; while two
  // checks hang, further readiness requests wait, /livez does not). Listen
  // rules and errors as for MetricsServer.
  HealthServer(std::function<HealthReport()> check, std::string_view listen);
  ~HealthServer();
  HealthServer(const HealthServer&) = delete;
  HealthServer& operator=(const HealthServer&) = delete;

  uint16_t port() const;
  // "http://HOST:PORT/healthz" (/livez and /readyz on the same port).
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
