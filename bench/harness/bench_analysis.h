// The analysis behind `lockfleet bench`: from the critical sections every
// contender recorded (wall-clock acquire and release times) to violations,
// hand-off gaps and fairness. Pure functions on plain data, no I/O, so the
// checks can be tested on synthetic records.
//
// Definitions (per lock name; sections sorted by acquire time):
// - a *violation* is a section that starts before an earlier-starting section
//   of the same lock has ended (acquire < the latest release so far). A
//   section whose holder already knew its lease was lost (Lease::lost() at
//   release) cannot break mutual exclusion by the lock's contract: overlaps
//   involving one are counted apart, as `lost_lease_overlaps`.
// - a *hand-off* is a pair of consecutive sections; its gap is
//   next acquire - previous release. It goes back to the releaser (same
//   contender), to another thread of the same process, or to another
//   process. Overlapping pairs have no gap.
// - Jain's index over per-contender acquisition counts x_i:
//   (sum x_i)^2 / (n * sum x_i^2); 1 = perfectly even, 1/n = one took all.
//
// Thread-safety: free functions, no shared state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace lockfleet::cli {

// One critical section as a contender recorded it. The recorded interval
// lies inside the real hold (acquire is taken after the grant returned,
// release before the release command is sent), so overlapping records mean
// overlapping holds.
struct Section {
  int64_t acquire_ns = 0;  // CLOCK_REALTIME
  int64_t release_ns = 0;
  int32_t process = 0;  // 0..P-1
  int32_t thread = 0;   // 0..T-1 within its process
  int32_t lock = 0;     // index of the lock name, 0..K-1
  bool waited = false;  // the first attempt failed (the acquirer waited)
  bool lost = false;    // the holder's lease was known lost at release
};

// Order statistics in microseconds; all 0 when count == 0.
struct Percentiles {
  size_t count = 0;
  double p50 = 0, p90 = 0, p99 = 0, max = 0;
};

// Nearest-rank percentiles of `values` (any order).
Percentiles Summarize(std::vector<double> values);

// Jain's fairness index of `counts`; 0 when every count is 0 or none given.
double JainIndex(const std::vector<double>& counts);

struct Analysis {
  uint64_t acquisitions = 0;
  uint64_t violations = 0;
  uint64_t lost_lease_overlaps = 0;
  uint64_t handoffs = 0;                // consecutive pairs on one lock
  uint64_t back_to_releaser = 0;        // ... held by the same contender
  Percentiles handoff_us;               // every non-overlapping hand-off
  Percentiles cross_process_us;         // to another process
  Percentiles same_process_us;          // to another thread of the same process
  Percentiles releaser_us;              // back to the same contender
  Percentiles parked_cross_process_us;  // to another process, acquirer waited
  std::vector<uint64_t> per_contender;  // index process * threads + thread
  double jain_index = 0;
  double releaser_reacquire_share = 0;  // back_to_releaser / handoffs
};

// Analyzes the merged records of `processes` x `threads` contenders (every
// contender counts for Jain's index, also one with no acquisition).
// REQUIRES: every section's process < processes and thread < threads.
Analysis Analyze(std::vector<Section> sections, int processes, int threads);

}  // namespace lockfleet::cli
