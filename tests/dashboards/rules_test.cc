// The alerting rules (deploy/prometheus/rules/lockfleet.rules.yaml): valid
// for promtool, passing their promtool unit tests, and each alert following
// the conventions and tested both firing and quiet. No servers.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "dashboards/metric_names.h"
#include "dashboards/repo_files.h"
#include "support/promtool.h"

namespace lockfleet::testing {
namespace {

// `promtool args...` exits 0 and reports SUCCESS.
void ExpectPromtoolSucceeds(const std::vector<std::string>& args) {
  ASSERT_TRUE(FindPromtool().has_value()) << kNoPromtool;
  const PromtoolResult result = RunPromtool(args);
  EXPECT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("SUCCESS"), std::string::npos) << result.output;
}

TEST(AlertRulesTest, PromtoolChecksTheRules) {
  ExpectPromtoolSucceeds({"check", "rules", SourcePath(kRulesFile)});
}

TEST(AlertRulesTest, PromtoolUnitTestsPass) {
  ExpectPromtoolSucceeds({"test", "rules", SourcePath(kRulesTestFile)});
}

TEST(AlertRulesTest, EveryAlertHasForSeverityAnnotationsAndKnownMetrics) {
  std::set<std::string> known = DocumentedSeries(ReadSource("docs/metrics.md"));
  known.insert("up");
  const YAML::Node file = YAML::LoadFile(SourcePath(kRulesFile));
  int alerts = 0;
  for (const YAML::Node& group : file["groups"]) {
    for (const YAML::Node& rule : group["rules"]) {
      ASSERT_TRUE(rule["alert"]) << "only alerting rules here";
      const std::string name = rule["alert"].as<std::string>();
      SCOPED_TRACE(name);
      ++alerts;
      EXPECT_TRUE(name.starts_with("Lockfleet"));
      EXPECT_TRUE(rule["for"]) << "every alert waits with for:";
      const std::string severity =
          rule["labels"]["severity"].as<std::string>("");
      EXPECT_TRUE(severity == "critical" || severity == "warning") << severity;
      for (const char* annotation : {"summary", "description", "runbook"}) {
        EXPECT_FALSE(
            rule["annotations"][annotation].as<std::string>("").empty())
            << annotation;
      }
      for (const std::string& metric :
           MetricNames(rule["expr"].as<std::string>())) {
        EXPECT_TRUE(known.contains(metric))
            << metric << " is not in docs/metrics.md";
      }
    }
  }
  EXPECT_GE(alerts, 10);
}

TEST(AlertRulesTest, EveryAlertIsTestedFiringAndQuiet) {
  std::set<std::string> rules;
  for (const YAML::Node& group :
       YAML::LoadFile(SourcePath(kRulesFile))["groups"]) {
    for (const YAML::Node& rule : group["rules"]) {
      rules.insert(rule["alert"].as<std::string>());
    }
  }
  std::map<std::string, bool> fires;  // alert -> some test expects it
  std::map<std::string, bool> quiet;  // alert -> some test expects nothing
  for (const YAML::Node& test :
       YAML::LoadFile(SourcePath(kRulesTestFile))["tests"]) {
    for (const YAML::Node& check : test["alert_rule_test"]) {
      const std::string alert = check["alertname"].as<std::string>();
      EXPECT_TRUE(rules.contains(alert)) << alert << " is tested, not defined";
      const bool expected =
          check["exp_alerts"] && check["exp_alerts"].size() > 0;
      (expected ? fires : quiet)[alert] = true;
    }
  }
  for (const std::string& alert : rules) {
    EXPECT_TRUE(fires[alert]) << alert << ": no test makes it fire";
    EXPECT_TRUE(quiet[alert]) << alert << ": no test shows it quiet";
  }
}

}  // namespace
}  // namespace lockfleet::testing
