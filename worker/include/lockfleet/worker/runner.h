// JobRunner: runs one job, or one occurrence of a schedule, to its end.
//
// A Kafka job (Run):
//   1. acquire the job's lock (waiting up to `lock_wait`; cancellable) — with
//      a lock_mode, the read-write lock of that name in that mode instead
//      (read jobs on one lock then run side by side, a write job alone);
//   2. if the job's done marker exists, it already ran: kDuplicate;
//   3. with a `limit`, take its permits (Semaphore; waiting up to
//      `lock_wait` as well), after the lock — every job takes the two in
//      that order, so jobs never wait on each other in a cycle;
//   4. run the handler, then give the permits back; on an exception release
//      the lock, back off and go to 1, up to max_attempts in all;
//   5. set the done marker (it lives dedup_ttl), release the lock.
// The handler's stop token fires on shutdown or when the job's lease (or its
// permit set) is lost (handler.h, "Stopping"); a run whose permits were lost
// is handled as one whose lease was. A run whose lease was lost is reported as
// kLeaseLost and, unless its done marker written through the fence is
// accepted (handler.h, "The fencing rule"), is not marked done: the job goes
// back to 1 (a redelivery in this process, costing no attempt; a record not
// marked done would hold up its partition's commits), so Run itself never
// returns kLeaseLost.
// Jobs that fail for good, time out on their lock or are malformed are
// recorded on the dead-letter list "<prefix>:jobs:dead" (newest first, the
// last 10000 kept) with the reason, so no job silently disappears. Each entry
// is "<reason>\t<worker id>\t<record>"; a record (or reason) over 64 KiB is
// cut there, with its full length noted, so a flood of huge bad records
// cannot fill Redis.
//
// A scheduled occurrence (RunOccurrence) — "the nightly report runs once":
// every worker of the fleet calls it for the same occurrence time. It only
// *tries* the schedule's lock (and its limit's permits), so no worker thread
// sits waiting while another worker runs a long job. The one that gets the lock
// checks the schedule's marker (the last occurrence done) in a fenced script
// that also claims the schedule's resource for its grant
// (FencedResource::Claim: from then on a stale runner's late record is refused,
// and a grant found stale runs nothing and retries) and runs the handler only
// if this occurrence is newer; success or failure, it then records the
// occurrence in the marker and in a history list, fenced in one script (a stale
// holder cannot record it). The others get `retry_after` (the holder's
// remaining TTL) and try again then: if the runner crashed, its lock expires
// and a retry runs the occurrence; if it finished, the retry finds it done and
// reports kDuplicate. A runner whose lease is lost mid-run (the handler's
// token fires) records nothing, reports kLeaseLost and returns retry_after,
// like an occurrence held elsewhere. An occurrence thus runs at least once
// while any worker lives, and — unless its runner loses its lease mid-run
// and its handler does not stop — exactly once.
//
// Read-write holds (a lock_mode) go as a lease does, with these
// differences: each is taken under an owner token of its own (so two jobs of
// one thread never share a hold), its grant (token and that owner) is what
// the handler and the runner fence with; a read hold cannot fence, so a read
// job whose hold was lost is never recorded done but runs again; a read
// hold does not order the done-marker check, so a job delivered twice at
// once under lock_mode read may run twice; and a read-write hold is not
// recorded in the hold journal (it runs out its lease after a crash). A
// schedule takes only lock_mode write (its lock must make one worker run
// an occurrence); read is refused (kFailed, logged).
//
// Thread-safety: Run and RunOccurrence may be called from any number of
// threads concurrently.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

#include "lockfleet/config/config.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/redis_client.h"
#include "lockfleet/lockcore/semaphore.h"
#include "lockfleet/worker/handler.h"
#include "lockfleet/worker/hold_journal.h"
#include "lockfleet/worker/job.h"
#include "lockfleet/worker/observer.h"

namespace lockfleet::worker {

using SysMillis = std::chrono::sys_time<std::chrono::milliseconds>;

// "<hostname>:<pid>": the default name of a worker process.
std::string DefaultWorkerId();

struct RunnerOptions {
  std::string key_prefix = "lockfleet";  // as LockClientOptions::key_prefix
  // How long a job waits for its lock; std::nullopt: without limit (shutdown
  // still cancels the wait).
  std::optional<std::chrono::milliseconds> lock_wait;
  int max_attempts = 3;                          // >= 1
  std::chrono::milliseconds retry_backoff{200};  // doubled per attempt
  std::chrono::milliseconds dedup_ttl{std::chrono::hours(24 * 7)};
  std::map<std::string, Settings> handler_settings;  // worker.handlers
  std::string worker_id;  // recorded in schedule history. Default: host:pid
  std::shared_ptr<WorkerObserver> observer;  // Default: none
  // Records every grant the runner holds, for the next process on the same
  // state directory to give back after a crash. Default: none.
  std::shared_ptr<HoldJournal> journal;
  // Where the runner's log lines go (failures, dead letters, retries).
  // Default: none.
  std::function<void(config::LogLevel level, std::string_view message)> log;
};

struct OccurrenceResult {
  // The outcome here: kOk / kRejected / kFailed (ran here), kDuplicate (done
  // already), kCancelled; std::nullopt while another worker holds the lock,
  // or when this run lost its lease (reported as kLeaseLost, not recorded).
  std::optional<JobResult> result;
  // With result == nullopt: when to try again.
  std::chrono::milliseconds retry_after{0};
};

// The most limits JobRunner::SampleLimits reads per call.
inline constexpr size_t kMaxSampledLimits = 100;

class JobRunner {
 public:
  // Throws std::invalid_argument for bad options.
  JobRunner(std::shared_ptr<LockClient> locks,
            std::shared_ptr<RedisClient> redis,
            std::shared_ptr<const HandlerRegistry> handlers,
            RunnerOptions options);

  // Runs a job from the jobs topic (or any other source). Never throws.
  // Redis being unreachable, slow or busy costs no attempt: the runner waits
  // it out (backing off up to 5 s) for as long as it lasts. kCancelled when
  // `stop` ended it before it finished: the caller must hand the job back
  // (not mark it consumed). Once the handler has returned, the job is never
  // run again by this call: a failure to write its done marker or to
  // release the lock is only logged.
  JobResult Run(const Job& job, JobSource source, std::stop_token stop);

  // Records a job that could not even be parsed: counted as kFailed of type
  // "unknown" and dead-lettered with `reason`. Returns false only when
  // `stop` ended the wait for Redis before it was recorded (then hand the
  // record back). Never throws.
  bool RejectMalformed(std::string_view record, std::string_view reason,
                       std::stop_token stop);

  // One attempt at the occurrence of `schedule` due at `due`.
  OccurrenceResult RunOccurrence(const config::ScheduleConfig& schedule,
                                 SysMillis due, std::stop_token stop);

  // The dead-letter list keeps the newest kDeadLetterKeep entries; a reason
  // or record longer than kDeadLetterClipBytes is cut there and followed by
  // "... (N bytes in all)". The on-call tools (cli/jobs_dead_letters.h) read
  // the entries with these.
  static constexpr int kDeadLetterKeep = 10000;
  static constexpr size_t kDeadLetterClipBytes = 64 * 1024;

  // "<prefix>:jobs:dead": the dead-letter list.
  static std::string DeadLetterKey(std::string_view key_prefix);
  std::string DeadLetterKey() const {
    return DeadLetterKey(options_.key_prefix);
  }
  // The done marker of job `id` run under `lock`:
  // FencedResource::KeyOf(prefix, lock, {"job", id}), i.e.
  // "<prefix>:res:{<lock>}:job:<id>" with lock and id encoded, so no job's
  // lock or id can name another job's marker or another key of a resource.
  static std::string DoneKey(std::string_view key_prefix, std::string_view lock,
                             std::string_view id);
  std::string DoneKey(std::string_view lock, std::string_view id) const {
    return DoneKey(options_.key_prefix, lock, id);
  }
  // The history list of a schedule, KeyOf(prefix, lock, {"schedule", name,
  // "history"}): newest first, "<due ms> <worker> <result> <duration ms>"
  // per entry, the last 100 kept. Its marker is {"schedule", name}.
  std::string ScheduleHistoryKey(const config::ScheduleConfig& schedule) const;

  // How soon an occurrence whose limit was busy is tried again
  // (OccurrenceResult::retry_after).
  static constexpr std::chrono::milliseconds kLimitRetry{1000};

  const RunnerOptions& options() const { return options_; }
  RedisClient& redis() const { return *redis_; }

  // Reads every limit this runner has used (at most kMaxSampledLimits, in
  // name order) from Redis and reports each to the observer
  // (OnLimitSampled). A limit that is gone is reported unknown; after a
  // Redis failure, it and the limits after it are reported unknown and the
  // call returns (one timeout per call, not one per limit). Stops between
  // limits once `stop` is requested. Without an observer, does nothing.
  void SampleLimits(std::stop_token stop = {});

 private:
  // worker.handlers[handler], or no settings.
  const Settings& SettingsFor(std::string_view handler) const;
  void Report(JobSource source, std::string_view type, JobResult result,
              Clock::TimePoint started) noexcept;
  // False only if `stop` ended the wait for Redis first.
  bool DeadLetter(std::string_view record, std::string_view reason,
                  std::stop_token stop);
  // Runs `action` until it does not throw a transient Redis error, backing
  // off in between. False if `stop` came first; other errors propagate.
  bool RetryWhileRedisDown(const std::function<void()>& action,
                           std::string_view what, std::stop_token stop);
  bool Backoff(int attempt, std::stop_token stop);
  // Records `lease` in options_.journal (if any) until the Entry ends.
  HoldJournal::Entry Journal(std::string_view lock, const Lease& lease);
  // Takes `limit`'s permits: one try (`try_only`), or waiting up to
  // lock_wait (none: until `stop`). Sets the semaphore's permits to
  // limit.permits the first time this runner uses the name, whenever a job
  // names another number, and once more when the semaphore turns out to be
  // gone or set below `take` (then tries again, once).
  PermitResult TakeLimit(const config::LimitConfig& limit, std::stop_token stop,
                         bool try_only);
  // Gives `permits` back, if held; logs a failure, and that they were lost
  // while the handler ran (`what`: the job, for the log).
  void GiveBack(Permits& permits, const std::string& what);
  // What a run's handler stops on: shutdown, the lease's loss, and the
  // loss of the permits if it holds any.
  static std::stop_token PermitsToken(const Permits& permits) {
    return permits.held() ? permits.stop_token() : std::stop_token();
  }

  std::shared_ptr<LockClient> locks_;
  std::shared_ptr<RedisClient> redis_;
  std::shared_ptr<const HandlerRegistry> handlers_;
  RunnerOptions options_;
  std::mutex limits_mu_;
  // The permits this runner last set per limit name. limits_mu_.
  std::map<std::string, int> limits_set_;
};

}  // namespace lockfleet::worker
