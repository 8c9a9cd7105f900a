// Durations as people write them: "500ms", "2s", "1.5s", "1m", "1h", "0".
//
// Grammar: DIGITS [ "." DIGITS ] UNIT, where UNIT is one of
//   ms  milliseconds     s  seconds     m  minutes     h  hours
// Units are lowercase; no sign, no spaces, no compound forms ("1m30s").
// A bare "0" is the only value that may omit the unit. The value must be a
// whole number of milliseconds ("1.5ms" and "0.0001s" are rejected rather
// than rounded) and at most kMaxDuration, which leaves ample headroom for
// adding it to a steady-clock time point in nanoseconds.
//
// Thread-safety: the functions are pure and may be called concurrently.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "lockfleet/config/error.h"

namespace lockfleet::config {

// The largest duration ParseDuration accepts: 100 years ("876000h").
inline constexpr std::chrono::milliseconds kMaxDuration =
    std::chrono::hours(24 * 365 * 100);

// Parses `text` per the grammar above. Throws ConfigError saying what was
// expected and what was found for an empty string, a negative or malformed
// number, a missing or unknown unit, sub-millisecond precision, or a value
// above kMaxDuration.
std::chrono::milliseconds ParseDuration(std::string_view text);

// The shortest exact spelling of `duration` in the largest unit that keeps at
// most three decimals: 250ms -> "250ms", 1500ms -> "1.5s", 90000ms -> "1.5m",
// 7200000ms -> "2h", 0 -> "0", 61001ms -> "61.001s". For 0 <= duration <=
// kMaxDuration, ParseDuration(FormatDuration(d)) == d. A negative duration is
// formatted with a leading '-' (which ParseDuration rejects).
std::string FormatDuration(std::chrono::milliseconds duration);

}  // namespace lockfleet::config
