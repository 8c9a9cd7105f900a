// Logging seam of the notifier module: every Kafka client in it reports
// through a LogSink the caller supplies.
#pragma once

#include <functional>
#include <string_view>

namespace lockfleet::notifier {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

// Where log lines go. May be called from any thread, including librdkafka's
// own, so it must be thread-safe. Default (an empty sink): one line per call
// on stderr, debug lines left out.
using LogSink = std::function<void(LogLevel level, std::string_view message)>;

}  // namespace lockfleet::notifier
