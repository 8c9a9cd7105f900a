#include "lockfleet/config/duration.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace lockfleet::config {
namespace {

using std::chrono::milliseconds;

// The message of the ConfigError that ParseDuration(text) throws, or a note
// that it threw nothing.
std::string DurationParseError(std::string_view text) {
  try {
    ParseDuration(text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(ParseDurationTest, AcceptsEachUnit) {
  EXPECT_EQ(ParseDuration("500ms"), milliseconds(500));
  EXPECT_EQ(ParseDuration("2s"), milliseconds(2000));
  EXPECT_EQ(ParseDuration("1m"), milliseconds(60000));
  EXPECT_EQ(ParseDuration("1h"), milliseconds(3600000));
}

TEST(ParseDurationTest, AcceptsDecimals) {
  EXPECT_EQ(ParseDuration("1.5s"), milliseconds(1500));
  EXPECT_EQ(ParseDuration("0.25s"), milliseconds(250));
  EXPECT_EQ(ParseDuration("1.5m"), milliseconds(90000));
  EXPECT_EQ(ParseDuration("0.001s"), milliseconds(1));
  EXPECT_EQ(ParseDuration("1.000000000000s"), milliseconds(1000));
  EXPECT_EQ(ParseDuration("0.0000025h"), milliseconds(9));
}

TEST(ParseDurationTest, AcceptsZero) {
  EXPECT_EQ(ParseDuration("0"), milliseconds(0));
  EXPECT_EQ(ParseDuration("00"), milliseconds(0));
  EXPECT_EQ(ParseDuration("0ms"), milliseconds(0));
  EXPECT_EQ(ParseDuration("0s"), milliseconds(0));
  EXPECT_EQ(ParseDuration("0.0s"), milliseconds(0));
}

TEST(ParseDurationTest, AcceptsLeadingZeros) {
  EXPECT_EQ(ParseDuration("007s"), milliseconds(7000));
}

TEST(ParseDurationTest, AcceptsMaximum) {
  EXPECT_EQ(ParseDuration("876000h"), kMaxDuration);
  EXPECT_EQ(ParseDuration(std::to_string(kMaxDuration.count()) + "ms"),
            kMaxDuration);
}

TEST(ParseDurationTest, RejectsEmpty) {
  EXPECT_EQ(DurationParseError(""),
            "invalid duration '': expected a duration such as 500ms, 2s, "
            "1.5s, 1m or 1h (units ms, s, m, h), found an empty string");
}

TEST(ParseDurationTest, RejectsNegative) {
  EXPECT_NE(DurationParseError("-1s").find("found a negative value"),
            std::string::npos);
  EXPECT_NE(DurationParseError("-0").find("negative"), std::string::npos);
}

TEST(ParseDurationTest, RejectsMissingUnit) {
  EXPECT_EQ(DurationParseError("5"),
            "invalid duration '5': expected a duration such as 500ms, 2s, "
            "1.5s, 1m or 1h (units ms, s, m, h), found no unit after '5'");
  EXPECT_NE(DurationParseError("1.5").find("no unit after '1.5'"),
            std::string::npos);
  EXPECT_NE(DurationParseError("0.0").find("no unit"), std::string::npos);
}

TEST(ParseDurationTest, RejectsUnknownUnit) {
  EXPECT_EQ(DurationParseError("5parsecs"),
            "invalid duration '5parsecs': expected a duration such as 500ms, "
            "2s, 1.5s, 1m or 1h (units ms, s, m, h), found unknown unit "
            "'parsecs' after '5'");
  EXPECT_NE(DurationParseError("5S").find("unknown unit 'S'"),
            std::string::npos);
  EXPECT_NE(DurationParseError("5 s").find("unknown unit ' s'"),
            std::string::npos);
  EXPECT_NE(DurationParseError("5us").find("unknown unit 'us'"),
            std::string::npos);
  EXPECT_NE(DurationParseError("1m30s").find("unknown unit 'm30s'"),
            std::string::npos);
  EXPECT_NE(DurationParseError("5s ").find("unknown unit 's '"),
            std::string::npos);
}

TEST(ParseDurationTest, RejectsGarbage) {
  for (const char* text : {"abc", "s", ".5s", "+5s", " 5s", "ms"}) {
    EXPECT_NE(
        DurationParseError(text).find("which does not start with a digit"),
        std::string::npos)
        << text;
  }
  EXPECT_NE(DurationParseError("5.s").find("no digit after the decimal point"),
            std::string::npos);
  EXPECT_NE(DurationParseError("1.2.3s").find("unknown unit '.3s'"),
            std::string::npos);
}

TEST(ParseDurationTest, RejectsSubMillisecondPrecision) {
  for (const char* text :
       {"1.5ms", "0.0001s", "1.0005s", "0.0000001h", "0.0000000001s"}) {
    EXPECT_NE(
        DurationParseError(text).find("not a whole number of milliseconds"),
        std::string::npos)
        << text;
  }
}

TEST(ParseDurationTest, RejectsOverflow) {
  const std::string expected_tail =
      "expected at most 876000h, found a larger value";
  for (const std::string& text : std::vector<std::string>{
           "876000.001h", "876001h", "99999999999999999999999999999s",
           "9223372036854775807ms", "9223372036854775808ms",
           std::to_string(kMaxDuration.count() + 1) + "ms"}) {
    EXPECT_NE(DurationParseError(text).find(expected_tail), std::string::npos)
        << text << ": " << DurationParseError(text);
  }
}

TEST(ParseDurationTest, QuotesUnprintableAndLongInput) {
  EXPECT_NE(DurationParseError("5\x01").find("'5\\x01'"), std::string::npos);
  const std::string long_text(100, 'x');
  const std::string message = DurationParseError(long_text);
  EXPECT_NE(message.find(std::string(40, 'x') + "...'"), std::string::npos);
  EXPECT_LT(message.size(), 250u);
}

TEST(ParseDurationTest, ErrorIsARuntimeError) {
  EXPECT_THROW(ParseDuration("nope"), std::runtime_error);
}

TEST(FormatDurationTest, PicksTheLargestExactUnit) {
  EXPECT_EQ(FormatDuration(milliseconds(0)), "0");
  EXPECT_EQ(FormatDuration(milliseconds(1)), "1ms");
  EXPECT_EQ(FormatDuration(milliseconds(250)), "250ms");
  EXPECT_EQ(FormatDuration(milliseconds(999)), "999ms");
  EXPECT_EQ(FormatDuration(milliseconds(1000)), "1s");
  EXPECT_EQ(FormatDuration(milliseconds(1500)), "1.5s");
  EXPECT_EQ(FormatDuration(milliseconds(1234)), "1.234s");
  EXPECT_EQ(FormatDuration(milliseconds(61001)), "61.001s");
  EXPECT_EQ(FormatDuration(milliseconds(60000)), "1m");
  EXPECT_EQ(FormatDuration(milliseconds(90000)), "1.5m");
  EXPECT_EQ(FormatDuration(milliseconds(120000)), "2m");
  EXPECT_EQ(FormatDuration(milliseconds(3600000)), "1h");
  EXPECT_EQ(FormatDuration(milliseconds(5400000)), "1.5h");
  EXPECT_EQ(FormatDuration(milliseconds(3601000)), "3601s")
      << "60.01666...m is not exact, so seconds";
}

TEST(FormatDurationTest, Negative) {
  EXPECT_EQ(FormatDuration(milliseconds(-1500)), "-1.5s");
  EXPECT_EQ(FormatDuration(milliseconds::min()), "-9223372036854775.808s");
}

TEST(FormatDurationTest, RoundTrips) {
  for (int64_t ms :
       {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{999}, int64_t{1001},
        int64_t{59999}, int64_t{60001}, int64_t{3599999}, int64_t{3600001},
        int64_t{86400000}, int64_t{123456789}, kMaxDuration.count(),
        kMaxDuration.count() - 1}) {
    const milliseconds d(ms);
    EXPECT_EQ(ParseDuration(FormatDuration(d)), d) << FormatDuration(d);
  }
}

}  // namespace
}  // namespace lockfleet::config
