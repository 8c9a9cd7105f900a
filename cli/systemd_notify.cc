#include "systemd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>

namespace lockfleet::cli {
namespace {

std::optional<long long> EnvNumber(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  long long value = 0;
  const char* end = text + std::strlen(text);
  const auto [at, ec] = std::from_chars(text, end, value);
  if (ec != std::errc() || at != end) return std::nullopt;
  return value;
}

}  // namespace

SystemdNotifier::SystemdNotifier() {
  const char* socket_path = std::getenv("NOTIFY_SOCKET");
  if (socket_path == nullptr || *socket_path == '\0') return;
  std::string path = socket_path;
  if (path[0] == '@') {
    path[0] = '\0';  // the abstract namespace
  } else if (path[0] != '/') {
    error_ = "$NOTIFY_SOCKET is neither a path nor an abstract name";
    return;
  }
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    error_ = "$NOTIFY_SOCKET is too long";
    return;
  }
  fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    error_ = std::string("socket: ") + std::strerror(errno);
    return;
  }
  address_ = std::move(path);
  const std::optional<long long> usec = EnvNumber("WATCHDOG_USEC");
  const std::optional<long long> pid = EnvNumber("WATCHDOG_PID");
  if (usec && *usec > 0 && (!pid || *pid == ::getpid())) {
    watchdog_ = std::max(std::chrono::milliseconds(1),
                         std::chrono::milliseconds(*usec / 2000));
  }
}

SystemdNotifier::~SystemdNotifier() {
  if (fd_ >= 0) ::close(fd_);
}

bool SystemdNotifier::Notify(std::string_view state) const {
  if (fd_ < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, address_.data(), address_.size());
  const socklen_t length =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address_.size() +
                             (address_[0] == '\0' ? 0 : 1));
  const ssize_t sent =
      ::sendto(fd_, state.data(), state.size(), MSG_NOSIGNAL | MSG_DONTWAIT,
               reinterpret_cast<const sockaddr*>(&addr), length);
  return sent == static_cast<ssize_t>(state.size());
}

}  // namespace lockfleet::cli
