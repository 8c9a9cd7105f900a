// Worker: one process's share of the fleet — a pool of threads running jobs
// from the jobs topic and from the configured schedules.
//
//   auto runner = std::make_shared<JobRunner>(locks, redis, handlers, {...});
//   Worker worker(runner, {.threads = 4, .schedules = ...},
//                 std::make_unique<notifier::JobConsumer>(...));
//   worker.Start();
//   ... on SIGTERM:
//   worker.Shutdown();   // graceful; returns when everything has stopped
//
// Jobs topic. One poll thread takes records while a pool thread is free (it
// pauses the consumer otherwise, staying in the group), and marks a record
// consumed only after its job finished (done, duplicate, rejected, failed
// for good). Offsets are committed in order, so a crash redelivers every job
// that had not finished; the runner's done markers make the redelivery of a
// job that had finished a no-op.
//
// Schedules. One scheduler thread computes each schedule's occurrences (for
// `every`: multiples of the interval since the Unix epoch; for `cron`: its
// UTC firings) from the moment the worker starts, reading the wall clock
// WorkerOptions::wall_clock, and hands each due occurrence to the pool
// (JobRunner::RunOccurrence; retried while another worker holds the lock,
// until the first occurrence still to come is due).
//
// Catch-up. When the scheduler finds an occurrence on time (it is the only
// one due and at most min(5 s, half the gap to the next) late), it runs it.
// When it finds a backlog instead — several due at once, or one later than
// that (the process was suspended or SIGSTOPped, the wall clock was stepped,
// the machine stalled) — it runs only the latest `catch_up` of them
// (ScheduleConfig::catch_up; oldest first) and skips the rest, counting them
// in WorkerStats::skipped and logging one warning line per backlog. Which
// occurrences run depends only on the schedule, catch_up and the time the
// backlog is seen, so workers that fell behind together pick the same ones,
// and each still runs at most once fleet-wide (RunOccurrence's marker: an
// occurrence older than one done is never run).
//
// Shutdown (Shutdown(), e.g. on SIGTERM): stop taking jobs; jobs queued but
// not started are handed back (not committed: redelivered to the group);
// running jobs get grace_period to finish, then their stop token is
// requested (a waiting acquisition or a cooperative handler ends, the job is
// handed back); then finished offsets are committed and the consumer leaves
// its group. Locks are released as each job ends.
//
// Thread-safety: all methods may be called from any thread; Shutdown is
// idempotent and concurrent calls all wait for the end.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lockfleet/config/config.h"
#include "lockfleet/notifier/job_topic.h"
#include "lockfleet/worker/runner.h"

namespace lockfleet::worker {

// The wall clock the scheduler reads: schedules are wall-clock (`every`
// counts from the Unix epoch, cron fires in UTC), so a steady Clock does not
// fit. A test substitutes one it can step.
//
// Thread-safety: implementations must be safe to call from any thread.
class WallClock {
 public:
  virtual ~WallClock() = default;
  virtual SysMillis Now() const = 0;
};

// std::chrono::system_clock. Never null; lives forever.
std::shared_ptr<WallClock> SystemWallClock();

struct WorkerOptions {
  int threads = 4;                                // 1..1024
  std::chrono::milliseconds grace_period{20000};  // see Shutdown
  std::vector<config::ScheduleConfig> schedules;  // Default: none
  // Read by the scheduler; it sleeps in real time for at most 1 s between
  // readings, so a stepped clock is noticed within about a second.
  // Default (null): SystemWallClock().
  std::shared_ptr<WallClock> wall_clock;
};

struct HealthReport {
  bool healthy = false;
  std::string detail;  // one line: what is wrong, or "ok"
};

// Counters since Start.
struct WorkerStats {
  uint64_t taken = 0;        // jobs handed to the pool (topic + schedules)
  uint64_t finished = 0;     // ... that ended (any result but kCancelled)
  uint64_t handed_back = 0;  // cancelled or never started at shutdown
  uint64_t skipped = 0;      // schedule occurrences skipped by catch-up
  int running = 0;
  // Schedule occurrences taken and not yet ended: queued, running or
  // waiting to try the lock again.
  int schedule_pending = 0;
  bool draining = false;
};

class Worker {
 public:
  // `jobs` may be null (no jobs topic: schedules only). Throws
  // std::invalid_argument for bad options.
  Worker(std::shared_ptr<JobRunner> runner, WorkerOptions options,
         std::unique_ptr<notifier::JobConsumer> jobs = nullptr);
  // Shutdown().
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Starts the threads. Call once.
  void Start();

  // Graceful shutdown as described above; returns when all threads ended.
  void Shutdown();

  // Healthy while running (not draining) and Redis answers a PING.
  HealthReport Health();

  WorkerStats stats() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lockfleet::worker
