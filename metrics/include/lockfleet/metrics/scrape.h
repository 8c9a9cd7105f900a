// Reading scrapes: the Prometheus text format parsed into samples, and
// PromQL's histogram_quantile over the buckets found in them.
//
// Meant for tools (the CLI's demo summing its workers' scrapes), not for a
// monitoring pipeline:
//
//   std::vector<Sample> all;
//   for (auto& worker : workers) {
//     auto scrape = ParseExposition(HttpGet(...).body);
//     all.insert(all.end(), scrape.begin(), scrape.end());
//   }
//   double p99 = HistogramQuantile(
//       0.99, HistogramBuckets(all, "lockfleet_lock_wait_seconds"));
//
// Thread-safety: these are pure functions; call them from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockfleet::metrics {

struct Sample {
  std::string name;                           // e.g. "x_bucket"
  std::map<std::string, std::string> labels;  // unescaped values
  double value = 0;                           // may be +-Inf or NaN
  std::optional<int64_t> timestamp_ms;        // when the line carries one
};

// Parses the text exposition format (version 0.0.4): one sample per line,
// `name{label="value",...} value [timestamp]`. Comment lines (# HELP,
// # TYPE and any other '#' line) and blank lines are skipped; label values
// are unescaped (\\, \", \n); values may be +Inf, -Inf or NaN. Throws
// Error(kInvalidArgument) naming the line number for a malformed line or a
// label that appears twice in one sample.
std::vector<Sample> ParseExposition(std::string_view text);

// Label values a sample must have (other labels may be present too).
using LabelMatch = std::map<std::string, std::string>;

// The sum of the values of the samples called `name` whose labels include
// `match`; 0 when none does.
double SumSamples(const std::vector<Sample>& samples, std::string_view name,
                  const LabelMatch& match = {});

struct Bucket {
  double upper_bound = 0;  // the `le` label; +Inf for the last bucket
  double count = 0;        // cumulative: observations <= upper_bound
};

// The cumulative buckets of histogram `histogram` (its `<histogram>_bucket`
// samples whose labels include `match`), summed per upper bound across all
// other labels: across lock classes, and across processes when `samples`
// holds several scrapes. Sorted by upper bound. Samples with an `le` that is
// not a number are skipped.
std::vector<Bucket> HistogramBuckets(const std::vector<Sample>& samples,
                                     std::string_view histogram,
                                     const LabelMatch& match = {});

// The q-quantile (0 <= q <= 1) of the observations counted in cumulative
// `buckets`, estimated as PromQL's histogram_quantile does: find the bucket
// the rank q * count falls in and interpolate linearly inside it (the first
// bucket starts at 0 when its bound is positive). Counts that decrease are
// raised to keep them monotonic. Returns NaN when there is no +Inf bucket,
// fewer than two buckets, or no observations; -Inf for q < 0 and +Inf for
// q > 1; the highest finite bound when the rank falls in the +Inf bucket.
// `buckets` need not be sorted.
double HistogramQuantile(double q, std::vector<Bucket> buckets);

}  // namespace lockfleet::metrics
