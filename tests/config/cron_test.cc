#include "lockfleet/config/cron.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace lockfleet::config {
namespace {

using std::chrono::days;
using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;
using std::chrono::sys_days;
using std::chrono::sys_seconds;
using namespace std::chrono_literals;

// 2024-03-15 is a Friday.
constexpr std::chrono::year_month_day kFriday{
    std::chrono::year(2024), std::chrono::March, std::chrono::day(15)};

sys_seconds At(std::chrono::year_month_day date, int hour, int minute,
               int second = 0) {
  return sys_days(date) + hours(hour) + minutes(minute) + seconds(second);
}

std::string CronParseError(std::string_view text) {
  try {
    CronSchedule::Parse(text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(CronTest, DailyAtThreeUtc) {
  const CronSchedule cron = CronSchedule::Parse("0 3 * * *");
  EXPECT_EQ(cron.Next(At(kFriday, 1, 0)), At(kFriday, 3, 0));
  EXPECT_EQ(cron.Next(At(kFriday, 3, 0)), At(kFriday, 3, 0) + days(1))
      << "strictly after";
  EXPECT_EQ(cron.Next(At(kFriday, 2, 59, 59)), At(kFriday, 3, 0));
}

TEST(CronTest, EveryMinuteIsTheNextWholeMinute) {
  const CronSchedule cron = CronSchedule::Parse("* * * * *");
  EXPECT_EQ(cron.Next(At(kFriday, 10, 0, 30)), At(kFriday, 10, 1));
}

TEST(CronTest, StepsRangesListsAndNames) {
  const CronSchedule cron = CronSchedule::Parse("*/15 9-17 * * MON-fri");
  EXPECT_EQ(cron.Next(At(kFriday, 17, 45)),
            At(sys_days(kFriday) + days(3), 9, 0))
      << "Friday 17:45 -> Monday 09:00";
  EXPECT_EQ(cron.Next(At(kFriday, 9, 1)), At(kFriday, 9, 15));
  const CronSchedule list = CronSchedule::Parse("5,10 0 1 jan,Jul *");
  EXPECT_EQ(list.Next(At(kFriday, 0, 0)),
            At(std::chrono::year(2024) / std::chrono::July / 1, 0, 5));
  EXPECT_EQ(CronSchedule::Parse("10/20 * * * *").Next(At(kFriday, 0, 31)),
            At(kFriday, 0, 50))
      << "N/S runs from N to the maximum";
}

TEST(CronTest, SundayIsZeroOrSeven) {
  EXPECT_EQ(CronSchedule::Parse("0 0 * * 0"), CronSchedule::Parse("0 0 * * 7"));
  EXPECT_EQ(CronSchedule::Parse("0 0 * * 7").Next(At(kFriday, 0, 0)),
            At(sys_days(kFriday) + days(2), 0, 0));
}

TEST(CronTest, DayOfMonthOrDayOfWeekWhenBothRestricted) {
  // Vixie cron: the 1st of the month OR any Monday.
  const CronSchedule cron = CronSchedule::Parse("0 0 1 * mon");
  EXPECT_EQ(cron.Next(At(kFriday, 0, 0)), At(sys_days(kFriday) + days(3), 0, 0))
      << "Monday the 18th";
  const auto april30 = std::chrono::year(2024) / std::chrono::April / 30;
  EXPECT_EQ(cron.Next(At(april30, 0, 0)),
            At(std::chrono::year(2024) / std::chrono::May / 1, 0, 0))
      << "Tuesday the 30th -> Wednesday the 1st, before Monday the 6th";
  // A '*' in day-of-week means only the day of the month counts.
  EXPECT_EQ(CronSchedule::Parse("0 0 13 * *").Next(At(kFriday, 0, 0)),
            At(std::chrono::year(2024) / std::chrono::April / 13, 0, 0));
}

TEST(CronTest, LeapDay) {
  const CronSchedule cron = CronSchedule::Parse("0 0 29 2 *");
  EXPECT_EQ(cron.Next(At(kFriday, 0, 0)),
            At(std::chrono::year(2028) / std::chrono::February / 29, 0, 0));
}

TEST(CronTest, Macros) {
  EXPECT_EQ(CronSchedule::Parse("@daily"), CronSchedule::Parse("0 0 * * *"));
  EXPECT_EQ(CronSchedule::Parse("@hourly"), CronSchedule::Parse("0 * * * *"));
  EXPECT_EQ(CronSchedule::Parse("@weekly"), CronSchedule::Parse("0 0 * * 0"));
  EXPECT_EQ(CronSchedule::Parse("@monthly"), CronSchedule::Parse("0 0 1 * *"));
  EXPECT_EQ(CronSchedule::Parse("@yearly"), CronSchedule::Parse("@annually"));
  EXPECT_EQ(CronSchedule::Parse("@daily").text(), "@daily");
}

TEST(CronTest, NormalizesSpaces) {
  EXPECT_EQ(CronSchedule::Parse("  0   3 * *\t* ").text(), "0 3 * * *");
}

TEST(CronTest, RejectsWrongFieldCount) {
  EXPECT_EQ(CronParseError("0 3 * *"),
            "invalid cron expression '0 3 * *': expected 5 fields (minute "
            "hour day-of-month month day-of-week) or a macro such as @daily, "
            "found 4 fields");
  EXPECT_NE(CronParseError("").find("found 0 fields"), std::string::npos);
  EXPECT_NE(CronParseError("0 0 0 * * *").find("found 6 fields"),
            std::string::npos);
}

TEST(CronTest, RejectsOutOfRangeAndGarbage) {
  EXPECT_NE(CronParseError("60 * * * *")
                .find("minute field '60': expected 0-59, found '60'"),
            std::string::npos);
  EXPECT_NE(CronParseError("0 24 * * *").find("hour field"), std::string::npos);
  EXPECT_NE(CronParseError("0 0 0 * *").find("day-of-month field"),
            std::string::npos);
  EXPECT_NE(CronParseError("0 0 * 13 *").find("expected 1-12 or jan-dec"),
            std::string::npos);
  EXPECT_NE(CronParseError("0 0 * * 8").find("expected 0-7 or sun-sat"),
            std::string::npos);
  EXPECT_NE(CronParseError("0 0 * * fri-mon").find("do not wrap"),
            std::string::npos);
  EXPECT_NE(CronParseError("*/0 * * * *").find("expected a step from 1 to 59"),
            std::string::npos);
  EXPECT_NE(CronParseError("1,,2 * * * *").find("found an empty item"),
            std::string::npos);
  EXPECT_NE(CronParseError("? * * * *").find("found '?'"), std::string::npos);
  EXPECT_NE(CronParseError("@reboot").find("found '@reboot'"),
            std::string::npos);
}

TEST(CronTest, RejectsScheduleThatNeverFires) {
  EXPECT_NE(CronParseError("0 0 30 feb *").find("would never fire"),
            std::string::npos);
  EXPECT_NE(CronParseError("0 0 31 4,6,9,11 *").find("would never fire"),
            std::string::npos);
  // With a day-of-week as well, Mondays still fire.
  EXPECT_EQ(CronParseError("0 0 30 feb mon"), "<no error>");
}

}  // namespace
}  // namespace lockfleet::config
