#include "http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "civetweb.h"
#include "lockfleet/lockcore/error.h"
#include "lockfleet/metrics/http.h"
#include "lockfleet/metrics/metrics.h"

namespace lockfleet::metrics {
namespace internal {
namespace {

[[noreturn]] void Invalid(std::string_view listen, const std::string& why) {
  throw Error(ErrorCode::kInvalidArgument,
              "listen address '" + std::string(listen) + "': " + why);
}

// The numeric address civetweb binds: civetweb resolves no names itself
// (beyond a few), and a failed lookup deserves its own message.
std::string NumericHost(const ListenAddress& address, std::string_view listen) {
  const int family = address.ipv6 ? AF_INET6 : AF_INET;
  unsigned char buffer[sizeof(in6_addr)];
  if (inet_pton(family, address.host.c_str(), buffer) == 1) return address.host;
  if (address.ipv6) Invalid(listen, "not an IPv6 address in the brackets");
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(address.host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    Invalid(listen, "cannot resolve '" + address.host +
                        "' to an IPv4 address: " + gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> owner(found,
                                                           &freeaddrinfo);
  char text[INET_ADDRSTRLEN] = {};
  const auto* in = reinterpret_cast<const sockaddr_in*>(found->ai_addr);
  inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
  return text;
}

// civetweb reports why a start failed through its log callback, on the
// starting thread; the messages of the start in progress on this thread
// are collected here. Messages from serving threads are dropped: a client
// that hangs up is not worth a log line.
thread_local std::vector<std::string>* t_start_log = nullptr;

int LogMessage(const mg_connection* /*conn*/, const char* message) {
  if (t_start_log != nullptr && message != nullptr)
    t_start_log->emplace_back(message);
  return 1;  // handled: civetweb prints nothing itself
}

// Opens and closes one TCP connection to `host`:`port` (numeric).
void Poke(const std::string& host, bool ipv6, uint16_t port) {
  sockaddr_storage address{};
  socklen_t len = 0;
  if (ipv6) {
    auto& in6 = reinterpret_cast<sockaddr_in6&>(address);
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(port);
    if (inet_pton(AF_INET6, host.c_str(), &in6.sin6_addr) != 1) return;
    len = sizeof(in6);
  } else {
    auto& in = reinterpret_cast<sockaddr_in&>(address);
    in.sin_family = AF_INET;
    in.sin_port = htons(port);
    if (inet_pton(AF_INET, host.c_str(), &in.sin_addr) != 1) return;
    len = sizeof(in);
  }
  const int fd = socket(address.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  (void)connect(fd, reinterpret_cast<const sockaddr*>(&address), len);
  close(fd);
}

void Send(mg_connection* conn, const HttpReply& reply, bool with_body,
          std::string_view extra_headers = {}) {
  std::string head = "HTTP/1.1 " + std::to_string(reply.status) + " " +
                     mg_get_response_code_text(conn, reply.status) + "\r\n";
  head += "Content-Type: " + reply.content_type + "\r\n";
  head += "Content-Length: " + std::to_string(reply.body.size()) + "\r\n";
  head += "Cache-Control: no-store\r\nConnection: close\r\n";
  head += extra_headers;
  head += "\r\n";
  mg_write(conn, head.data(), head.size());
  if (with_body) mg_write(conn, reply.body.data(), reply.body.size());
}

}  // namespace

ListenAddress ParseListenAddress(std::string_view listen) {
  ListenAddress address;
  std::string_view port;
  if (!listen.empty() && listen.front() == '[') {
    const size_t close = listen.find(']');
    if (close == std::string_view::npos || close + 1 >= listen.size() ||
        listen[close + 1] != ':') {
      Invalid(listen, "expected [IPV6]:PORT");
    }
    address.host = std::string(listen.substr(1, close - 1));
    address.ipv6 = true;
    port = listen.substr(close + 2);
  } else {
    const size_t colon = listen.rfind(':');
    if (colon == std::string_view::npos) Invalid(listen, "expected HOST:PORT");
    address.host = std::string(listen.substr(0, colon));
    if (address.host.find(':') != std::string::npos)
      Invalid(listen, "an IPv6 address goes in brackets: [ADDRESS]:PORT");
    port = listen.substr(colon + 1);
  }
  if (address.host.empty())
    Invalid(listen, "the host is missing (0.0.0.0 listens on all interfaces)");
  unsigned value = 0;
  bool digits = !port.empty() && port.size() <= 5;
  for (char c : port) {
    digits = digits && std::isdigit(static_cast<unsigned char>(c));
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  if (!digits || value > 65535)
    Invalid(listen, "the port must be a number from 0 to 65535");
  address.port = static_cast<uint16_t>(value);
  return address;
}

HttpServer::HttpServer(std::string_view what, std::string_view listen,
                       std::string path, std::function<HttpReply()> handler)
    : path_(std::move(path)), handler_(std::move(handler)) {
  // mg_init_library is not thread-safe; mg_start2 calls it when nobody has.
  static const unsigned kCivetwebReady = mg_init_library(0);
  (void)kCivetwebReady;

  auto fail = [&](const std::string& why) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string(what) + ": cannot listen on '" +
                    std::string(listen) + "': " + why);
  };
  std::string host;
  try {
    address_ = ParseListenAddress(listen);
    host = NumericHost(address_, listen);
  } catch (const Error& e) {
    throw Error(e.code(), std::string(what) + ": " + e.what());
  }
  if (address_.ipv6 && mg_check_feature(MG_FEATURES_IPV6) == 0) {
    fail(
        "this civetweb library is built without IPv6 support (Debian 12's "
        "is); use an IPv4 address");
  }
  const std::string ports = (address_.ipv6 ? "[" + host + "]" : host) + ":" +
                            std::to_string(address_.port);
  const char* options[] = {
      "listening_ports", ports.c_str(),
      // Scrapes and health checks are rare and quick.
      "num_threads", "2",
      // A client that stalls mid-request frees its thread after this.
      "request_timeout_ms", "10000", "enable_keep_alive", "no", nullptr};
  mg_callbacks callbacks{};
  callbacks.log_message = &LogMessage;
  callbacks.begin_request = [](mg_connection* conn) {
    return Handle(conn, mg_get_user_data(mg_get_context(conn)));
  };
  mg_init_data init{&callbacks, this, options};
  char text[256] = {};
  unsigned code = 0;
  mg_error_data error{&code, text, sizeof(text)};
  std::vector<std::string> log;
  t_start_log = &log;
  ctx_ = mg_start2(&init, &error);
  t_start_log = nullptr;
  if (ctx_ == nullptr) {
    // The log has the cause ("cannot bind to ...: 98 (Address already in
    // use)"); the error text only says that the ports failed.
    std::string why;
    for (const std::string& line : log) {
      if (line == text) continue;
      why += (why.empty() ? "" : "; ") + line;
    }
    fail(why.empty() ? std::string(text) : why);
  }
  mg_server_port bound{};
  if (mg_get_server_ports(ctx_, 1, &bound) < 1) {
    mg_stop(ctx_);
    fail("civetweb reports no listening port");
  }
  port_ = static_cast<uint16_t>(bound.port);
  // Where ~HttpServer connects to: the bound address, or loopback for a
  // wildcard one.
  wake_host_ = host;
  if (host == "0.0.0.0") wake_host_ = "127.0.0.1";
  if (host == "::") wake_host_ = "::1";
}

HttpServer::~HttpServer() {
  // civetweb's accept loop polls with a 2 s timeout and looks at the stop
  // flag only between polls, so mg_stop alone takes up to 2 s. A connection
  // wakes that poll: connect to ourselves until mg_stop returns. (Shutting
  // the listening socket down would need its descriptor, which civetweb does
  // not expose.)
  std::atomic<bool> stopped{false};
  std::thread waker;
  try {
    waker = std::thread([this, &stopped] {
      while (!stopped.load()) {
        Poke(wake_host_, address_.ipv6, port_);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
  } catch (const std::system_error&) {
    // No thread to spare: the stop just takes up to 2 s.
  }
  mg_stop(ctx_);
  stopped.store(true);
  if (waker.joinable()) waker.join();
}

std::string HttpServer::url() const {
  const std::string host =
      address_.ipv6 ? "[" + address_.host + "]" : address_.host;
  return "http://" + host + ":" + std::to_string(port_) + path_;
}

// Every request comes through here (civetweb's begin_request), so no
// request can reach civetweb's own file serving.
int HttpServer::Handle(mg_connection* conn, void* self_ptr) {
  const auto* self = static_cast<const HttpServer*>(self_ptr);
  const mg_request_info* request = mg_get_request_info(conn);
  const std::string_view method =
      request->request_method ? request->request_method : "";
  const std::string_view uri = request->local_uri ? request->local_uri : "";
  const bool head = method == "HEAD";
  if (uri != self->path_) {
    Send(conn, {404, "not found; try " + self->path_ + "\n"}, !head);
    return 404;
  }
  if (method != "GET" && !head) {
    Send(conn, {405, "only GET and HEAD\n"}, true, "Allow: GET, HEAD\r\n");
    return 405;
  }
  HttpReply reply;
  try {
    reply = self->handler_();
  } catch (const std::exception& e) {
    reply = {500, std::string("internal error: ") + e.what() + "\n"};
  } catch (...) {
    reply = {500, "internal error\n"};
  }
  Send(conn, reply, !head);
  return reply.status;
}

}  // namespace internal

MetricsServer::MetricsServer(std::shared_ptr<const Metrics> metrics,
                             std::string_view listen) {
  if (!metrics) {
    throw Error(ErrorCode::kInvalidArgument, "metrics server: no Metrics");
  }
  server_ = std::make_unique<internal::HttpServer>(
      "metrics server", listen, "/metrics", [metrics] {
        return internal::HttpReply{200, metrics->Exposition(),
                                   "text/plain; version=0.0.4; charset=utf-8"};
      });
}

MetricsServer::~MetricsServer() = default;
uint16_t MetricsServer::port() const { return server_->port(); }
std::string MetricsServer::url() const { return server_->url(); }

HealthServer::HealthServer(std::function<HealthReport()> check,
                           std::string_view listen) {
  if (!check) {
    throw Error(ErrorCode::kInvalidArgument, "health server: no check");
  }
  server_ = std::make_unique<internal::HttpServer>(
      "health server", listen, "/healthz",
      [check = std::move(check)]() -> internal::HttpReply {
        try {
          HealthReport report = check();
          return {report.healthy ? 200 : 503, std::move(report.detail)};
        } catch (const std::exception& e) {
          return {503, std::string("health check failed: ") + e.what()};
        } catch (...) {
          return {503, "health check failed"};
        }
      });
}

HealthServer::~HealthServer() = default;
uint16_t HealthServer::port() const { return server_->port(); }
std::string HealthServer::url() const { return server_->url(); }

}  // namespace lockfleet::metrics
