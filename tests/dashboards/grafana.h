// Reading the Grafana dashboards of dashboards/ for tests: their variables,
// panels and queries, and Grafana's variable interpolation, so a test can run
// every panel's query against a real Prometheus.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockfleet::testing {

struct GrafanaTarget {
  std::string ref_id;
  std::string expr;
  std::string datasource_uid;  // the target's datasource.uid; "" if none
};

struct GrafanaPanel {
  int id = 0;
  std::string type;  // "timeseries", "stat", "heatmap", "row", ...
  std::string title;
  std::string description;
  std::string datasource_uid;  // "" if none (rows)
  std::vector<GrafanaTarget> targets;
};

struct GrafanaVariable {
  std::string name;
  std::string type;   // "datasource", "query", ...
  std::string query;  // type query: the query; type datasource: the plugin
  std::string datasource_uid;
  bool include_all = false;
  std::string all_value;  // "" when Grafana builds it from the values
};

struct GrafanaDashboard {
  std::string file;  // base name, e.g. "lockfleet-locks.json"
  std::string uid;
  std::string title;
  std::vector<GrafanaVariable> variables;
  // Every panel, rows included, with the panels of collapsed rows after
  // their row: in layout order.
  std::vector<GrafanaPanel> panels;
};

// Every *.json file in `dir`, by file name. Throws std::runtime_error naming
// the file when one is not valid JSON or not a dashboard.
std::vector<GrafanaDashboard> LoadDashboards(const std::string& dir);

// Grafana's interpolation of $name, ${name} and ${name:format} (the format
// is ignored): each replaced by values.at(name). A name not in `values` is
// left as written and appended to *unknown.
std::string Interpolate(std::string_view text,
                        const std::map<std::string, std::string>& values,
                        std::vector<std::string>* unknown);

// Values of Grafana's built-in variables for queries run as instant queries
// by a test whose Prometheus scrapes every second: $__rate_interval and
// $__interval cover the last minute of activity, $__range the test's run.
std::map<std::string, std::string> BuiltinVariables();

// A variable query label_values(label) or label_values(selector, label).
struct LabelValuesQuery {
  std::string selector;  // "" for label_values(label)
  std::string label;
};
std::optional<LabelValuesQuery> ParseLabelValues(std::string_view query);

}  // namespace lockfleet::testing
