// Test support: clients that try to starve an HTTP server on loopback.
//
// AbusiveClients keeps `idle` connections open that never send a byte, and
// `slow` connections that send a request head one byte at a time and never
// finish it. When the server closes one, it connects again at once, so the
// count holds for as long as the object lives (as a real attacker's would).
// All connections run on one thread of its own, non-blocking.
//
// Thread-safety: connected() may be called from any thread.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace lockfleet::metrics::testing {

class AbusiveClients {
 public:
  // `slow_interval`: the pause between two bytes of a slow client.
  AbusiveClients(
      uint16_t port, int idle, int slow,
      std::chrono::milliseconds slow_interval = std::chrono::milliseconds(200))
      : port_(port), interval_(slow_interval) {
    for (int i = 0; i < idle + slow; ++i) {
      clients_.push_back(Client{.slow = i >= idle});
    }
    thread_ = std::thread([this] { Run(); });
  }
  ~AbusiveClients() {
    stop_ = true;
    thread_.join();
    for (Client& c : clients_) Close(c);
  }
  AbusiveClients(const AbusiveClients&) = delete;
  AbusiveClients& operator=(const AbusiveClients&) = delete;

  // How many connections the kernel has established (accepted by the
  // server or still in its listen backlog).
  int connected() const { return connected_.load(); }
  // How many times the server closed one of them.
  int closed_by_server() const { return closed_by_server_.load(); }

  // Blocks until every client has been connected at least once, or
  // `timeout` passes. (Not "all connected at once": with more clients than
  // the server keeps, it keeps dropping some, and they reconnect.)
  bool WaitConnected(std::chrono::milliseconds timeout) const {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (started_.load() < static_cast<int>(clients_.size())) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  }

 private:
  using Clock = std::chrono::steady_clock;
  struct Client {
    bool slow = false;
    int fd = -1;
    bool established = false;
    bool ever = false;  // established at least once
    size_t sent = 0;    // bytes of kSlowHead sent
    Clock::time_point next_byte;
  };
  // Never ends: after the request line, one header that grows for ever.
  static char SlowByte(size_t i) {
    static constexpr char kHead[] = "GET /metrics HTTP/1.1\r\nX-Slow: ";
    return i < sizeof(kHead) - 1 ? kHead[i] : 'a';
  }

  void Connect(Client& c) {
    c.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port_);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    c.sent = 0;
    c.established = false;
    c.next_byte = Clock::now();
    if (connect(c.fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
      Established(c);
    }
  }
  void Established(Client& c) {
    c.established = true;
    ++connected_;
    if (!c.ever) {
      c.ever = true;
      ++started_;
    }
  }
  void Close(Client& c) {
    if (c.fd < 0) return;
    if (c.established) --connected_;
    close(c.fd);
    c.fd = -1;
  }

  void Run() {
    for (Client& c : clients_) Connect(c);
    std::vector<pollfd> fds(clients_.size());
    while (!stop_) {
      const Clock::time_point now = Clock::now();
      for (size_t i = 0; i < clients_.size(); ++i) {
        Client& c = clients_[i];
        fds[i] = {c.fd, static_cast<short>(c.established ? POLLIN : POLLOUT),
                  0};
        if (c.established && c.slow && now >= c.next_byte) {
          const char byte = SlowByte(c.sent);
          if (send(c.fd, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) {
            ++c.sent;
            c.next_byte = now + interval_;
          }
        }
      }
      if (poll(fds.data(), fds.size(), 20) < 0 && errno != EINTR) return;
      for (size_t i = 0; i < clients_.size(); ++i) {
        Client& c = clients_[i];
        if (fds[i].revents == 0) continue;
        if (!c.established) {
          int error = 0;
          socklen_t len = sizeof(error);
          getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &error, &len);
          if (error == 0 && (fds[i].revents & POLLOUT)) {
            Established(c);
            continue;
          }
        } else {
          char buffer[4096];
          const ssize_t n = recv(c.fd, buffer, sizeof(buffer), MSG_DONTWAIT);
          if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR))) continue;
          ++closed_by_server_;
        }
        Close(c);
        Connect(c);
      }
    }
  }

  const uint16_t port_;
  const std::chrono::milliseconds interval_;
  std::vector<Client> clients_;
  std::atomic<bool> stop_{false};
  std::atomic<int> connected_{0};
  std::atomic<int> started_{0};  // clients established at least once
  std::atomic<int> closed_by_server_{0};
  std::thread thread_;
};

}  // namespace lockfleet::metrics::testing
