// RateLimitedLog: at most one line per kind every few seconds, with a count
// of what was suppressed — an outage must be visible in the log without
// flooding it.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <string>

#include "lockfleet/notifier/log.h"

namespace lockfleet::notifier {

class RateLimitedLog {
 public:
  explicit RateLimitedLog(std::chrono::seconds every = std::chrono::seconds(5))
      : every_(every) {}

  void Log(const std::string& kind, LogLevel level, const std::string& message,
           const LogSink& sink) {
    std::string line;
    {
      std::lock_guard lock(mu_);
      Entry& e = entries_[kind];
      auto now = std::chrono::steady_clock::now();
      if (e.last.time_since_epoch().count() != 0 && now - e.last < every_) {
        ++e.suppressed;
        return;
      }
      line = message;
      if (e.suppressed > 0) {
        line += " (" + std::to_string(e.suppressed) +
                " similar messages suppressed)";
      }
      e.last = now;
      e.suppressed = 0;
    }
    sink(level, line);
  }

 private:
  struct Entry {
    std::chrono::steady_clock::time_point last{};
    uint64_t suppressed = 0;
  };
  std::chrono::seconds every_;
  std::mutex mu_;
  std::map<std::string, Entry> entries_;
};

}  // namespace lockfleet::notifier
