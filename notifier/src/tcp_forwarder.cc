#include "tcp_forwarder.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "lockfleet/lockcore/error.h"

namespace lockfleet::notifier {
namespace {

sockaddr_in Loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return addr;
}

void NoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Copies what is readable on `from` to `to`. False on EOF or error.
bool Pump(int from, int to) {
  char buf[64 * 1024];
  ssize_t n = ::recv(from, buf, sizeof(buf), 0);
  if (n <= 0) return false;
  for (ssize_t off = 0; off < n;) {
    ssize_t w =
        ::send(to, buf + off, static_cast<size_t>(n - off), MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    off += w;
  }
  return true;
}

}  // namespace

TcpForwarder::TcpForwarder(int listen_port, int target_port)
    : target_port_(target_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr = Loopback(listen_port);
  if (listen_fd_ < 0 ||
      ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) !=
          0 ||
      ::listen(listen_fd_, 64) != 0) {
    std::string why = std::strerror(errno);
    if (listen_fd_ >= 0) ::close(listen_fd_);
    throw Error(ErrorCode::kInvalidArgument,
                "cannot listen on 127.0.0.1:" + std::to_string(listen_port) +
                    ": " + why);
  }
  if (::pipe2(wake_pipe_, O_CLOEXEC) != 0) {
    ::close(listen_fd_);
    throw Error(ErrorCode::kInternal, "pipe2 failed");
  }
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

TcpForwarder::~TcpForwarder() {
  stop_.store(true);
  char byte = 0;
  (void)!::write(wake_pipe_[1], &byte, 1);  // wakes every poll(); never read
  if (acceptor_.joinable()) acceptor_.join();
  std::list<RelayThread> relays;
  {
    std::lock_guard lock(mu_);
    relays.swap(relays_);
  }
  for (RelayThread& r : relays) r.thread.join();
  ::close(listen_fd_);
  ::close(wake_pipe_[0]);
  ::close(wake_pipe_[1]);
}

void TcpForwarder::AcceptLoop() {
  while (!stop_.load()) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    std::lock_guard lock(mu_);
    // Join relays whose connections ended, so a long-running broker does not
    // accumulate one finished thread per client connection.
    for (auto it = relays_.begin(); it != relays_.end();) {
      if (it->done->load()) {
        it->thread.join();
        it = relays_.erase(it);
      } else {
        ++it;
      }
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    relays_.push_back({std::thread([this, client, done] {
                         Relay(client);
                         done->store(true);
                       }),
                       done});
  }
}

void TcpForwarder::Relay(int client) {
  int upstream = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = Loopback(target_port_);
  if (upstream < 0 || ::connect(upstream, reinterpret_cast<sockaddr*>(&addr),
                                sizeof(addr)) != 0) {
    if (upstream >= 0) ::close(upstream);
    ::close(client);  // the broker is down: the client sees a closed connection
    return;
  }
  NoDelay(client);
  NoDelay(upstream);
  while (!stop_.load()) {
    pollfd fds[3] = {
        {client, POLLIN, 0}, {upstream, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    if (::poll(fds, 3, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[2].revents != 0) break;
    if (fds[0].revents != 0 && !Pump(client, upstream)) break;
    if (fds[1].revents != 0 && !Pump(upstream, client)) break;
  }
  ::close(client);
  ::close(upstream);
}

}  // namespace lockfleet::notifier
