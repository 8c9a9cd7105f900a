// Cron schedules: when a `cron:` schedule of the worker fires.
//
// Five fields separated by spaces, as in crontab(5):
//
//   minute  hour  day-of-month  month  day-of-week
//   0-59    0-23  1-31          1-12   0-7 (0 and 7 are Sunday)
//
// Each field is "*" or a comma-separated list of items: N, A-B, */S, A-B/S
// or N/S (N up to the maximum, every S). Months may be named jan..dec and
// weekdays sun..sat (any case). A range may not wrap ("fri-mon" is
// rejected). Macros: @yearly (@annually), @monthly, @weekly, @daily
// (@midnight), @hourly. Not supported: "?", L, W, #, seconds, @reboot.
//
// Day matching follows Vixie cron: when both day-of-month and day-of-week are
// restricted (neither starts with '*'), a day matches if EITHER does
// ("0 0 1 * mon" fires on the 1st and on every Monday); otherwise both must.
//
// Times are UTC: "0 3 * * *" fires at 03:00 UTC (no time zones, so no
// skipped or repeated hours).
//
// Thread-safety: an immutable value; const methods may be called
// concurrently.
#pragma once

#include <bitset>
#include <chrono>
#include <string>
#include <string_view>

#include "lockfleet/config/error.h"

namespace lockfleet::config {

class CronSchedule {
 public:
  // Parses `text` per the grammar above. Throws ConfigError saying what was
  // expected and what was found, including for an expression that can never
  // fire ("0 0 30 feb *").
  static CronSchedule Parse(std::string_view text);

  // The first whole minute strictly after `after` that matches, in UTC.
  std::chrono::sys_seconds Next(std::chrono::sys_seconds after) const;

  // The expression as written (whitespace normalized to single spaces).
  const std::string& text() const { return text_; }

  // Same firing times (compares the fields, not the text).
  bool operator==(const CronSchedule& other) const;

 private:
  CronSchedule() = default;
  CronSchedule WithText(std::string text) const;
  bool DayMatches(std::chrono::year_month_day date) const;

  std::string text_;
  std::bitset<60> minutes_;
  std::bitset<24> hours_;
  std::bitset<32> days_;       // 1..31
  std::bitset<13> months_;     // 1..12
  std::bitset<7> weekdays_;    // 0..6, Sunday = 0
  bool days_star_ = true;      // day-of-month field starts with '*'
  bool weekdays_star_ = true;  // day-of-week field starts with '*'
};

}  // namespace lockfleet::config
