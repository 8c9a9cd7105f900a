#include "logger.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

namespace lockfleet::cli {
namespace {

std::string Timestamp() {
  using namespace std::chrono;
  const auto now = system_clock::now();
  const std::time_t seconds = system_clock::to_time_t(now);
  const auto millis =
      duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[96];
  std::snprintf(text, sizeof(text), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
                utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday, utc.tm_hour,
                utc.tm_min, utc.tm_sec, static_cast<int>(millis));
  return text;
}

config::LogLevel FromNotifier(notifier::LogLevel level) {
  switch (level) {
    case notifier::LogLevel::kDebug:
      return config::LogLevel::kDebug;
    case notifier::LogLevel::kInfo:
      return config::LogLevel::kInfo;
    case notifier::LogLevel::kWarning:
      return config::LogLevel::kWarning;
    case notifier::LogLevel::kError:
      return config::LogLevel::kError;
  }
  return config::LogLevel::kError;
}

}  // namespace

std::string Logger::Format(config::LogLevel level, std::string_view component,
                           std::string_view message) const {
  if (config_.format == config::LogFormat::kJson) {
    const nlohmann::json line = {{"ts", Timestamp()},
                                 {"level", config::LogLevelName(level)},
                                 {"component", component},
                                 {"msg", message}};
    return line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  std::string line = Timestamp();
  line.append(" ").append(config::LogLevelName(level)).append(" ");
  line.append(component).append(": ").append(message);
  return line;
}

void Logger::Log(config::LogLevel level, std::string_view component,
                 std::string_view message) const {
  if (!Enabled(level)) return;
  const std::string line = Format(level, component, message) + "\n";
  // One write per line: lines of different threads do not interleave.
  [[maybe_unused]] const ssize_t written =
      ::write(STDERR_FILENO, line.data(), line.size());
}

notifier::LogSink Logger::NotifierSink(std::string component) const {
  return [logger = *this, component = std::move(component)](
             notifier::LogLevel level, std::string_view message) {
    logger.Log(FromNotifier(level), component, message);
  };
}

}  // namespace lockfleet::cli
