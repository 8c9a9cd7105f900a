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
  bool write = false;   // --primitive rwlock: a write (else a read)
  // Redis round trips of the acquire call (the process's client counter
  // around it; exact with one thread per process), capped at 255.
  int32_t acquire_trips = 0;
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

// The primitives `lockfleet bench --primitive` measures.
enum class Primitive {
  kLock,       // one lock name per section (Analyze)
  kRwLock,     // read-write lock: reads may overlap reads, nothing a write
  kSemaphore,  // at most `permits` sections at any instant (1 permit each)
  kMultiLock,  // every section takes all K names: recorded on lock 0, no
               // two sections overlap (Analyze)
};

// The interval checkers, per lock name (sections of different locks never
// conflict). Each counts *violating sections*: a section that starts while
// the sections it may not coexist with already hold more than allowed.
// Overlaps in which the conflicting holder or the starter knew its lease was
// lost at release count apart (lost_overlaps), as in Analyze.
struct CheckResult {
  uint64_t violations = 0;
  uint64_t lost_overlaps = 0;
};
// A write that starts while any section is held, or a read that starts
// while a write is held. Equal times do not overlap (release <= acquire).
CheckResult CheckRwLock(std::vector<Section> sections);
// A section that starts while `permits` sections are already held.
CheckResult CheckSemaphore(std::vector<Section> sections, int64_t permits);

// Mean and percentiles of acquire-call round trips over a class of
// acquisitions.
struct TripStats {
  uint64_t count = 0;
  double mean = 0;
  double p50 = 0, p99 = 0, max = 0;
};
TripStats SummarizeTrips(const std::vector<double>& trips);

struct SharedAnalysis {
  Analysis base;  // acquisitions, violations, per-contender, Jain, hand-offs
  uint64_t reads = 0, writes = 0;  // rwlock
  // Hand-off gap of a waited acquisition: its acquire - the latest release
  // of another section of the same name before it (the release that let it
  // in, or the last one before its grant), in us; all / reads / writes.
  Percentiles waited_handoff_us, waited_read_handoff_us,
      waited_write_handoff_us;
  // Acquire-call round trips: every acquisition; those that did not wait;
  // those that waited; rwlock reads that started while another read was held
  // and no write ("a reader joining readers"); writes.
  TripStats trips_all, trips_unwaited, trips_waited, trips_read_joining,
      trips_write;
  // Most sections seen held at once (per name, the maximum).
  uint64_t max_concurrent = 0;
};

// The analysis of --primitive rwlock and semaphore (lock and multilock use
// Analyze for their hand-offs; multilock also this, for its round trips,
// checked as a semaphore of 1 permit): violations by CheckRwLock /
// CheckSemaphore, the waited hand-off gaps in base.handoff_us (and the
// classes above), round trips, fairness.
SharedAnalysis AnalyzeShared(std::vector<Section> sections, int processes,
                             int threads, Primitive primitive, int64_t permits);

}  // namespace lockfleet::cli
