#include "option_range.h"

#include <string>

#include "command.h"
#include "lockfleet/config/duration.h"
#include "lockfleet/config/error.h"

namespace lockfleet::cli {

void CheckRange(const char* flag, long long value, long long low,
                long long high) {
  if (value < low || value > high) {
    throw UsageError(std::string(flag) + " " + std::to_string(value) +
                     ": must be " + std::to_string(low) + ".." +
                     std::to_string(high));
  }
}

std::chrono::milliseconds ParseDurationOption(const std::string& flag,
                                              const std::string& text) {
  try {
    return config::ParseDuration(text);
  } catch (const config::ConfigError& e) {
    throw UsageError(flag + ": " + e.what());
  }
}

}  // namespace lockfleet::cli
