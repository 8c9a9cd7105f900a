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
// UTC firings) from the moment the worker starts, and hands each due
// occurrence to the pool (JobRunner::RunOccurrence; retried while another
// worker holds the lock, until the next occurrence is due).
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

struct WorkerOptions {
  int threads = 4;                                // 1..1024
  std::chrono::milliseconds grace_period{20000};  // see Shutdown
  std::vector<config::ScheduleConfig> schedules;  // Default: none
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
  int running = 0;
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
