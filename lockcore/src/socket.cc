#include "socket.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "lockfleet/lockcore/error.h"

namespace lockfleet::internal {
namespace {

// hiredis' keep-alive settings, which lockfleet had before it owned its
// sockets: probes after 15 s idle, every 5 s, 3 of them.
constexpr int kKeepAliveIdle = 15;
constexpr int kKeepAliveInterval = 5;
constexpr int kKeepAliveCount = 3;

[[noreturn]] void Throw(ErrorCode code, const std::string& message) {
  throw Error(code, message);
}

[[noreturn]] void ThrowErrno(const char* what, int error) {
  Throw(ErrorCode::kRedisUnavailable,
        std::string(what) + ": " + std::strerror(error));
}

void SetOption(int fd, int level, int name, int value) {
  // Best effort, as hiredis did: a socket without keep-alive still works.
  ::setsockopt(fd, level, name, &value, sizeof(value));
}

// Waits for a non-blocking connect() on `fd` to finish; 0 or its errno.
int FinishConnect(int fd, Deadline deadline) {
  pollfd p{fd, POLLOUT, 0};
  while (true) {
    const int ready = ::poll(&p, 1, MillisUntil(deadline));
    if (ready > 0) break;
    if (ready == 0) return ETIMEDOUT;
    if (errno != EINTR) return errno;
  }
  int error = 0;
  socklen_t len = sizeof(error);
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0) return errno;
  return error;
}

struct AddrInfoFree {
  void operator()(addrinfo* info) const { ::freeaddrinfo(info); }
};

}  // namespace

std::chrono::milliseconds Remaining(Deadline deadline) {
  return std::chrono::milliseconds(std::max(1, MillisUntil(deadline)));
}

int MillisUntil(Deadline deadline) {
  const auto left = deadline - std::chrono::steady_clock::now();
  if (left <= std::chrono::steady_clock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<long long>(ms, 1 << 30));
}

Socket::Socket(Socket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

Socket::~Socket() {
  if (fd_ >= 0) ::close(fd_);
}

Socket Socket::ConnectTcp(const std::string& host, int port,
                          Deadline deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* raw = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &raw);
      rc != 0) {
    Throw(ErrorCode::kRedisUnavailable,
          "cannot resolve '" + host + "': " + ::gai_strerror(rc));
  }
  const std::unique_ptr<addrinfo, AddrInfoFree> info(raw);
  std::vector<const addrinfo*> addresses;
  for (const addrinfo* a = info.get(); a != nullptr; a = a->ai_next) {
    addresses.push_back(a);
  }
  // IPv4 first, as hiredis did: a name with a broken IPv6 route must not
  // spend the whole connect timeout on it.
  std::stable_partition(
      addresses.begin(), addresses.end(),
      [](const addrinfo* a) { return a->ai_family == AF_INET; });
  int last_error = EHOSTUNREACH;
  for (const addrinfo* a : addresses) {
    const int fd =
        ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                 a->ai_protocol);
    if (fd < 0) {
      last_error = errno;
      continue;
    }
    Socket socket(fd);
    int error = 0;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      error = errno == EINPROGRESS ? FinishConnect(fd, deadline) : errno;
    }
    if (error == ETIMEDOUT && MillisUntil(deadline) == 0) {
      Throw(ErrorCode::kRedisTimeout, "connect timed out");
    }
    if (error != 0) {
      last_error = error;
      continue;
    }
    SetOption(fd, IPPROTO_TCP, TCP_NODELAY, 1);
    SetOption(fd, SOL_SOCKET, SO_KEEPALIVE, 1);
    SetOption(fd, IPPROTO_TCP, TCP_KEEPIDLE, kKeepAliveIdle);
    SetOption(fd, IPPROTO_TCP, TCP_KEEPINTVL, kKeepAliveInterval);
    SetOption(fd, IPPROTO_TCP, TCP_KEEPCNT, kKeepAliveCount);
    return socket;
  }
  Throw(ErrorCode::kRedisUnavailable, std::strerror(last_error));
}

Socket Socket::ConnectUnix(const std::string& path, Deadline deadline) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    Throw(ErrorCode::kInvalidArgument,
          "unix socket path longer than " +
              std::to_string(sizeof(addr.sun_path) - 1) + " bytes");
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int fd =
      ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) ThrowErrno("socket", errno);
  Socket socket(fd);
  while (true) {
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) ==
        0) {
      return socket;
    }
    int error = errno;
    if (error == EINPROGRESS) error = FinishConnect(fd, deadline);
    if (error == 0) return socket;
    // A full listen backlog: the server is busy accepting; try again
    // shortly rather than fail a burst of new connections.
    if (error == EAGAIN && MillisUntil(deadline) > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    if ((error == ETIMEDOUT || error == EAGAIN) && MillisUntil(deadline) == 0) {
      Throw(ErrorCode::kRedisTimeout, "connect timed out");
    }
    Throw(ErrorCode::kRedisUnavailable, std::strerror(error));
  }
}

bool Socket::Wait(short events, Deadline deadline) const {
  pollfd p{fd_, events, 0};
  while (true) {
    const int ready = ::poll(&p, 1, MillisUntil(deadline));
    if (ready > 0) return true;  // ready, or an error the next call reports
    if (ready == 0) return false;
    if (errno != EINTR) ThrowErrno("poll", errno);
  }
}

size_t Socket::Read(char* buffer, size_t size, Deadline deadline) {
  // Wait first: a reply is rarely there the moment its command left, and a
  // recv() that finds nothing would cost a system call per round trip.
  if (!Wait(POLLIN, deadline)) Throw(ErrorCode::kRedisTimeout, "timed out");
  while (true) {
    const ssize_t n = ::recv(fd_, buffer, size, 0);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) ThrowErrno("recv", errno);
    if (!Wait(POLLIN, deadline)) Throw(ErrorCode::kRedisTimeout, "timed out");
  }
}

void Socket::Write(const char* data, size_t size, Deadline deadline) {
  size_t done = 0;
  while (done < size) {
    // MSG_NOSIGNAL: a closed peer is EPIPE here, never SIGPIPE.
    const ssize_t n = ::send(fd_, data + done, size - done, MSG_NOSIGNAL);
    if (n >= 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) ThrowErrno("send", errno);
    if (!Wait(POLLOUT, deadline)) Throw(ErrorCode::kRedisTimeout, "timed out");
  }
}

}  // namespace lockfleet::internal
