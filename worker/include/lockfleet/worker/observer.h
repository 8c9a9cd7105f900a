// WorkerObserver: the worker's hooks for metrics.
//
// The worker reports what happened to every job it took; the metrics module
// (lockfleet::metrics) implements this interface with Prometheus counters and
// histograms, and tests implement it to count. Every hook is noexcept and is
// called on whichever worker thread saw the event: implementations must be
// thread-safe, cheap and must not block.
#pragma once

#include <cstdint>
#include <string_view>

#include "lockfleet/lockcore/clock.h"

namespace lockfleet::worker {

// How a job ended. A bounded set: it labels the jobs metric.
enum class JobResult {
  kOk,         // the handler finished and did its work
  kRejected,   // the handler finished and refused by a business rule
               // (sold out): not retried
  kFailed,     // the handler threw on every attempt, or the job was malformed
  kDuplicate,  // already done (a redelivered job, a schedule occurrence that
               // another worker ran): skipped
  kCancelled,  // shutdown cancelled it before it finished: handed back
  kTimeout,    // its lock could not be acquired within locks.wait
  kLeaseLost,  // its lease was lost while it ran and it was not recorded
               // done (its fenced effect, if any, was not accepted): not
               // final, the job runs again under a new hold (a redelivery)
};

// "ok", "rejected", "failed", "duplicate", "cancelled", "timeout",
// "lease_lost".
const char* JobResultName(JobResult result) noexcept;

// Where a job came from.
enum class JobSource { kKafka, kSchedule };

// "kafka", "schedule".
const char* JobSourceName(JobSource source) noexcept;

class WorkerObserver {
 public:
  virtual ~WorkerObserver() = default;

  // A job ended with `result`, `duration` after this worker picked it up
  // (lock wait included). `type` is the handler's registered name, or
  // "unknown" for a job whose type no handler serves: a bounded label.
  virtual void OnJob(JobSource /*source*/, std::string_view /*type*/,
                     JobResult /*result*/,
                     Clock::Duration /*duration*/) noexcept {}

  // The number of jobs running in this process changed by `delta`.
  virtual void OnRunning(int /*delta*/) noexcept {}

  // Records waiting in the jobs topic beyond this consumer's position, summed
  // over its assigned partitions (-1: unknown). Reported about once a second.
  virtual void OnConsumerLag(int64_t /*lag*/) noexcept {}

  // Jobs-topic partitions assigned to this worker now; reported with the
  // lag. All workers' sum equals the topic's partitions once the group is
  // stable.
  virtual void OnConsumerPartitions(int /*partitions*/) noexcept {}

  // The jobs-topic consumer saw `errors` more consume / transport errors and
  // `commit_failures` more failed offset commits since the last report.
  virtual void OnConsumerErrors(uint64_t /*errors*/,
                                uint64_t /*commit_failures*/) noexcept {}
  // The limit (semaphore) `name`, as Redis had it when the worker last
  // sampled it: permits out (held, or handed to a waiter not yet claimed),
  // permits free, and queued waiters. Reported every few seconds for each
  // limit this worker has used.
  virtual void OnLimitSampled(std::string_view /*name*/, int64_t /*in_use*/,
                              int64_t /*available*/,
                              int64_t /*waiters*/) noexcept {}
  // The limit `name` could not be sampled (Redis failed) or no longer
  // exists: what was last reported of it is no longer known.
  virtual void OnLimitUnknown(std::string_view /*name*/) noexcept {}
};

}  // namespace lockfleet::worker
