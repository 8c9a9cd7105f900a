// The model behind `lockfleet top`: observations in (the locks Redis holds
// now, the dead-letter count, each worker's /metrics scrape), a frame out
// (the hottest locks, fleet-wide rates over the last interval, per-worker
// rows), and the frame rendered as lines of text. No terminal, no network:
// top_command.cc collects and draws; the unit tests drive this directly.
//
// What Redis does not record, the model observes: how long a grant has been
// held (since the model first saw that owner + fencing token) and how long
// a lock's oldest waiter has waited (since it first saw that waiter's id in
// the queue). Both are lower bounds for what was there at the first
// observation, marked "+" when rendered.
//
// Rates are the increase of each counter between a worker's last two
// scrapes divided by the time between them, a counter that went down (the
// worker restarted) counting from 0, as Prometheus' rate() does; quantiles
// come from the increase of the histogram buckets over the same interval.
//
// Thread-safety: none; one thread owns a Model.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/metrics/scrape.h"

namespace lockfleet::cli::top {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct HeldLock {
  std::string name;
  LockInfo info;
};

struct WorkerScrape {
  std::string target;  // "HOST:PORT"
  bool ok = false;
  std::string error;  // when !ok
  std::vector<metrics::Sample> samples;
};

// One refresh's worth of facts.
struct Observation {
  Clock::time_point at;
  std::string redis_error;              // "" when Redis answered
  std::vector<HeldLock> locks;          // the locks held now
  bool locks_truncated = false;         // more than the scan limit exist
  std::optional<int64_t> dead_letters;  // LLEN of the dead-letter list
  std::vector<WorkerScrape> workers;
};

struct LockRow {
  std::string name;
  std::string owner;
  int64_t holds = 0;
  milliseconds ttl{0};
  int64_t fence = 0;
  bool pending = false;  // handed to a waiter that has not claimed it yet
  size_t waiters = 0;
  milliseconds held{0};      // since this grant was first seen
  bool held_before = false;  // the grant was there at the first observation
  milliseconds waited{0};    // the oldest waiter, since first seen; 0: none
  bool waited_before = false;
};

// Per lock class and kind (the metrics' lock_class and kind labels), over
// the last interval.
struct ClassRow {
  std::string lock_class;
  std::string kind;  // lock, rwlock_read, rwlock_write, semaphore, latch ...
  double acquisitions_per_s = 0;
  double wait_p50_s = 0;  // NaN when nothing was acquired in the interval
  double wait_p99_s = 0;
  double hold_p99_s = 0;
};

struct WorkerRow {
  std::string target;
  bool up = false;
  std::string error;
  double jobs_per_s = 0;    // every result
  double failed_per_s = 0;  // results failed and timeout
  double running = 0;       // lockfleet_jobs_running
  double lag = -1;          // lockfleet_jobs_consumer_lag; -1 unknown
  double partitions = 0;    // lockfleet_jobs_consumer_partitions
  double acquisitions_per_s = 0;
};

// Fleet-wide, over the last interval (zero until two observations).
struct Totals {
  double acquisitions_per_s = 0;
  double contended_share = 0;  // contended attempts / attempts; NaN: none
  std::map<std::string, double> wakeups_per_s;  // by cause
  double event_delay_p50_s = 0;  // NaN when no event was consumed
  double event_delay_p99_s = 0;
  double jobs_per_s = 0;
  double failed_per_s = 0;
  double running = 0;  // with Frame::metrics_up only
  // lockfleet_lock_waiters; without metrics, the queues Redis shows.
  double waiters = 0;
};

enum class SortKey { kWaiters, kWait, kHeld, kName };
// "waiters", "wait", "held", "name".
const char* SortKeyName(SortKey key);
// The next key in that order (cycling).
SortKey NextSortKey(SortKey key);
// From its name; std::nullopt for any other text.
std::optional<SortKey> ParseSortKey(const std::string& name);

struct ViewOptions {
  SortKey sort = SortKey::kWaiters;
  // Lock names shown: a Redis glob (redis_glob.h) when it has * ? or [ and
  // is well-formed, else a substring; "" all.
  std::string filter;
  bool paused = false;
};

struct Frame {
  bool have_rates = false;  // two observations of some worker
  bool metrics_up = false;  // some worker answered its last scrape
  double interval_s = 0;
  std::string redis_error;
  size_t locks_held = 0;  // before the filter
  bool locks_truncated = false;
  std::optional<int64_t> dead_letters;
  std::optional<double> dead_letters_per_s;  // after two looks
  Totals totals;
  std::vector<LockRow> locks;      // filtered, sorted
  std::vector<ClassRow> classes;   // most acquisitions first
  std::vector<WorkerRow> workers;  // in target order
};

// Whether `name` passes `filter` (see ViewOptions::filter).
bool MatchesFilter(const std::string& name, const std::string& filter);

// Per series (name and labels) of `after`: its increase since `before`;
// the whole value when it went down (a restart) or is new.
std::vector<metrics::Sample> Increase(
    const std::vector<metrics::Sample>& before,
    const std::vector<metrics::Sample>& after);

class Model {
 public:
  void Observe(Observation observation);
  Frame View(const ViewOptions& view) const;

 private:
  struct Seen {
    Clock::time_point since;
    bool before;  // at the first observation
  };
  // Puts `key` into `next` with its entry in `seen`, or as seen first now.
  void SeenSince(const std::map<std::string, Seen>& seen,
                 const std::string& key,
                 std::map<std::string, Seen>& next) const;

  bool first_ = true;
  Observation last_;
  // Per target whose last two scrapes answered: the one before the last
  // (last_.workers has the last), and when.
  std::map<std::string, std::pair<Clock::time_point, WorkerScrape>> previous_;
  std::optional<std::pair<Clock::time_point, int64_t>> previous_dead_;
  std::map<std::string, Seen> grants_;   // by GrantKey (top_model.cc)
  std::map<std::string, Seen> waiters_;  // waiter id
};

// What the screen shows: a line of text and whether it is a heading.
struct Line {
  std::string text;
  bool heading = false;
};

struct RenderContext {
  std::string source;       // where Redis and the targets came from
  std::string clock;        // "HH:MM:SS" of the frame
  int width = 80;           // columns; lines are cut to it
  int height = 24;          // rows; lock rows are cut to fit, the rest stays
  bool interactive = true;  // the key help line at the bottom
};

std::vector<Line> Render(const Frame& frame, const ViewOptions& view,
                         const RenderContext& context);

}  // namespace lockfleet::cli::top
