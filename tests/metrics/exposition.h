// Test helpers: read one series out of a Metrics exposition.
#pragma once

#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "lockfleet/metrics/metrics.h"
#include "lockfleet/metrics/scrape.h"

namespace lockfleet::metrics::testing {

// The value of the sample `name` whose labels are exactly `labels`; NaN when
// there is none (so any EXPECT_EQ against a number fails).
inline double ValueIn(const std::vector<Sample>& samples, std::string_view name,
                      const LabelMatch& labels = {}) {
  for (const Sample& s : samples) {
    if (s.name == name && s.labels == labels) return s.value;
  }
  return std::nan("");
}

inline double Value(const Metrics& metrics, std::string_view name,
                    const LabelMatch& labels = {}) {
  return ValueIn(ParseExposition(metrics.Exposition()), name, labels);
}

// Whether any sample of `name` exists.
inline bool HasSeries(const Metrics& metrics, std::string_view name) {
  for (const Sample& s : ParseExposition(metrics.Exposition())) {
    if (s.name == name) return true;
  }
  return false;
}

}  // namespace lockfleet::metrics::testing
