// Logger: the log lines of long-running subcommands (worker, demo), as the
// config's `logging:` section asks — text ("2026-11-21T10:00:00.123Z info
// worker: message") or JSON lines ({"ts":...,"level":...,"component":...,
// "msg":...}) on stderr, below `level` dropped.
//
// Thread-safety: Log may be called from any thread; each line is one write.
#pragma once

#include <string>
#include <string_view>

#include "lockfleet/config/config.h"
#include "lockfleet/notifier/kafka_notifier.h"

namespace lockfleet::cli {

class Logger {
 public:
  explicit Logger(config::LoggingConfig config = {}) : config_(config) {}

  void Log(config::LogLevel level, std::string_view component,
           std::string_view message) const;

  // The line Log would write, without the newline (for tests).
  std::string Format(config::LogLevel level, std::string_view component,
                     std::string_view message) const;

  bool Enabled(config::LogLevel level) const { return level >= config_.level; }

  // A sink for the notifier's log, under `component`.
  notifier::LogSink NotifierSink(std::string component) const;

 private:
  config::LoggingConfig config_;
};

}  // namespace lockfleet::cli
