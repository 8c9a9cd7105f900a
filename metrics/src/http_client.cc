#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "lockfleet/lockcore/error.h"
#include "lockfleet/metrics/http.h"

namespace lockfleet::metrics {
namespace {

using Deadline = std::chrono::steady_clock::time_point;

constexpr size_t kMaxResponseBytes = size_t{64} << 20;

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

int MillisLeft(Deadline deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

// Waits for `events` on `fd` until `deadline`: true when ready.
bool Wait(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int rc = poll(&p, 1, MillisLeft(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return false;
  }
}

std::string Errno(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

// Connects a non-blocking socket to one address; "" on success.
std::string Connect(const Fd& s, const addrinfo& a, Deadline deadline) {
  if (connect(s.fd, a.ai_addr, a.ai_addrlen) == 0) return "";
  if (errno != EINPROGRESS) return Errno("connect");
  if (!Wait(s.fd, POLLOUT, deadline)) return "connect: timed out";
  int error = 0;
  socklen_t len = sizeof(error);
  getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &error, &len);
  if (error != 0) return std::string("connect: ") + std::strerror(error);
  return "";
}

// Parses "HTTP/1.x NNN reason\r\nheaders\r\n\r\nbody" into `response`.
void ParseResponse(const std::string& raw, HttpResponse& response) {
  const size_t end = raw.find("\r\n\r\n");
  const size_t space = raw.find(' ');
  if (raw.compare(0, 5, "HTTP/") != 0 || end == std::string::npos ||
      space == std::string::npos || space + 4 > end) {
    response.error = "malformed HTTP response";
    return;
  }
  int status = 0;
  for (size_t i = space + 1; i < space + 4; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(raw[i]))) {
      response.error = "malformed HTTP status line";
      return;
    }
    status = status * 10 + (raw[i] - '0');
  }
  std::string headers = raw.substr(0, end + 2);
  for (char& c : headers) c = static_cast<char>(std::tolower(c));
  if (headers.find("\r\ntransfer-encoding:") != std::string::npos) {
    // HTTP/1.0 requests must not get chunked replies (RFC 9112 7.1).
    response.error = "unexpected Transfer-Encoding in a reply to HTTP/1.0";
    return;
  }
  std::string body = raw.substr(end + 4);
  const std::string_view kLength = "\r\ncontent-length:";
  if (size_t at = headers.find(kLength); at != std::string::npos) {
    const size_t length =
        std::strtoull(headers.c_str() + at + kLength.size(), nullptr, 10);
    if (body.size() < length) {
      response.error = "response truncated: " + std::to_string(body.size()) +
                       " of " + std::to_string(length) + " body bytes";
      return;
    }
  }
  response.status = status;
  response.body = std::move(body);
}

}  // namespace

HttpResponse HttpGet(std::string_view host, uint16_t port,
                     std::string_view path, std::chrono::milliseconds timeout) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host.empty() || port == 0 || path.empty() || path.front() != '/') {
    throw Error(ErrorCode::kInvalidArgument,
                "HttpGet: need a host, a port > 0 and a path starting with "
                "'/' (got host '" +
                    std::string(host) + "', port " + std::to_string(port) +
                    ", path '" + std::string(path) + "')");
  }
  const Deadline deadline = std::chrono::steady_clock::now() + timeout;
  const std::string host_text(host);
  HttpResponse response;

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host_text.c_str(), std::to_string(port).c_str(),
                             &hints, &found);
  if (rc != 0) {
    response.error = "cannot resolve '" + host_text + "': " + gai_strerror(rc);
    return response;
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addresses(found,
                                                               &freeaddrinfo);
  Fd s;
  std::string error = "no address";
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    Fd candidate;
    candidate.fd =
        socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
               a->ai_protocol);
    if (candidate.fd < 0) {
      error = Errno("socket");
      continue;
    }
    error = Connect(candidate, *a, deadline);
    if (error.empty()) {
      std::swap(s.fd, candidate.fd);
      break;
    }
  }
  const std::string target = host_text + ":" + std::to_string(port);
  if (s.fd < 0) {
    response.error = target + ": " + error;
    return response;
  }

  const bool ipv6 = host_text.find(':') != std::string::npos;
  const std::string request =
      "GET " + std::string(path) +
      " HTTP/1.0\r\nHost: " + (ipv6 ? "[" + host_text + "]" : host_text) + ":" +
      std::to_string(port) + "\r\nAccept: */*\r\nConnection: close\r\n\r\n";
  for (size_t sent = 0; sent < request.size();) {
    if (!Wait(s.fd, POLLOUT, deadline)) {
      response.error = target + ": sending the request timed out";
      return response;
    }
    const ssize_t n =
        send(s.fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      response.error = target + ": " + Errno("send");
      return response;
    }
    if (n > 0) sent += static_cast<size_t>(n);
  }

  std::string raw;
  char buffer[16384];
  for (;;) {
    if (!Wait(s.fd, POLLIN, deadline)) {
      response.error = target + ": reading the response timed out";
      return response;
    }
    const ssize_t n = recv(s.fd, buffer, sizeof(buffer), 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      response.error = target + ": " + Errno("recv");
      return response;
    }
    raw.append(buffer, static_cast<size_t>(n));
    if (raw.size() > kMaxResponseBytes) {
      response.error = target + ": response larger than 64 MiB";
      return response;
    }
  }
  ParseResponse(raw, response);
  if (!response.error.empty()) response.error = target + ": " + response.error;
  return response;
}

}  // namespace lockfleet::metrics
