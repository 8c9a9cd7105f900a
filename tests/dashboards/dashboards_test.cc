// The Grafana dashboards of dashboards/, statically: fixed uids, the
// datasource and job/instance variables, queries that use only documented
// metrics and defined variables, and a README line for every panel. No
// servers; fleet_test.cc runs the queries against a real Prometheus.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "dashboards/grafana.h"
#include "dashboards/metric_names.h"
#include "dashboards/repo_files.h"

namespace lockfleet::testing {
namespace {

constexpr char kDatasource[] = "${datasource}";

class DashboardsTest : public ::testing::Test {
 protected:
  static std::vector<GrafanaDashboard> Dashboards() {
    return LoadDashboards(SourcePath(kDashboardsDir));
  }

  // Every variable of `d` and every built-in, each with a placeholder value.
  static std::map<std::string, std::string> Variables(
      const GrafanaDashboard& d) {
    std::map<std::string, std::string> values = BuiltinVariables();
    for (const GrafanaVariable& v : d.variables) values[v.name] = ".+";
    return values;
  }
};

TEST_F(DashboardsTest, FixedUniqueUidsAndTitles) {
  const std::vector<GrafanaDashboard> dashboards = Dashboards();
  ASSERT_GE(dashboards.size(), 1u);
  std::set<std::string> uids;
  std::set<std::string> titles;
  for (const GrafanaDashboard& d : dashboards) {
    // Grafana allows 40 characters; keep to ones safe in URLs and files.
    EXPECT_TRUE(!d.uid.empty() && d.uid.size() <= 40 &&
                std::all_of(d.uid.begin(), d.uid.end(),
                            [](char c) {
                              return (c >= 'a' && c <= 'z') ||
                                     (c >= '0' && c <= '9') || c == '-';
                            }))
        << d.file << ": uid '" << d.uid << "'";
    EXPECT_EQ(d.file, d.uid + ".json") << "file named after its uid";
    EXPECT_TRUE(uids.insert(d.uid).second) << d.file << ": uid repeated";
    EXPECT_FALSE(d.title.empty()) << d.file;
    EXPECT_TRUE(titles.insert(d.title).second) << d.file << ": title repeated";
  }
}

TEST_F(DashboardsTest, DatasourceJobAndInstanceVariables) {
  for (const GrafanaDashboard& d : Dashboards()) {
    SCOPED_TRACE(d.file);
    std::map<std::string, GrafanaVariable> variables;
    for (const GrafanaVariable& v : d.variables) variables[v.name] = v;
    ASSERT_TRUE(variables.contains("datasource"));
    EXPECT_EQ(variables["datasource"].type, "datasource");
    EXPECT_EQ(variables["datasource"].query, "prometheus");
    for (const GrafanaVariable& v : d.variables) {
      if (v.type != "query") continue;
      SCOPED_TRACE(v.name);
      EXPECT_EQ(v.datasource_uid, kDatasource);
      EXPECT_TRUE(ParseLabelValues(v.query).has_value()) << v.query;
    }
    for (const char* name : {"job", "instance"}) {
      ASSERT_TRUE(variables.contains(name)) << name;
      EXPECT_EQ(variables[name].type, "query") << name;
    }
  }
}

TEST_F(DashboardsTest,
       PanelsUseTheDatasourceVariableAndFilterByJobAndInstance) {
  for (const GrafanaDashboard& d : Dashboards()) {
    std::set<int> ids;
    for (const GrafanaPanel& panel : d.panels) {
      SCOPED_TRACE(d.file + ": " + panel.title);
      EXPECT_TRUE(ids.insert(panel.id).second) << "panel id repeated";
      EXPECT_FALSE(panel.title.empty());
      if (panel.type == "row") continue;
      EXPECT_EQ(panel.datasource_uid, kDatasource);
      EXPECT_FALSE(panel.description.empty()) << "say what it answers";
      ASSERT_FALSE(panel.targets.empty());
      for (const GrafanaTarget& target : panel.targets) {
        EXPECT_EQ(target.datasource_uid, kDatasource) << target.ref_id;
        EXPECT_NE(target.expr.find("job=~\"$job\""), std::string::npos)
            << target.expr;
        EXPECT_NE(target.expr.find("instance=~\"$instance\""),
                  std::string::npos)
            << target.expr;
      }
    }
  }
}

TEST_F(DashboardsTest, QueriesUseDefinedVariablesAndDocumentedMetrics) {
  std::set<std::string> known = DocumentedSeries(ReadSource("docs/metrics.md"));
  known.insert("up");
  for (const GrafanaDashboard& d : Dashboards()) {
    const std::map<std::string, std::string> values = Variables(d);
    std::vector<std::string> queries;
    for (const GrafanaVariable& v : d.variables) {
      const auto label_values = ParseLabelValues(v.query);
      if (v.type == "query" && label_values) {
        queries.push_back(label_values->selector);
      }
    }
    for (const GrafanaPanel& panel : d.panels) {
      for (const GrafanaTarget& target : panel.targets) {
        queries.push_back(target.expr);
      }
    }
    for (const std::string& query : queries) {
      SCOPED_TRACE(d.file + ": " + query);
      std::vector<std::string> unknown;
      const std::string expr = Interpolate(query, values, &unknown);
      EXPECT_TRUE(unknown.empty()) << "undefined variable $" << unknown[0];
      for (const std::string& metric : MetricNames(expr)) {
        EXPECT_TRUE(known.contains(metric))
            << metric << " is not in docs/metrics.md";
      }
    }
  }
}

TEST_F(DashboardsTest, ReadmeSaysWhatEveryPanelAnswers) {
  const std::string readme = ReadSource("dashboards/README.md");
  ASSERT_FALSE(readme.empty());
  for (const GrafanaDashboard& d : Dashboards()) {
    EXPECT_NE(readme.find(d.file), std::string::npos) << d.file;
    for (const GrafanaPanel& panel : d.panels) {
      if (panel.type == "row") continue;
      EXPECT_NE(readme.find("- **" + panel.title + "**: "), std::string::npos)
          << d.file << ": no README line for panel '" << panel.title << "'";
    }
  }
}

}  // namespace
}  // namespace lockfleet::testing
