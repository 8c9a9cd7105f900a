// Range checks of numeric command-line options, shared by the subcommands
// that validate their options themselves (`lockfleet demo`, `lockfleet
// bench`).
#pragma once

namespace lockfleet::cli {

// Throws UsageError("FLAG VALUE: must be LOW..HIGH") unless
// low <= value <= high.
void CheckRange(const char* flag, long long value, long long low,
                long long high);

}  // namespace lockfleet::cli
