#include "option_range.h"

#include <string>

#include "command.h"

namespace lockfleet::cli {

void CheckRange(const char* flag, long long value, long long low,
                long long high) {
  if (value < low || value > high) {
    throw UsageError(std::string(flag) + " " + std::to_string(value) +
                     ": must be " + std::to_string(low) + ".." +
                     std::to_string(high));
  }
}

}  // namespace lockfleet::cli
