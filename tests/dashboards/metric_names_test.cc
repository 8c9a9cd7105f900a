// The PromQL name tokenizer the dashboard and rule tests rely on.
#include "dashboards/metric_names.h"

#include <gtest/gtest.h>

namespace lockfleet::testing {
namespace {

using Names = std::set<std::string>;

TEST(MetricNamesTest, SkipsFunctionsGroupingLabelsAndRanges) {
  EXPECT_EQ(
      MetricNames("histogram_quantile(0.99, sum by (le, lock_class) "
                  "(rate(lockfleet_lock_wait_seconds_bucket{job=~\"a|b\", "
                  "x=\"}{\"}[5m])))"),
      Names{"lockfleet_lock_wait_seconds_bucket"});
}

TEST(MetricNamesTest, SkipsKeywordsAggregationsAndNumbers) {
  EXPECT_EQ(MetricNames("sum by (job) (up{job=~\"lockfleet.*\"}) == 0\n"
                        "and on (job) count by (job) (foo)\n"
                        "unless ignoring (instance) group_left (type) "
                        "bar offset 5m > 1e-3 or vector(Inf)"),
            (Names{"up", "foo", "bar"}));
}

TEST(MetricNamesTest, SubqueriesAndStringsWithIdentifiers) {
  EXPECT_EQ(MetricNames("deriv(sum by (job) (lag >= 0)[15m:1m]) > 0"),
            Names{"lag"});
  EXPECT_EQ(MetricNames("label_replace(x, \"dst\", \"$1 y\", 'src', "
                        "\"(.*)\") # z comment"),
            Names{"x"});
  EXPECT_EQ(MetricNames("rate(a[$__rate_interval]) / ${b}"), Names{"a"});
}

TEST(MetricNamesTest, DocumentedSeriesExpandHistograms) {
  const Names documented = DocumentedSeries(
      "| family | type | labels | fed by |\n"
      "|---|---|---|---|\n"
      "| `lockfleet_a_total` | counter | `x` | A |\n"
      "| `lockfleet_b_seconds` | histogram | | B |\n"
      "text `lockfleet_c` elsewhere\n");
  EXPECT_EQ(documented,
            (Names{"lockfleet_a_total", "lockfleet_b_seconds_bucket",
                   "lockfleet_b_seconds_sum", "lockfleet_b_seconds_count"}));
}

}  // namespace
}  // namespace lockfleet::testing
