#include "http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "lockfleet/lockcore/error.h"
#include "lockfleet/metrics/http.h"
#include "lockfleet/metrics/metrics.h"

namespace lockfleet::metrics {
namespace internal {
namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void Invalid(std::string_view listen, const std::string& why) {
  throw Error(ErrorCode::kInvalidArgument,
              "listen address '" + std::string(listen) + "': " + why);
}

// The numeric address to bind: a name is resolved here, and a failed lookup
// deserves its own message.
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

// Owns one file descriptor.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) close(fd_);
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

// A listening, non-blocking socket on `host` (numeric) and `port`; on
// failure an invalid Fd and the reason in `why`.
Fd Listen(const std::string& host, bool ipv6, uint16_t port, std::string& why) {
  sockaddr_storage address{};
  socklen_t len = 0;
  if (ipv6) {
    auto& in6 = reinterpret_cast<sockaddr_in6&>(address);
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(port);
    inet_pton(AF_INET6, host.c_str(), &in6.sin6_addr);
    len = sizeof(in6);
  } else {
    auto& in = reinterpret_cast<sockaddr_in&>(address);
    in.sin_family = AF_INET;
    in.sin_port = htons(port);
    inet_pton(AF_INET, host.c_str(), &in.sin_addr);
    len = sizeof(in);
  }
  const std::string where =
      (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
  Fd fd(
      socket(address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) {
    why = std::string("cannot create a socket: ") + std::strerror(errno);
    return Fd();
  }
  const int one = 1;
  // A restarted worker rebinds while its old connections sit in TIME_WAIT.
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (ipv6) setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), len) != 0) {
    why = "cannot bind to " + where + (ipv6 ? " (IPv6)" : "") + ": " +
          std::strerror(errno);
    return Fd();
  }
  if (listen(fd.get(), SOMAXCONN) != 0) {
    why = "cannot listen on " + where + ": " + std::strerror(errno);
    return Fd();
  }
  return fd;
}

uint16_t BoundPort(int fd) {
  sockaddr_storage address{};
  socklen_t len = sizeof(address);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &len) != 0)
    return 0;
  if (address.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6&>(address).sin6_port);
  return ntohs(reinterpret_cast<const sockaddr_in&>(address).sin_port);
}

const char* StatusText(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

// The whole response: we always close after it (no keep-alive: a kept
// connection is one more a client can sit on).
std::string Response(const HttpReply& reply, bool with_body,
                     std::string_view extra_headers = {}) {
  std::string out = "HTTP/1.1 " + std::to_string(reply.status) + " " +
                    StatusText(reply.status) + "\r\n";
  out += "Content-Type: " + reply.content_type + "\r\n";
  out += "Content-Length: " + std::to_string(reply.body.size()) + "\r\n";
  out += "Cache-Control: no-store\r\nConnection: close\r\n";
  out += extra_headers;
  out += "\r\n";
  if (with_body) out += reply.body;
  return out;
}

HttpReply RunHandler(const Route& route) {
  try {
    return route.handler();
  } catch (const std::exception& e) {
    return {500, std::string("internal error: ") + e.what() + "\n"};
  } catch (...) {
    return {500, "internal error\n"};
  }
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

// The serving thread owns every connection (conns_, listener_, the
// accept pause); handler threads meet it only through mu_ and the wake
// eventfd.
class HttpServer::Loop {
 public:
  Loop(Fd listener, std::vector<Route> routes, ServerLimits limits)
      : routes_(std::move(routes)),
        limits_(limits),
        listener_(std::move(listener)),
        wake_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (wake_.get() < 0) {
      throw Error(ErrorCode::kInternal,
                  std::string("eventfd: ") + std::strerror(errno));
    }
    try {
      for (int i = 0; i < limits_.handler_threads; ++i)
        handlers_.emplace_back([this] { RunHandlers(); });
      serving_ = std::thread([this] { Serve(); });
    } catch (...) {
      Stop();
      throw;
    }
  }
  ~Loop() { Stop(); }

 private:
  enum class State {
    kReading,   // the request head, until request_timeout
    kHandling,  // a handler thread has it; no deadline, not polled
    kWriting,   // the reply, until write_timeout
    kClosing,   // replied and half-closed; waiting for the client's close
  };
  struct Conn {
    Fd fd;
    State state = State::kReading;
    std::string in;
    std::string out;
    size_t sent = 0;
    Clock::time_point deadline;
  };
  struct Job {
    uint64_t conn;
    const Route* route;
    bool head;
  };
  // After the reply, how long a client gets to close its side: closing
  // while its bytes are unread would reset the connection, and a reset can
  // discard the reply before the client has read it.
  static constexpr std::chrono::milliseconds kLinger{1000};
  // Out of descriptors, with nothing to drop: accepting again at once
  // would spin on a listener that stays readable.
  static constexpr std::chrono::milliseconds kAcceptPause{100};
  static constexpr int kAcceptsPerPoll = 64;

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    Wake();
    if (serving_.joinable()) serving_.join();
    for (std::thread& t : handlers_) t.join();
    handlers_.clear();
  }

  void Wake() {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = write(wake_.get(), &one, sizeof(one));
  }

  void RunHandlers() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      const Job job = jobs_.front();
      jobs_.pop_front();
      lock.unlock();
      std::string response = Response(RunHandler(*job.route), !job.head);
      lock.lock();
      replies_.emplace_back(job.conn, std::move(response));
      Wake();
    }
  }

  bool Stopping() {
    std::lock_guard<std::mutex> lock(mu_);
    return stopping_;
  }

  void Serve() {
    std::vector<pollfd> fds;
    std::vector<uint64_t> ids;  // of fds[2...]
    while (!Stopping()) {
      Clock::time_point now = Clock::now();
      fds.clear();
      ids.clear();
      fds.push_back({wake_.get(), POLLIN, 0});
      const bool accepting = now >= accept_paused_until_;
      fds.push_back({accepting ? listener_.get() : -1, POLLIN, 0});
      Clock::time_point next =
          accepting ? now + std::chrono::seconds(1) : accept_paused_until_;
      for (auto& [id, conn] : conns_) {
        if (conn.state == State::kHandling) continue;
        const short events = conn.state == State::kWriting ? POLLOUT : POLLIN;
        fds.push_back({conn.fd.get(), events, 0});
        ids.push_back(id);
        next = std::min(next, conn.deadline);
      }
      const auto wait =
          std::chrono::ceil<std::chrono::milliseconds>(next - now).count();
      if (poll(fds.data(), fds.size(),
               static_cast<int>(std::max<int64_t>(0, wait))) < 0) {
        if (errno != EINTR) std::this_thread::sleep_for(kAcceptPause);
        continue;
      }
      now = Clock::now();
      if (fds[0].revents != 0) {
        uint64_t count = 0;
        [[maybe_unused]] const ssize_t n = read(wake_.get(), &count, 8);
        TakeReplies(now);
      }
      for (size_t i = 2; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        auto it = conns_.find(ids[i - 2]);
        if (it == conns_.end()) continue;
        Conn& conn = it->second;
        const bool keep = conn.state == State::kWriting
                              ? Write(conn, now)
                              : Read(it->first, conn, now);
        if (!keep) conns_.erase(it);
      }
      std::erase_if(conns_, [now](const auto& entry) {
        return entry.second.state != State::kHandling &&
               now >= entry.second.deadline;
      });
      // After the reads: a probe's request that came with its connection is
      // read before new connections can push it out.
      if (fds[1].revents != 0) Accept(now);
    }
  }

  void Accept(Clock::time_point now) {
    for (int i = 0; i < kAcceptsPerPoll; ++i) {
      Fd fd(accept4(listener_.get(), nullptr, nullptr,
                    SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (fd.get() < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
            errno == ENOMEM) {
          if (DropOne()) continue;
          accept_paused_until_ = now + kAcceptPause;
        }
        return;  // EAGAIN: no more waiting
      }
      if (conns_.size() >= limits_.max_connections && !DropOne()) {
        continue;  // every connection is being handled: close this one
      }
      Conn conn;
      conn.fd = std::move(fd);
      conn.deadline = now + limits_.request_timeout;
      const uint64_t id = next_id_++;
      auto it = conns_.emplace(id, std::move(conn)).first;
      // A probe sends its head with the connect: read it now, before the
      // rest of this batch can push the new connection out.
      if (!Read(id, it->second, now)) conns_.erase(it);
    }
  }

  // Closes the oldest connection that costs least to lose: one already
  // answered, else one still sending its head (an idle or slow client: a
  // probe sends its head with the connect), else one still being sent its
  // reply. False when every connection is with a handler.
  bool DropOne() {
    for (State state : {State::kClosing, State::kReading, State::kWriting}) {
      const auto it = std::find_if(
          conns_.begin(), conns_.end(),
          [state](const auto& e) { return e.second.state == state; });
      if (it != conns_.end()) {
        conns_.erase(it);
        return true;
      }
    }
    return false;
  }

  // False: close the connection.
  bool Read(uint64_t id, Conn& conn, Clock::time_point now) {
    char buffer[4096];
    const ssize_t n = recv(conn.fd.get(), buffer, sizeof(buffer), 0);
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    if (conn.state == State::kClosing) return true;  // discarded
    conn.in.append(buffer, static_cast<size_t>(n));
    const bool complete = conn.in.find("\r\n\r\n") != std::string::npos ||
                          conn.in.find("\n\n") != std::string::npos;
    if (conn.in.size() > limits_.max_request_head) {
      return Reply(conn, Response({431, "request head too large\n"}, true),
                   now);
    }
    return complete ? Dispatch(id, conn, now) : true;
  }

  bool Dispatch(uint64_t id, Conn& conn, Clock::time_point now) {
    std::string_view line(conn.in);
    line = line.substr(0, line.find('\n'));
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const size_t sp1 = line.find(' ');
    const size_t sp2 =
        sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos ||
        line.substr(sp2 + 1).substr(0, 5) != "HTTP/") {
      return Reply(conn, Response({400, "bad request\n"}, true), now);
    }
    const std::string_view method = line.substr(0, sp1);
    std::string_view path = line.substr(sp1 + 1, sp2 - sp1 - 1);
    path = path.substr(0, path.find('?'));
    const bool head = method == "HEAD";
    const auto route =
        std::find_if(routes_.begin(), routes_.end(),
                     [path](const Route& r) { return r.path == path; });
    if (route == routes_.end()) {
      std::string paths;
      for (const Route& r : routes_)
        paths += (paths.empty() ? "" : ", ") + r.path;
      return Reply(
          conn, Response({404, "not found; try " + paths + "\n"}, !head), now);
    }
    if (method != "GET" && !head) {
      return Reply(
          conn,
          Response({405, "only GET and HEAD\n"}, true, "Allow: GET, HEAD\r\n"),
          now);
    }
    if (route->on_serving_thread) {
      return Reply(conn, Response(RunHandler(*route), !head), now);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (jobs_.size() < limits_.max_waiting) {
        jobs_.push_back({id, &*route, head});
        conn.state = State::kHandling;
      }
    }
    if (conn.state != State::kHandling) {
      return Reply(conn,
                   Response({503, "busy: too many requests waiting\n"}, !head),
                   now);
    }
    cv_.notify_one();
    conn.in = std::string();
    return true;
  }

  void TakeReplies(Clock::time_point now) {
    std::vector<std::pair<uint64_t, std::string>> replies;
    {
      std::lock_guard<std::mutex> lock(mu_);
      replies.swap(replies_);
    }
    for (auto& [id, response] : replies) {
      const auto it = conns_.find(id);
      if (it == conns_.end() || it->second.state != State::kHandling) continue;
      if (!Reply(it->second, std::move(response), now)) conns_.erase(it);
    }
  }

  bool Reply(Conn& conn, std::string response, Clock::time_point now) {
    conn.in = std::string();
    conn.out = std::move(response);
    conn.sent = 0;
    conn.state = State::kWriting;
    conn.deadline = now + limits_.write_timeout;
    return Write(conn, now);
  }

  bool Write(Conn& conn, Clock::time_point now) {
    while (conn.sent < conn.out.size()) {
      const ssize_t n = send(conn.fd.get(), conn.out.data() + conn.sent,
                             conn.out.size() - conn.sent, MSG_NOSIGNAL);
      if (n < 0) {
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      }
      conn.sent += static_cast<size_t>(n);
    }
    shutdown(conn.fd.get(), SHUT_WR);
    conn.out = std::string();
    conn.state = State::kClosing;
    conn.deadline = now + kLinger;
    return true;
  }

  const std::vector<Route> routes_;
  const ServerLimits limits_;
  const Fd listener_;
  const Fd wake_;                   // eventfd: stop, or replies_ has something
  std::map<uint64_t, Conn> conns_;  // by accept order, oldest first
  uint64_t next_id_ = 0;
  Clock::time_point accept_paused_until_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;                                  // guarded by mu_
  std::deque<Job> jobs_;                                   // guarded by mu_
  std::vector<std::pair<uint64_t, std::string>> replies_;  // guarded by mu_
  std::vector<std::thread> handlers_;
  std::thread serving_;
};

HttpServer::HttpServer(std::string_view what, std::string_view listen,
                       std::vector<Route> routes, ServerLimits limits) {
  std::string host;
  try {
    address_ = ParseListenAddress(listen);
    host = NumericHost(address_, listen);
  } catch (const Error& e) {
    throw Error(e.code(), std::string(what) + ": " + e.what());
  }
  std::string why;
  Fd fd = Listen(host, address_.ipv6, address_.port, why);
  if (fd.get() < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string(what) + ": cannot listen on '" +
                    std::string(listen) + "': " + why);
  }
  port_ = BoundPort(fd.get());
  loop_ = std::make_unique<Loop>(std::move(fd), std::move(routes), limits);
}

HttpServer::~HttpServer() = default;

std::string HttpServer::url(std::string_view path) const {
  const std::string host =
      address_.ipv6 ? "[" + address_.host + "]" : address_.host;
  return "http://" + host + ":" + std::to_string(port_) + std::string(path);
}

}  // namespace internal

MetricsServer::MetricsServer(std::shared_ptr<const Metrics> metrics,
                             std::string_view listen) {
  if (!metrics) {
    throw Error(ErrorCode::kInvalidArgument, "metrics server: no Metrics");
  }
  std::vector<internal::Route> routes;
  routes.push_back({"/metrics", [metrics] {
                      return internal::HttpReply{
                          200, metrics->Exposition(),
                          "text/plain; version=0.0.4; charset=utf-8"};
                    }});
  server_ = std::make_unique<internal::HttpServer>("metrics server", listen,
                                                   std::move(routes));
}

MetricsServer::~MetricsServer() = default;
uint16_t MetricsServer::port() const { return server_->port(); }
std::string MetricsServer::url() const { return server_->url("/metrics"); }

HealthServer::HealthServer(std::function<HealthReport()> check,
                           std::string_view listen) {
  if (!check) {
    throw Error(ErrorCode::kInvalidArgument, "health server: no check");
  }
  std::function<internal::HttpReply()> ready =
      [check = std::move(check)]() -> internal::HttpReply {
    try {
      HealthReport report = check();
      return {report.healthy ? 200 : 503, std::move(report.detail)};
    } catch (const std::exception& e) {
      return {503, std::string("health check failed: ") + e.what()};
    } catch (...) {
      return {503, "health check failed"};
    }
  };
  std::vector<internal::Route> routes;
  // The serving thread answering is the whole liveness test.
  routes.push_back({"/livez",
                    [] {
                      return internal::HttpReply{200, "ok\n"};
                    },
                    /*on_serving_thread=*/true});
  routes.push_back({"/readyz", ready});
  routes.push_back({"/healthz", ready});
  server_ = std::make_unique<internal::HttpServer>("health server", listen,
                                                   std::move(routes));
}

HealthServer::~HealthServer() = default;
uint16_t HealthServer::port() const { return server_->port(); }
std::string HealthServer::url() const { return server_->url("/healthz"); }

}  // namespace lockfleet::metrics
