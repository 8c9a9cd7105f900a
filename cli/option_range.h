// Checks of numeric and duration command-line options, shared by the
// subcommands that validate their options themselves (`lockfleet demo`,
// `lockfleet bench`, `lockfleet lock`, `lockfleet top`, `lockfleet jobs
// ...`).
#pragma once

#include <chrono>
#include <string>

namespace lockfleet::cli {

// Throws UsageError("FLAG VALUE: must be LOW..HIGH") unless
// low <= value <= high.
void CheckRange(const char* flag, long long value, long long low,
                long long high);

// `text` as a duration ("500ms", "2s", "1.5m"; config::ParseDuration);
// throws UsageError("FLAG: invalid duration ...") otherwise.
std::chrono::milliseconds ParseDurationOption(const std::string& flag,
                                              const std::string& text);

}  // namespace lockfleet::cli
