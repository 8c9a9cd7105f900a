// Socket: one connected, non-blocking stream socket (TCP, IPv4 or IPv6, or
// a unix socket) whose every wait has a deadline. Internal to lockcore: the
// bottom of the connection layer (transport.h).
//
// Thread-safety: one thread at a time per Socket.
#pragma once

#include <chrono>
#include <string>

namespace lockfleet::internal {

// When an operation must have finished (steady clock).
using Deadline = std::chrono::steady_clock::time_point;

// Milliseconds until `deadline`, rounded up, >= 0: a poll() timeout.
int MillisUntil(Deadline deadline);

// What is left until `deadline`, at least 1 ms (a bound to pass on: 0
// would mean "no bound" to the callee).
std::chrono::milliseconds Remaining(Deadline deadline);

class Socket {
 public:
  // Connects to `host`:`port` — each address the name resolves to in turn,
  // IPv4 ones first, until one accepts — or to the unix socket `path`, by
  // `deadline`. The socket is non-blocking and close-on-exec; a TCP one has
  // TCP_NODELAY and keep-alive probes (after 15 s idle). Throws Error:
  // kRedisTimeout when the deadline passed, kRedisUnavailable otherwise,
  // with the bare reason ("Connection refused") for the caller to put after
  // the endpoint. Name resolution (getaddrinfo) cannot be interrupted and
  // may outlast the deadline for a name whose DNS server does not answer.
  static Socket ConnectTcp(const std::string& host, int port,
                           Deadline deadline);
  static Socket ConnectUnix(const std::string& path, Deadline deadline);

  Socket(Socket&& other) noexcept;
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket();

  int fd() const { return fd_; }

  // Waits until the socket is readable (`events` POLLIN) or writable
  // (POLLOUT), or has failed or hung up; false when the deadline passed
  // first. Throws Error(kRedisUnavailable) if poll() fails.
  bool Wait(short events, Deadline deadline) const;

  // Plain I/O. Read returns the bytes read, 0 when the peer closed the
  // connection; Write writes all of `size`. Both throw Error:
  // kRedisTimeout ("timed out") at the deadline, kRedisUnavailable on an I/O
  // error.
  size_t Read(char* buffer, size_t size, Deadline deadline);
  void Write(const char* data, size_t size, Deadline deadline);

 private:
  explicit Socket(int fd) : fd_(fd) {}

  int fd_ = -1;
};

}  // namespace lockfleet::internal
