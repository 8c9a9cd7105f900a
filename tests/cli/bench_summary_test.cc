// `lockfleet bench --repeat`: SummarizeRuns on synthetic reports.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "bench_report.h"

namespace lockfleet::cli {
namespace {

using nlohmann::json;

json Report(double rate, double p50, uint64_t count, uint64_t violations) {
  return {{"acquisitions_per_second", rate},
          {"handoff_us", {{"p50", p50}, {"p99", p50 * 2}, {"count", count}}},
          {"redis_cpu_percent", nullptr},
          {"violations", violations},
          {"failed_processes", 0}};
}

TEST(BenchSummary, MedianMinAndMaxOfEachFigure) {
  const json s = SummarizeRuns(
      {Report(300, 10, 5, 0), Report(100, 30, 5, 0), Report(200, 20, 5, 0)});
  EXPECT_EQ(s.at("repeat").get<int>(), 3);
  const json& rate = s.at("summary").at("acquisitions_per_second");
  EXPECT_DOUBLE_EQ(rate.at("median").get<double>(), 200);
  EXPECT_DOUBLE_EQ(rate.at("min").get<double>(), 100);
  EXPECT_DOUBLE_EQ(rate.at("max").get<double>(), 300);
  EXPECT_DOUBLE_EQ(
      s.at("summary").at("handoff_us/p99").at("median").get<double>(), 40);
  // A figure no run has is left out, not reported as 0.
  EXPECT_FALSE(s.at("summary").contains("redis_cpu_percent"));
  EXPECT_EQ(s.at("runs").size(), 3u);
}

TEST(BenchSummary, AnEvenNumberOfRunsTakesTheMeanOfTheMiddleTwo) {
  const json s = SummarizeRuns({Report(100, 10, 5, 0), Report(400, 10, 5, 0),
                                Report(200, 10, 5, 0), Report(300, 10, 5, 0)});
  EXPECT_DOUBLE_EQ(
      s.at("summary").at("acquisitions_per_second").at("median").get<double>(),
      250);
}

TEST(BenchSummary, APercentileOfNoHandOffsIsNotAFigure) {
  const json s = SummarizeRuns({Report(100, 0, 0, 0), Report(200, 50, 9, 0)});
  const json& p50 = s.at("summary").at("handoff_us/p50");
  EXPECT_DOUBLE_EQ(p50.at("median").get<double>(), 50);
  EXPECT_EQ(p50.at("runs").get<int>(), 1);
}

TEST(BenchSummary, ARunWithoutAcquisitionsHasNoPerAcquisitionFigure) {
  json idle = Report(0, 0, 0, 0);
  idle["acquisitions"] = 0;
  idle["redis_calls_per_acquisition"] = 0.0;
  json busy = Report(100, 10, 5, 0);
  busy["acquisitions"] = 500;
  busy["redis_calls_per_acquisition"] = 3.0;
  const json s = SummarizeRuns({idle, busy});
  const json& trips = s.at("summary").at("redis_calls_per_acquisition");
  EXPECT_DOUBLE_EQ(trips.at("min").get<double>(), 3.0);
  EXPECT_EQ(trips.at("runs").get<int>(), 1);
}

TEST(BenchSummary, ViolationsAreSummedAcrossRuns) {
  const json s = SummarizeRuns(
      {Report(100, 10, 5, 0), Report(100, 10, 5, 2), Report(100, 10, 5, 1)});
  EXPECT_EQ(s.at("violations").get<uint64_t>(), 3u);
}

}  // namespace
}  // namespace lockfleet::cli
