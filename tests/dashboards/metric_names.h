// Which metric names a PromQL expression reads, and which ones lockfleet
// documents: for the tests that every dashboard panel and alerting rule uses
// only series that exist.
#pragma once

#include <set>
#include <string>
#include <string_view>

namespace lockfleet::testing {

// The metric names `expr` selects: identifiers outside strings, label
// matchers ({...}), ranges ([...]) and grouping lists (by/without/on/
// ignoring/group_left/group_right (...)) that are neither functions (followed
// by '(') nor PromQL keywords or aggregation operators. `__name__` matchers
// are not understood. Grafana variables ($x, ${x}) must be substituted first;
// any left over are skipped.
std::set<std::string> MetricNames(std::string_view expr);

// The sample names docs/metrics.md documents: each family of its table
// (`lockfleet_...` in the first column), a histogram as its _bucket, _sum
// and _count series.
std::set<std::string> DocumentedSeries(std::string_view metrics_md);

}  // namespace lockfleet::testing
