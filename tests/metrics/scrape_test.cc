// Parsing the text format, and histogram_quantile over its buckets.
#include "lockfleet/metrics/scrape.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "lockfleet/lockcore/error.h"
#include "lockfleet/metrics/metrics.h"

namespace lockfleet::metrics::testing {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(ParseExposition, ReadsNameLabelsAndValue) {
  const auto s = ParseExposition("x_total{a=\"1\",b=\"two\"} 3.5\n");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].name, "x_total");
  EXPECT_EQ(s[0].labels, (LabelMatch{{"a", "1"}, {"b", "two"}}));
  EXPECT_EQ(s[0].value, 3.5);
  EXPECT_FALSE(s[0].timestamp_ms.has_value());
}

TEST(ParseExposition, SkipsCommentsAndBlankLines) {
  const auto s = ParseExposition(
      "# HELP up 1 when \"up\"\n# TYPE up gauge\n#other comment\n\n  \n"
      "up 1\r\n  up{job=\"b\"} 0");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].value, 1);
  EXPECT_EQ(s[1].labels.at("job"), "b");
}

TEST(ParseExposition, UnescapesLabelValues) {
  const auto s = ParseExposition(R"(x{v="a\\b\"c\nd"} 1)");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].labels.at("v"), "a\\b\"c\nd");
}

TEST(ParseExposition, ReadsInfinitiesNaNAndTimestamps) {
  const auto s = ParseExposition(
      "a{le=\"+Inf\"} +Inf\nb -Inf\nc NaN\nd Nan\ne 1e3 1700000000123\n");
  ASSERT_EQ(s.size(), 5u);
  EXPECT_EQ(s[0].value, kInf);
  EXPECT_EQ(s[1].value, -kInf);
  EXPECT_TRUE(std::isnan(s[2].value));
  EXPECT_TRUE(std::isnan(s[3].value));
  EXPECT_EQ(s[4].value, 1000);
  EXPECT_EQ(s[4].timestamp_ms, 1700000000123);
}

TEST(ParseExposition, AcceptsATrailingCommaAndBlanksInLabelSets) {
  const auto s = ParseExposition("x{ a = \"1\" , } 2");
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].labels.at("a"), "1");
}

TEST(ParseExposition, RejectsMalformedLinesNamingTheLine) {
  for (const char* bad : {
           "ok 1\nok 2\nmissing_value\n",
           "ok 1\nok 2\nx{a=\"1} 1\n",      // unterminated value
           "ok 1\nok 2\nx{a=\"\\t\"} 1\n",  // unknown escape
           "ok 1\nok 2\nx{a=\"1\",a=\"2\"} 1\n",
           "ok 1\nok 2\nx 1 2 3\n",
           "ok 1\nok 2\nx one\n",
           "ok 1\nok 2\n9x 1\n",
       }) {
    try {
      ParseExposition(bad);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos)
          << e.what();
    }
  }
}

TEST(ParseExposition, ReadsAMetricsExposition) {
  Metrics m;
  m.lock_observer()->OnWakeup("a:1", WakeCause::kLocal);
  const auto s = ParseExposition(m.Exposition());
  EXPECT_EQ(SumSamples(s, "lockfleet_lock_wakeups_total",
                       {{"lock_class", "a"}, {"cause", "local"}}),
            1);
}

TEST(SumSamples, AddsTheSamplesThatMatch) {
  const auto s = ParseExposition(
      "x{a=\"1\",b=\"p\"} 1\nx{a=\"1\",b=\"q\"} 2\nx{a=\"2\"} 4\ny 8\n");
  EXPECT_EQ(SumSamples(s, "x"), 7);
  EXPECT_EQ(SumSamples(s, "x", {{"a", "1"}}), 3);
  EXPECT_EQ(SumSamples(s, "z"), 0);
}

TEST(HistogramBuckets, SumsPerBoundAcrossLabelSetsAndScrapes) {
  auto s = ParseExposition(
      "h_bucket{c=\"a\",le=\"0.1\"} 1\nh_bucket{c=\"a\",le=\"+Inf\"} 2\n"
      "h_bucket{c=\"b\",le=\"0.1\"} 3\nh_bucket{c=\"b\",le=\"+Inf\"} 3\n"
      "h_count{c=\"a\"} 2\n");
  const auto second = ParseExposition("h_bucket{c=\"a\",le=\"0.1\"} 10\n");
  s.insert(s.end(), second.begin(), second.end());

  const auto all = HistogramBuckets(s, "h");
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].upper_bound, 0.1);
  EXPECT_EQ(all[0].count, 14);
  EXPECT_EQ(all[1].upper_bound, kInf);
  EXPECT_EQ(all[1].count, 5);

  const auto only_b = HistogramBuckets(s, "h", {{"c", "b"}});
  ASSERT_EQ(only_b.size(), 2u);
  EXPECT_EQ(only_b[0].count, 3);
}

TEST(HistogramQuantile, InterpolatesInsideTheBucketOfTheRank) {
  // rank 20 of 40 falls in (0.5, 1]: 10 below, 20 inside -> halfway.
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.5, {{0.5, 10}, {1, 30}, {kInf, 40}}),
                   0.75);
}

TEST(HistogramQuantile, TheFirstBucketStartsAtZero) {
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.5, {{2, 10}, {kInf, 10}}), 1);
}

TEST(HistogramQuantile, ARankInTheInfBucketGivesTheHighestFiniteBound) {
  EXPECT_EQ(HistogramQuantile(0.99, {{0.5, 10}, {1, 30}, {kInf, 40}}), 1);
}

TEST(HistogramQuantile, ANonPositiveFirstBoundIsReturnedAsIs) {
  EXPECT_EQ(HistogramQuantile(0.25, {{-1, 5}, {kInf, 10}}), -1);
}

TEST(HistogramQuantile, AcceptsUnsortedAndDecreasingCounts) {
  // Sorted: (0.5, 10), (1, 8 -> raised to 10), (2, 20), (+Inf, 20). Rank 12
  // falls in (1, 2]: 10 below (not 8), 10 inside.
  EXPECT_DOUBLE_EQ(
      HistogramQuantile(0.6, {{kInf, 20}, {2, 20}, {1, 8}, {0.5, 10}}), 1.2);
}

TEST(HistogramQuantile, OutOfRangeQuantilesAreInfinite) {
  EXPECT_EQ(HistogramQuantile(-0.1, {{1, 1}, {kInf, 1}}), -kInf);
  EXPECT_EQ(HistogramQuantile(1.1, {{1, 1}, {kInf, 1}}), kInf);
}

TEST(HistogramQuantile, IsNaNWithoutObservationsOrAnInfBucket) {
  EXPECT_TRUE(std::isnan(HistogramQuantile(0.5, {{1, 0}, {kInf, 0}})));
  EXPECT_TRUE(std::isnan(HistogramQuantile(0.5, {{1, 3}, {2, 4}})));
  EXPECT_TRUE(std::isnan(HistogramQuantile(0.5, {{kInf, 4}})));
  EXPECT_TRUE(std::isnan(HistogramQuantile(0.5, {})));
}

TEST(HistogramQuantile, WorksOnAScrapedHistogram) {
  Metrics m;
  auto observer = m.lock_observer();
  for (int i = 0; i < 99; ++i) {
    observer->OnAcquire("a", AcquireStatus::kAcquired,
                        std::chrono::microseconds(200), 1, false);
  }
  observer->OnAcquire("b", AcquireStatus::kAcquired, std::chrono::seconds(3), 1,
                      false);
  const auto buckets = HistogramBuckets(ParseExposition(m.Exposition()),
                                        "lockfleet_lock_wait_seconds");
  const double p50 = HistogramQuantile(0.5, buckets);
  EXPECT_GT(p50, 0.0001);
  EXPECT_LE(p50, 0.00025);
  const double p999 = HistogramQuantile(0.999, buckets);
  EXPECT_GT(p999, 2.5);
  EXPECT_LE(p999, 5);
}

}  // namespace
}  // namespace lockfleet::metrics::testing
