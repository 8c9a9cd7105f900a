// The systemd service notification protocol (sd_notify(3)), for
// `lockfleet worker` under a unit with Type=notify and WatchdogSec=: one
// datagram per message to the unix socket $NOTIFY_SOCKET ("READY=1",
// "STOPPING=1", "WATCHDOG=1", "STATUS=..."). Written here rather than
// linking libsystemd: the protocol is a documented, stable datagram format
// (systemd's own docs give a reference implementation to copy).
//
// Without $NOTIFY_SOCKET (not run by systemd, or Type=exec) every call does
// nothing. The watchdog interval is half of $WATCHDOG_USEC, and only when
// $WATCHDOG_PID is unset or names this process.
//
// Thread-safety: Notify may be called from any thread.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace lockfleet::cli {

class SystemdNotifier {
 public:
  // Reads the environment and opens the socket. Never throws: a malformed
  // $NOTIFY_SOCKET leaves it disabled (error() says why).
  SystemdNotifier();
  ~SystemdNotifier();
  SystemdNotifier(const SystemdNotifier&) = delete;
  SystemdNotifier& operator=(const SystemdNotifier&) = delete;

  bool enabled() const { return fd_ >= 0; }
  // Why $NOTIFY_SOCKET could not be used; "" when it was, or is unset.
  const std::string& error() const { return error_; }
  // How often to send WATCHDOG=1; nullopt when systemd asked for no pings.
  std::optional<std::chrono::milliseconds> watchdog_interval() const {
    return watchdog_;
  }

  // Sends `state` (newline-separated KEY=VALUE lines) without ever blocking
  // (a full socket drops it). False when disabled or the send failed.
  bool Notify(std::string_view state) const;

 private:
  int fd_ = -1;
  std::string address_;  // sockaddr_un path; a leading '\0' for abstract
  std::string error_;
  std::optional<std::chrono::milliseconds> watchdog_;
};

}  // namespace lockfleet::cli
