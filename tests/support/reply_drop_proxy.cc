#include "support/reply_drop_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "lockfleet/lockcore/redis_url.h"

namespace lockfleet::testing {
namespace {

using Steady = std::chrono::steady_clock;

// The longest the proxy waits for the server to answer an armed command.
constexpr std::chrono::milliseconds kReplyWait{5000};
constexpr size_t kMaxMarker = 4096;  // also the tail kept for split markers
constexpr size_t kReadChunk = 64 * 1024;

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

[[noreturn]] void Fail(const std::string& what) {
  throw std::runtime_error("ReplyDropProxy: " + what + ": " +
                           std::strerror(errno));
}

void SetNonBlocking(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
}

void SetNoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Reads what is available. Returns the byte count, 0 on EOF or a hard
// error, -1 when nothing is available yet.
ssize_t ReadSome(int fd, std::string* out) {
  char buf[kReadChunk];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n > 0) {
      out->append(buf, static_cast<size_t>(n));
      return n;
    }
    if (n == 0) return 0;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return -1;
    return 0;
  }
}

// Writes as much of `pending` as the socket takes. False on a hard error.
bool WriteSome(int fd, std::string* pending) {
  while (!pending->empty()) {
    ssize_t n = ::send(fd, pending->data(), pending->size(), MSG_NOSIGNAL);
    if (n > 0) {
      pending->erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
  return true;
}

}  // namespace

struct ReplyDropProxy::Conn {
  enum class State {
    kForward,      // bytes both ways
    kHoldRequest,  // a DelayNextRequest chunk waits until release_at
    kArmed,        // a rule matched: its chunk is being written to the server
    kAwaitReply,   // chunk forwarded: the reply is withheld, then dropped
  };
  int client = -1;
  int upstream = -1;
  std::string to_upstream;  // read from the client, not yet written
  std::string to_client;    // read from the server, not yet written
  std::string seen;      // the client's last bytes: a marker split across reads
  std::string withheld;  // a delayed reply, until its hold ran out
  bool client_eof = false;
  bool upstream_eof = false;
  State state = State::kForward;
  Rule rule;
  Steady::time_point forwarded_at;
  Steady::time_point release_at;  // kHoldRequest
  bool reply_seen = false;
  bool done = false;  // closed: removed after this round

  // When an armed connection is cut: after its hold once the server has
  // answered (at once if the client left meanwhile), at the latest when
  // the reply wait (or a longer hold) ran out.
  Steady::time_point CutAt() const {
    Steady::time_point bound = forwarded_at + std::max(rule.hold, kReplyWait);
    if (!reply_seen) return bound;
    return client < 0 ? forwarded_at : forwarded_at + rule.hold;
  }
  void Close() {
    CloseFd(client);
    CloseFd(upstream);
    done = true;
  }
};

ReplyDropProxy::ReplyDropProxy(const std::string& target) {
  std::string host, port, path;
  if (target.rfind("unix://", 0) == 0 || target.rfind("redis://", 0) == 0) {
    RedisEndpoint e = ParseRedisUrl(target);
    path = e.unix_path;
    host = e.host;
    port = std::to_string(e.port);
  } else if (!target.empty() && target[0] == '/') {
    path = target;
  } else {
    size_t colon = target.rfind(':');
    if (colon == std::string::npos)
      throw std::runtime_error("ReplyDropProxy: bad target " + target);
    host = target.substr(0, colon);
    port = target.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
      host = host.substr(1, host.size() - 2);
  }
  if (!path.empty()) {
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    if (path.size() >= sizeof(un.sun_path))
      throw std::runtime_error("ReplyDropProxy: socket path too long");
    std::memcpy(un.sun_path, path.c_str(), path.size() + 1);
    std::memcpy(&target_addr_, &un, sizeof(un));
    target_len_ = sizeof(un);
  } else {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 ||
        found == nullptr) {
      throw std::runtime_error("ReplyDropProxy: cannot resolve " + target);
    }
    std::memcpy(&target_addr_, found->ai_addr, found->ai_addrlen);
    target_len_ = found->ai_addrlen;
    ::freeaddrinfo(found);
  }

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) Fail("pipe2");
  wake_read_ = pipe_fds[0];
  wake_write_ = pipe_fds[1];
  try {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) Fail("socket");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0)
      Fail("bind");
    if (::listen(listen_fd_, 64) != 0) Fail("listen");
    if (::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) !=
        0)
      Fail("getsockname");
    port_ = ntohs(addr.sin_port);
    SetNonBlocking(listen_fd_);
    thread_ = std::thread([this] { Loop(); });
  } catch (...) {
    CloseFd(listen_fd_);
    CloseFd(wake_read_);
    CloseFd(wake_write_);
    throw;
  }
}

ReplyDropProxy::~ReplyDropProxy() {
  stopping_.store(true);
  char byte = 1;
  (void)!::write(wake_write_, &byte, 1);
  thread_.join();
  CloseFd(listen_fd_);
  CloseFd(wake_read_);
  CloseFd(wake_write_);
}

std::string ReplyDropProxy::url() const {
  return "redis://127.0.0.1:" + std::to_string(port_);
}

void ReplyDropProxy::DropNextReply(std::string marker) {
  Arm({std::move(marker), false, std::chrono::milliseconds(0)});
}

void ReplyDropProxy::GarbleNextReply(std::string marker) {
  Arm({std::move(marker), false, std::chrono::milliseconds(0), false, false,
       true});
}

void ReplyDropProxy::StallNextReply(std::string marker,
                                    std::chrono::milliseconds hold) {
  Arm({std::move(marker), true, hold});
}

void ReplyDropProxy::DelayNextReply(std::string marker,
                                    std::chrono::milliseconds hold) {
  Arm({std::move(marker), true, hold, true});
}

void ReplyDropProxy::DelayNextRequest(std::string marker,
                                      std::chrono::milliseconds hold) {
  Arm({std::move(marker), true, hold, false, true});
}

int ReplyDropProxy::armed() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(rules_.size());
}

void ReplyDropProxy::Arm(Rule rule) {
  if (rule.marker.empty() || rule.marker.size() > kMaxMarker)
    throw std::invalid_argument("ReplyDropProxy: marker must be 1..4096 bytes");
  std::lock_guard lock(mu_);
  rules_.push_back(std::move(rule));
}

bool ReplyDropProxy::TakeRule(const std::string& seen, size_t new_from,
                              Rule* rule) {
  std::lock_guard lock(mu_);
  for (auto it = rules_.begin(); it != rules_.end(); ++it) {
    // Only a match that ends in the new bytes: the tail was searched before.
    size_t overlap = it->marker.size() - 1;
    size_t start = new_from > overlap ? new_from - overlap : 0;
    if (seen.find(it->marker, start) == std::string::npos) continue;
    *rule = std::move(*it);
    rules_.erase(it);
    return true;
  }
  return false;
}

void ReplyDropProxy::PutBack(Rule rule) {
  std::lock_guard lock(mu_);
  rules_.push_front(std::move(rule));
}

void ReplyDropProxy::Accept() {
  for (;;) {
    int client =
        ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (client < 0) return;  // EAGAIN: all taken (or a transient error)
    accepted_.fetch_add(1);
    SetNoDelay(client);
    // Loopback and unix-socket connects complete at once (from the listen
    // backlog even when the server is paused), so a blocking connect is fine.
    int upstream =
        ::socket(target_addr_.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (upstream < 0 ||
        ::connect(upstream, reinterpret_cast<const sockaddr*>(&target_addr_),
                  target_len_) != 0) {
      CloseFd(upstream);  // the server is down: the client reads EOF
      CloseFd(client);
      continue;
    }
    SetNonBlocking(upstream);
    if (target_addr_.ss_family != AF_UNIX) SetNoDelay(upstream);
    auto conn = std::make_unique<Conn>();
    conn->client = client;
    conn->upstream = upstream;
    conns_.push_back(std::move(conn));
  }
}

void ReplyDropProxy::Loop() {
  std::vector<pollfd> fds;
  std::vector<std::pair<Conn*, bool>> owners;  // (conn, is client side)
  while (!stopping_.load()) {
    fds.clear();
    owners.clear();
    fds.push_back({wake_read_, POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    Steady::time_point next = Steady::time_point::max();
    for (const auto& c : conns_) {
      const bool forward = c->state == Conn::State::kForward;
      // Awaiting a reply or holding a request back: the client is only
      // watched for leaving.
      const bool holding = c->state == Conn::State::kHoldRequest;
      const bool awaiting = c->state == Conn::State::kAwaitReply || holding;
      if (c->client >= 0) {
        short ev = 0;
        // While armed, the client is only watched for leaving (a stall).
        if ((forward && c->to_upstream.empty() && !c->client_eof) || awaiting)
          ev |= POLLIN;
        if (!c->to_client.empty()) ev |= POLLOUT;
        fds.push_back({c->client, ev, 0});
        owners.emplace_back(c.get(), true);
      }
      if (c->upstream >= 0) {
        short ev = 0;
        if ((forward && c->to_client.empty() && !c->upstream_eof) ||
            (awaiting && !holding))
          ev |= POLLIN;
        if (!c->to_upstream.empty() && !holding) ev |= POLLOUT;
        fds.push_back({c->upstream, ev, 0});
        owners.emplace_back(c.get(), false);
      }
      if (holding) {
        next = std::min(next, c->release_at);
      } else if (awaiting) {
        next = std::min(next, c->CutAt());
      }
    }
    int timeout_ms = -1;
    if (next != Steady::time_point::max()) {
      auto left =
          std::chrono::ceil<std::chrono::milliseconds>(next - Steady::now());
      timeout_ms = static_cast<int>(std::max<int64_t>(0, left.count()));
    }
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) break;
    if (fds[1].revents & POLLIN) Accept();
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      Conn& c = *owners[i - 2].first;
      if (c.done) continue;
      const bool client_side = owners[i - 2].second;
      const int fd = fds[i].fd;
      if (client_side ? fd != c.client : fd != c.upstream) continue;
      const short rev = fds[i].revents;
      if (rev & (POLLIN | POLLHUP | POLLERR)) {
        if (client_side && (c.state == Conn::State::kAwaitReply ||
                            c.state == Conn::State::kHoldRequest)) {
          std::string ignored;  // a stalled client gave up (or more bytes)
          if (ReadSome(fd, &ignored) == 0) CloseFd(c.client);
        } else if (client_side && c.state == Conn::State::kArmed) {
          // Not read until the armed chunk is out: it must stay the last.
        } else if (client_side) {
          std::string chunk;
          ssize_t n = ReadSome(fd, &chunk);
          if (n == 0) c.client_eof = true;
          if (n > 0) {
            const size_t new_from = c.seen.size();
            c.seen += chunk;
            Rule rule;
            if (TakeRule(c.seen, new_from, &rule)) {
              c.rule = std::move(rule);
              c.state = Conn::State::kArmed;
              if (c.rule.hold_request) {
                c.state = Conn::State::kHoldRequest;
                c.release_at = Steady::now() + c.rule.hold;
                c.rule.hold = std::chrono::milliseconds(0);  // then: a drop
              }
            }
            if (c.seen.size() > kMaxMarker)
              c.seen.erase(0, c.seen.size() - kMaxMarker);
            c.to_upstream += chunk;
          }
        } else if (c.state == Conn::State::kAwaitReply) {
          std::string reply;
          ssize_t n = ReadSome(fd, &reply);
          if (n == 0) {
            c.upstream_eof = true;
            c.reply_seen = true;  // nothing more will come: cut it now
          } else if (n > 0 && !c.reply_seen &&
                     std::string_view(reply).starts_with("-NOSCRIPT")) {
            // The command did not run: let the client send its EVAL.
            c.to_client += reply;
            PutBack(std::move(c.rule));
            c.state = Conn::State::kForward;
          } else if (n > 0) {
            c.reply_seen = true;  // withheld: dropped, or delivered late
            if (c.rule.deliver) c.withheld += reply;
          }
        } else {
          ssize_t n = ReadSome(fd, &c.to_client);
          if (n == 0) c.upstream_eof = true;
        }
      }
      if (c.client >= 0 && !WriteSome(c.client, &c.to_client)) c.Close();
      if (c.upstream >= 0 && !c.done && c.state != Conn::State::kHoldRequest &&
          !WriteSome(c.upstream, &c.to_upstream))
        c.Close();
      if (c.state == Conn::State::kArmed && c.to_upstream.empty() && !c.done) {
        c.state = Conn::State::kAwaitReply;
        c.forwarded_at = Steady::now();
      }
    }
    const Steady::time_point now = Steady::now();
    for (auto& c : conns_) {
      if (c->done) continue;
      if (c->state == Conn::State::kHoldRequest) {
        if (now < c->release_at) continue;
        // Sent now, client or not; the reply is then dropped.
        c->state = Conn::State::kArmed;
        if (!WriteSome(c->upstream, &c->to_upstream)) {
          c->Close();
          continue;
        }
        if (c->to_upstream.empty()) {
          c->state = Conn::State::kAwaitReply;
          c->forwarded_at = now;
        }
        continue;
      }
      if (c->state == Conn::State::kAwaitReply) {
        if (c->upstream_eof) c->reply_seen = true;
        if (now >= c->CutAt()) {
          if (c->rule.deliver && c->reply_seen && c->client >= 0 &&
              !c->upstream_eof) {
            // Late, but delivered: the connection goes on as usual.
            delayed_.fetch_add(1);
            c->to_client += c->withheld;
            c->withheld.clear();
            c->state = Conn::State::kForward;
            if (!WriteSome(c->client, &c->to_client)) c->Close();
            continue;
          }
          dropped_.fetch_add(1);  // counted before the client can see EOF
          if (c->rule.garble && c->client >= 0) {
            std::string junk = "@not a RESP reply\r\n";  // '@': no type
            WriteSome(c->client, &junk);
          }
          c->Close();
        }
        continue;
      }
      // A side that left: close once what it sent has been passed on.
      if ((c->client_eof && c->to_upstream.empty()) ||
          (c->upstream_eof && c->to_client.empty()) || c->client < 0) {
        c->Close();
      }
    }
    std::erase_if(conns_, [](const auto& c) { return c->done; });
  }
  for (auto& c : conns_) c->Close();
  conns_.clear();
}

}  // namespace lockfleet::testing
