#include "lockfleet/worker/runner.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "any_stop.h"
#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/fenced_resource.h"
#include "lockfleet/lockcore/rwlock.h"

namespace lockfleet::worker {
namespace {

using config::LogLevel;
using std::chrono::duration_cast;
using std::chrono::milliseconds;

// A bad record can be as large as Kafka lets it be (megabytes): a dead letter
// keeps its first JobRunner::kDeadLetterClipBytes (64 KiB), the log line its
// first 1 KiB, and both say how long it was. (10,000 dead letters of 2 MB
// each would be 20 GB of Redis.)
constexpr size_t kLoggedRecordBytes = 1024;
constexpr int kHistoryKeep = 100;
constexpr milliseconds kMaxBackoff{5000};
constexpr std::string_view kUnknownType = "unknown";

// `text`, or its first `max` bytes and a note of its full length.
std::string Clip(std::string_view text, size_t max) {
  if (text.size() <= max) return std::string(text);
  return std::string(text.substr(0, max)) + "... (" +
         std::to_string(text.size()) + " bytes in all)";
}

// KEYS: marker, history. ARGV: due (ms since epoch), history entry, keep.
// Records a run of an occurrence: always in the history (a second run of one
// occurrence must show there), and in the marker unless it already holds
// this or a newer occurrence. Returns 1 if the marker advanced, else 0.
constexpr std::string_view kRecordOccurrence = R"lua(
redis.call('LPUSH', KEYS[2], ARGV[2])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[3]) - 1)
local last = tonumber(redis.call('GET', KEYS[1]) or '-1')
if last >= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
return 1
)lua";

// KEYS: marker. The last occurrence done, or nil.
constexpr std::string_view kReadMarker = "return redis.call('GET', KEYS[1])";

std::string Describe(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}

// Redis unreachable, slow or refusing for now: worth waiting out, and not
// the job's fault, so it costs no attempt.
bool IsTransientRedis(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    // Replicas that did not acknowledge a grant in time (the grant was
    // given back) are lagging or reconnecting: waited out too.
    return e.code() == ErrorCode::kRedisUnavailable ||
           e.code() == ErrorCode::kRedisTimeout ||
           e.code() == ErrorCode::kRedisBusy ||
           e.code() == ErrorCode::kRedisReplicas;
  } catch (...) {
    return false;
  }
}

// `reply`, or an Error when it is an error reply — never a value (an EXISTS
// answered with an error is not "not done"). Classified by ErrorReplyCode:
// a Redis that is loading, busy or reconfiguring, or a cluster master that
// failed its part of a pipeline, is waited out (IsTransientRedis); a
// refused permission or anything else fails the attempt.
Reply Answered(Reply reply, std::string_view what) {
  if (!reply.is_error()) return reply;
  throw Error(ErrorReplyCode(reply.str, ErrorCode::kRedisProtocol),
              std::string(what) + " answered an error: " + reply.str);
}

// Who holds the read-write lock `name` now, as one snapshot sees it —
// "writer 'OWNER'" or "2 readers ('A', 'B')" — and the longest lease left
// among them; {"", 0} when it is free or the snapshot failed (best effort:
// it only explains a wait).
std::pair<std::string, milliseconds> RwHolders(LockClient& locks,
                                               const std::string& name) {
  constexpr size_t kNamed = 3;  // owners named in the description
  try {
    const RwInfo info = locks.ReadWriteLock(name).Inspect(100);
    if (info.holders.empty()) return {"", milliseconds(0)};
    milliseconds ttl(0);
    for (const RwHolder& h : info.holders) ttl = std::max(ttl, h.ttl);
    std::string who;
    for (size_t i = 0; i < info.holders.size() && i < kNamed; ++i) {
      who += (i > 0 ? ", '" : "'") + info.holders[i].owner + "'";
    }
    if (info.holders.size() > kNamed) who += ", ...";
    if (info.write_locked()) return {"writer " + who, ttl};
    const size_t n = info.holders.size();
    return {
        std::to_string(n) + (n == 1 ? " reader (" : " readers (") + who + ")",
        ttl};
  } catch (const std::exception&) {
    return {"", milliseconds(0)};
  }
}

// A new owner token for one read-write hold of a job: "<client id>:job:<n>",
// unique to the hold, so a hold never re-enters another's (two jobs of one
// pool thread, a retry), and known, so its grant can fence. Its
// "<client id>:" prefix tells the client the hold is its own.
std::string NewRwOwner(const LockClient& locks) {
  static std::atomic<uint64_t> next{0};
  return locks.client_id() + ":job:" + std::to_string(++next);
}

// What a job runs under: the plain lock's lease, or (with a lock_mode) a
// hold of the read-write lock of that name. One hold at a time; movable.
class JobHold {
 public:
  JobHold() = default;
  explicit JobHold(Lease lease) : lease_(std::move(lease)) {}
  JobHold(RwLease rw, std::string owner)
      : rw_(std::move(rw)), owner_(std::move(owner)) {}

  // Held until released (lost or not).
  bool held() const noexcept { return lease_.held() || rw_.held(); }
  bool lost() const noexcept { return rw_.held() ? rw_.lost() : lease_.lost(); }
  // REQUIRES: held().
  std::stop_token stop_token() const {
    return rw_.held() ? rw_.stop_token() : lease_.stop_token();
  }
  const Lease& lease() const { return lease_; }
  const RwLease* rw_lease() const { return rw_.held() ? &rw_ : nullptr; }
  // Whether the grant may fence a write: not a read hold's (shared).
  bool fences() const { return !rw_.held() || rw_.mode() == RwMode::kWrite; }
  // REQUIRES: held(). The grant to fence with (see handler.h).
  FenceGrant grant() const {
    return rw_.held() ? FenceGrant{.fence = rw_.token(), .owner = owner_}
                      : FenceGrant::Of(lease_);
  }
  // REQUIRES: held(). "lease on lock 'X' (fence N)", "write hold on
  // read-write lock 'X' (token N)".
  std::string Describe(const std::string& lock) const {
    if (!rw_.held()) {
      return "lease on lock '" + lock + "' (fence " +
             std::to_string(lease_.fence()) + ")";
    }
    return std::string(RwModeName(rw_.mode())) + " hold on read-write lock '" +
           lock + "' (token " + std::to_string(rw_.token()) + ")";
  }
  // Gives it back (if held). Throws Error on a Redis failure (the hold then
  // ends with its lease).
  void Release() {
    if (rw_.held()) {
      rw_.Release();
    } else if (lease_.held()) {
      lease_.Release();
    }
  }

 private:
  Lease lease_;
  RwLease rw_;
  std::string owner_;  // rw_'s
};

// The result of acquiring a JobHold.
struct HoldResult {
  AcquireStatus status = AcquireStatus::kTimedOut;
  JobHold hold;  // held() iff status == kAcquired
  // When not acquired: who holds the lock ("OWNER", or "writer 'OWNER'",
  // "2 readers (...)"; "" if unknown) and its (longest) lease left.
  std::string holder;
  milliseconds holder_ttl{0};
};

// Acquires `lock` — the plain lock, or with `mode` the read-write lock in
// that mode: one try (`try_only`), or waiting up to `wait` (nullopt: until
// `stop`; kCancelled then). Throws what LockClient throws.
HoldResult AcquireHold(LockClient& locks, const std::string& lock,
                       std::optional<config::LockMode> mode,
                       std::stop_token stop, bool try_only,
                       std::optional<milliseconds> wait) {
  HoldResult out;
  if (!mode) {
    const AcquireOptions options{.stop = stop};
    AcquireResult got =
        try_only ? locks.TryAcquire(lock, options)
        : wait   ? locks.AcquireFor(lock, *wait, options)
                 : locks.AcquireUntil(lock, Clock::TimePoint::max(), options);
    out.status = got.status;
    if (got) {
      out.hold = JobHold(std::move(got.lease));
    } else {
      out.holder = got.holder;
      out.holder_ttl = got.holder_ttl;
    }
    return out;
  }
  const RwMode rw_mode =
      *mode == config::LockMode::kWrite ? RwMode::kWrite : RwMode::kRead;
  RwOptions options;
  options.owner = NewRwOwner(locks);
  options.stop = stop;
  ReadWriteLock rw = locks.ReadWriteLock(lock);
  RwResult got =
      try_only ? rw.TryAcquire(rw_mode, options)
      : wait   ? rw.AcquireFor(rw_mode, *wait, options)
               : rw.AcquireUntil(rw_mode, Clock::TimePoint::max(), options);
  out.status = got.status;
  if (got) {
    out.hold = JobHold(std::move(got.lease), std::move(options.owner));
  } else if (got.status != AcquireStatus::kCancelled) {
    std::tie(out.holder, out.holder_ttl) = RwHolders(locks, lock);
  }
  return out;
}

// "lock 'X'", or "the read lock of read-write lock 'X'".
std::string LockNoun(const std::string& lock,
                     std::optional<config::LockMode> mode) {
  if (!mode) return "lock '" + lock + "'";
  return std::string("the ") + config::LockModeName(*mode) +
         " lock of read-write lock '" + lock + "'";
}

}  // namespace

std::string DefaultWorkerId() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return std::string(host[0] != '\0' ? host : "localhost") + ":" +
         std::to_string(getpid());
}

JobRunner::JobRunner(std::shared_ptr<LockClient> locks,
                     std::shared_ptr<RedisClient> redis,
                     std::shared_ptr<const HandlerRegistry> handlers,
                     RunnerOptions options)
    : locks_(std::move(locks)),
      redis_(std::move(redis)),
      handlers_(std::move(handlers)),
      options_(std::move(options)) {
  if (!locks_ || !redis_ || !handlers_) {
    throw std::invalid_argument("JobRunner needs locks, redis and handlers");
  }
  if (options_.max_attempts < 1) {
    throw std::invalid_argument("max_attempts must be >= 1");
  }
  if (options_.dedup_ttl < std::chrono::seconds(1)) {
    throw std::invalid_argument("dedup_ttl must be >= 1s");
  }
  if (options_.worker_id.empty()) options_.worker_id = DefaultWorkerId();
}

std::string JobRunner::DeadLetterKey(std::string_view key_prefix) {
  return std::string(key_prefix) + ":jobs:dead";
}

std::string JobRunner::DoneKey(std::string_view key_prefix,
                               std::string_view lock, std::string_view id) {
  return FencedResource::KeyOf(key_prefix, lock, {"job", id});
}

std::string JobRunner::ScheduleHistoryKey(
    const config::ScheduleConfig& schedule) const {
  return FencedResource::KeyOf(options_.key_prefix, schedule.lock,
                               {"schedule", schedule.name, "history"});
}

void JobRunner::Report(JobSource source, std::string_view type,
                       JobResult result, Clock::TimePoint started) noexcept {
  if (options_.observer) {
    options_.observer->OnJob(source, type, result,
                             SteadyClock()->Now() - started);
  }
}

bool JobRunner::DeadLetter(std::string_view record, std::string_view reason,
                           std::stop_token stop) {
  if (options_.log) {
    options_.log(LogLevel::kError,
                 "dead-lettered job (" + Clip(reason, kLoggedRecordBytes) +
                     "): " + Clip(record, kLoggedRecordBytes));
  }
  const std::string entry = Clip(reason, kDeadLetterClipBytes) + "\t" +
                            options_.worker_id + "\t" +
                            Clip(record, kDeadLetterClipBytes);
  try {
    return RetryWhileRedisDown(
        [&] {
          for (Reply& r :
               redis_->Pipeline({{"LPUSH", DeadLetterKey(), entry},
                                 {"LTRIM", DeadLetterKey(), "0",
                                  std::to_string(kDeadLetterKeep - 1)}})) {
            Answered(std::move(r), "LPUSH/LTRIM of the dead letters");
          }
        },
        "recording a dead letter", stop);
  } catch (const std::exception& e) {
    // Not a passing outage (a wrong-type key, say): waiting will not help.
    // The log line above keeps the record.
    if (options_.log) {
      options_.log(LogLevel::kError, std::string("could not record the dead "
                                                 "letter: ") +
                                         e.what());
    }
    return true;
  }
}

bool JobRunner::RetryWhileRedisDown(const std::function<void()>& action,
                                    std::string_view what,
                                    std::stop_token stop) {
  for (int failures = 0;; ++failures) {
    try {
      action();
      return true;
    } catch (...) {
      const std::exception_ptr error = std::current_exception();
      if (!IsTransientRedis(error)) throw;
      if (options_.log && (failures < 3 || failures % 30 == 0)) {
        options_.log(LogLevel::kWarning,
                     std::string(what) + ": " + Describe(error) + "; retrying");
      }
    }
    if (!Backoff(std::min(failures + 1, 5), stop)) return false;
  }
}

HoldJournal::Entry JobRunner::Journal(std::string_view lock,
                                      const Lease& lease) {
  if (!options_.journal) return {};
  HoldJournal::Entry entry =
      options_.journal->Record(lock, lease.owner(), lease.fence());
  if (!entry && options_.log) {
    options_.log(LogLevel::kWarning,
                 "lock '" + std::string(lock) +
                     "' not recorded in worker.state_dir (write failed): "
                     "after a crash it runs out its lease");
  }
  return entry;
}

bool JobRunner::Backoff(int attempt, std::stop_token stop) {
  milliseconds delay = options_.retry_backoff;
  for (int i = 1; i < attempt && delay < kMaxBackoff; ++i) delay *= 2;
  delay = std::min(delay, kMaxBackoff);
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  cv.wait_for(lock, stop, delay, [] { return false; });
  return !stop.stop_requested();
}

bool JobRunner::RejectMalformed(std::string_view record,
                                std::string_view reason, std::stop_token stop) {
  if (!DeadLetter(record, "malformed: " + std::string(reason), stop)) {
    return false;
  }
  if (options_.observer) {
    options_.observer->OnJob(JobSource::kKafka, kUnknownType,
                             JobResult::kFailed, Clock::Duration::zero());
  }
  return true;
}

const Settings& JobRunner::SettingsFor(std::string_view handler) const {
  static const Settings kNone;
  const auto configured = options_.handler_settings.find(std::string(handler));
  return configured == options_.handler_settings.end() ? kNone
                                                       : configured->second;
}

void JobRunner::SampleLimits(std::stop_token stop) {
  const std::shared_ptr<WorkerObserver>& observer = options_.observer;
  if (!observer) return;
  try {
    std::vector<std::string> names;
    {
      std::lock_guard lock(limits_mu_);
      for (const auto& [name, permits] : limits_set_) {
        if (names.size() == kMaxSampledLimits) break;
        names.push_back(name);
      }
    }
    for (size_t i = 0; i < names.size() && !stop.stop_requested(); ++i) {
      try {
        const SemaphoreInfo info = locks_->Semaphore(names[i]).Inspect();
        if (info.exists) {
          observer->OnLimitSampled(names[i], info.used, info.available,
                                   info.waiters);
        } else {
          observer->OnLimitUnknown(names[i]);  // the next job sets it again
        }
      } catch (const Error&) {
        // Redis is down or slow: nothing is known of this limit or the
        // ones after it (one timeout per round, so that shutdown is not
        // held up; the readiness probe tells of the outage).
        for (; i < names.size(); ++i) observer->OnLimitUnknown(names[i]);
        return;
      }
    }
  } catch (const std::exception&) {  // bad_alloc: no samples this round
  }
}

PermitResult JobRunner::TakeLimit(const config::LimitConfig& limit,
                                  std::stop_token stop, bool try_only) {
  Semaphore semaphore = locks_->Semaphore(limit.name);
  // Sets the semaphore's permits to the limit's (idempotent: several
  // threads may do it at once) and remembers that it did, only once done.
  const auto set = [&] {
    semaphore.SetPermits(limit.permits);
    std::lock_guard lock(limits_mu_);
    limits_set_[limit.name] = limit.permits;
  };
  bool known = false;
  {
    std::lock_guard lock(limits_mu_);
    const auto it = limits_set_.find(limit.name);
    known = it != limits_set_.end() && it->second == limit.permits;
  }
  if (!known) set();
  const PermitOptions options{.stop = stop};
  const auto take = [&] {
    if (try_only) return semaphore.TryAcquire(limit.take, options);
    if (options_.lock_wait)
      return semaphore.AcquireFor(limit.take, *options_.lock_wait, options);
    return semaphore.AcquireUntil(limit.take, Clock::TimePoint::max(), options);
  };
  try {
    return take();
  } catch (const Error& e) {
    // The semaphore is gone (a Redis restart without persistence, a
    // failover, an operator) or was set below `take` elsewhere: set it
    // again, once.
    if (e.code() != ErrorCode::kInvalidArgument) throw;
    if (options_.log) {
      options_.log(LogLevel::kWarning,
                   "limit '" + limit.name + "': " + e.what() +
                       "; setting its permits to " +
                       std::to_string(limit.permits) + " again");
    }
    set();
    return take();
  }
}

void JobRunner::GiveBack(Permits& permits, const std::string& what) {
  if (!permits.held()) return;
  const bool lost = permits.lost();
  try {
    permits.Release();
  } catch (const std::exception& e) {  // they come back when the lease ends
    if (options_.log) {
      options_.log(LogLevel::kWarning,
                   what + ": giving its permits back failed: " + e.what());
    }
    return;
  }
  if (lost && options_.log) {
    options_.log(LogLevel::kWarning,
                 what +
                     ": its permits were lost while it ran (the limit "
                     "may have been exceeded meanwhile)");
  }
}

JobResult JobRunner::Run(const Job& job, JobSource source,
                         std::stop_token stop) {
  const Clock::TimePoint started = SteadyClock()->Now();
  const HandlerSpec* spec = handlers_->Find(job.type);
  if (spec == nullptr) {
    if (!DeadLetter(EncodeJob(job), "no handler for type '" + job.type + "'",
                    stop)) {
      return JobResult::kCancelled;
    }
    Report(source, kUnknownType, JobResult::kFailed, started);
    return JobResult::kFailed;
  }
  const Settings& settings = SettingsFor(job.type);
  const std::string done_key = DoneKey(job.lock, job.id);
  const auto finish = [&](JobResult result) {
    Report(source, job.type, result, started);
    return result;
  };
  const auto give_up = [&](JobResult result, const std::string& reason) {
    if (!DeadLetter(EncodeJob(job), reason, stop)) {
      return finish(JobResult::kCancelled);  // shutting down: handed back
    }
    return finish(result);
  };

  std::string last_error;
  int attempt = 0;        // handler failures so far
  int redis_outages = 0;  // transient Redis failures so far (cost no attempt)
  int leases_lost = 0;    // runs ended by a lost lease (cost no attempt)
  // A run whose lease was lost and that is not recorded done: counted as
  // lease_lost and run again from the top (acquire, done marker, handler),
  // as a redelivery would, without waiting for the group to redeliver it (a
  // record not marked done would hold up its partition's commits).
  const auto lease_lost = [&](const std::string& lost, std::string_view what) {
    ++leases_lost;
    Report(source, job.type, JobResult::kLeaseLost, started);
    if (options_.log) {
      options_.log(LogLevel::kWarning,
                   "job " + job.id + " (" + job.type + "): " + lost +
                       " lost while it ran; " + std::string(what) +
                       ": not marked done, running it again under a new "
                       "hold");
    }
  };
  const auto lease_of = [&](const JobHold& hold) {
    return hold.Describe(job.lock);
  };
  const auto permits_of = [&] {
    return "permits of limit '" + job.limit->name + "'";
  };
  while (attempt < options_.max_attempts) {
    if ((attempt > 0 || redis_outages > 0 || leases_lost > 0) &&
        !Backoff(std::min(attempt + redis_outages + leases_lost, 6), stop)) {
      return finish(JobResult::kCancelled);
    }
    HoldJournal::Entry journaled;  // declared first: ends after the lease
    JobHold lease;                 // the lock's lease, or a read-write hold
    Permits permits;               // after the lease: given back before it
    JobResult result = JobResult::kOk;
    try {
      HoldResult got = AcquireHold(*locks_, job.lock, job.lock_mode, stop,
                                   /*try_only=*/false, options_.lock_wait);
      if (got.status == AcquireStatus::kCancelled) {
        return finish(JobResult::kCancelled);
      }
      if (!got.hold.held()) {  // timed out (only a wait with a limit does)
        return give_up(
            JobResult::kTimeout,
            LockNoun(job.lock, job.lock_mode) + " not acquired within " +
                (options_.lock_wait
                     ? std::to_string(options_.lock_wait->count()) + " ms"
                     : std::string("its wait")) +
                " (held by " + (got.holder.empty() ? "?" : got.holder) + ")");
      }
      lease = std::move(got.hold);
      // A read-write hold is not journaled: lockcore gives back only a
      // plain lock's grant from another process (ForceUnlock); it runs out
      // its lease after a crash.
      if (!job.lock_mode) journaled = Journal(job.lock, lease.lease());
      if (Answered(redis_->Execute({"EXISTS", done_key}), "EXISTS done marker")
              .integer == 1) {
        return finish(JobResult::kDuplicate);
      }
      if (job.limit) {
        PermitResult got = TakeLimit(*job.limit, stop, /*try_only=*/false);
        if (got.status == AcquireStatus::kCancelled) {
          return finish(JobResult::kCancelled);
        }
        if (!got) {
          return give_up(JobResult::kTimeout,
                         "limit '" + job.limit->name + "' (" +
                             std::to_string(job.limit->take) + " of " +
                             std::to_string(job.limit->permits) +
                             " permits) not acquired within " +
                             std::to_string(options_.lock_wait->count()) +
                             " ms");
        }
        permits = std::move(got.permits);
        if (lease.lost()) {
          // Lost while it waited for the permits: the handler must not
          // start under a lost lease.
          GiveBack(permits, "job " + job.id);
          lease_lost(lease_of(lease), "while it waited for its limit");
          continue;
        }
      }
      FencedResource resource(redis_, job.lock, options_.key_prefix);
      // The handler's token: shutdown's, or the loss of the job's lease or
      // permits.
      const internal::AnyStop handler_stop(
          {stop, lease.stop_token(), PermitsToken(permits)});
      JobContext context{.job = job,
                         .source = source,
                         .lease = lease.lease(),
                         .resource = resource,
                         .redis = *redis_,
                         .settings = settings,
                         .done_key = done_key,
                         .dedup_ttl = options_.dedup_ttl,
                         .stop = handler_stop.token(),
                         .rw_lease = lease.rw_lease(),
                         .grant = lease.grant()};
      result = spec->run(context);
      if (result != JobResult::kOk && result != JobResult::kRejected &&
          result != JobResult::kDuplicate) {
        throw std::logic_error(std::string("handler returned ") +
                               JobResultName(result) +
                               " (only ok, rejected or duplicate are allowed)");
      }
      GiveBack(permits, "job " + job.id);
      // It finished, but its lease is gone: the done marker goes through
      // the fence, so the job counts as done only if no newer grant has
      // written to the resource since (its fenced effect, if any, then stands
      // unopposed). Refused: not done; run it again. A read hold cannot
      // fence (its token is shared): a writer may have run beside it, so it
      // is not done.
      if (result != JobResult::kDuplicate && lease.lost()) {
        if (!lease.fences()) {
          lease_lost(lease_of(lease),
                     "a read hold cannot fence its done marker");
          continue;
        }
        bool accepted = false;
        if (!RetryWhileRedisDown(
                [&] {
                  accepted =
                      resource
                          .Write(lease.grant(),
                                 {{"SET", done_key, JobResultName(result), "PX",
                                   std::to_string(options_.dedup_ttl.count())}})
                          .accepted;
                },
                "writing the done marker of job " + job.id, stop)) {
          return finish(JobResult::kCancelled);  // shutting down: handed back
        }
        if (!accepted) {
          lease_lost(lease_of(lease), "a newer grant wrote to its resource");
          continue;
        }
        try {
          lease.Release();
        } catch (const std::exception&) {  // lost anyway: nothing to free
        }
        return finish(result);
      }
    } catch (...) {
      const std::exception_ptr error = std::current_exception();
      // Only shutdown cancels: a handler's own JobCancelled without it is a
      // failure like any other (or its record would never be committed).
      if (stop.stop_requested()) return finish(JobResult::kCancelled);
      // A handler that stopped because its lease was lost (or failed once it
      // was: a refused fenced write, say) did not finish: not its fault, so
      // it costs no attempt.
      if (lease.held() && lease.lost()) {
        lease_lost(lease_of(lease),
                   "the handler stopped (" + Describe(error) + ")");
        continue;
      }
      if (permits.held() && permits.lost()) {
        lease_lost(permits_of(),
                   "the handler stopped (" + Describe(error) + ")");
        continue;
      }
      last_error = Describe(error);
      if (IsTransientRedis(error)) {
        ++redis_outages;
      } else {
        ++attempt;
      }
      if (options_.log) {
        options_.log(LogLevel::kWarning,
                     "job " + job.id + " (" + job.type + ") attempt " +
                         std::to_string(attempt) + "/" +
                         std::to_string(options_.max_attempts) +
                         " failed: " + last_error);
      }
      continue;
    }
    // The handler finished: it never runs again for this delivery, whatever
    // happens to the bookkeeping below.
    if (result != JobResult::kDuplicate) {
      try {
        if (!RetryWhileRedisDown(
                [&] {
                  Answered(redis_->Execute(
                               {"SET", done_key, JobResultName(result), "PX",
                                std::to_string(options_.dedup_ttl.count())}),
                           "SET done marker");
                },
                "writing the done marker of job " + job.id, stop) &&
            options_.log) {
          options_.log(LogLevel::kWarning,
                       "job " + job.id +
                           " finished but its done marker was not written "
                           "(shutting down): a redelivery would run it again");
        }
      } catch (const std::exception& e) {
        if (options_.log) {
          options_.log(
              LogLevel::kError,
              "job " + job.id + ": done marker not written: " + e.what());
        }
      }
    }
    try {
      lease.Release();
    } catch (const std::exception& e) {  // the lease runs out by itself
      if (options_.log) {
        options_.log(LogLevel::kWarning,
                     "job " + job.id + ": release failed: " + e.what());
      }
    }
    return finish(result);
  }
  return give_up(JobResult::kFailed, "failed " +
                                         std::to_string(options_.max_attempts) +
                                         " times; last: " + last_error);
}

OccurrenceResult JobRunner::RunOccurrence(
    const config::ScheduleConfig& schedule, SysMillis due,
    std::stop_token stop) {
  const Clock::TimePoint started = SteadyClock()->Now();
  OccurrenceResult out;
  const auto finish = [&](JobResult result) {
    Report(JobSource::kSchedule, schedule.handler, result, started);
    out.result = result;
    return out;
  };
  const HandlerSpec* spec = handlers_->Find(schedule.handler);
  if (spec == nullptr) {
    if (options_.log) {
      options_.log(LogLevel::kError, "schedule " + schedule.name +
                                         ": no handler '" + schedule.handler +
                                         "'");
    }
    Report(JobSource::kSchedule, kUnknownType, JobResult::kFailed, started);
    out.result = JobResult::kFailed;
    return out;
  }
  if (schedule.lock_mode == config::LockMode::kRead) {
    // The config refuses it: a read lock is shared, so every worker would
    // run the occurrence.
    if (options_.log) {
      options_.log(LogLevel::kError,
                   "schedule " + schedule.name +
                       ": lock_mode read cannot make one worker run an "
                       "occurrence (use write)");
    }
    return finish(JobResult::kFailed);
  }
  const int64_t due_ms = due.time_since_epoch().count();
  try {
    FencedResource resource(redis_, schedule.lock, options_.key_prefix);
    const std::string marker = resource.Key({"schedule", schedule.name});
    // The marker only ever grows, so reading it without the lock is enough
    // to skip an occurrence that is done (it is checked again under it).
    const auto done = [&] {
      const Reply last =
          Answered(redis_->Execute({"GET", marker}), "GET schedule marker");
      return !last.is_nil() && std::stoll(last.str) >= due_ms;
    };
    if (done()) return finish(JobResult::kDuplicate);
    // The plain lock, or (lock_mode: write) the read-write lock's write
    // lock: exclusive either way.
    HoldResult got = AcquireHold(*locks_, schedule.lock, schedule.lock_mode,
                                 stop, /*try_only=*/true, std::nullopt);
    if (!got.hold.held()) {
      // Held: running this occurrence now, or about to find it done.
      if (done()) return finish(JobResult::kDuplicate);
      out.retry_after = std::max(got.holder_ttl, milliseconds(50));
      return out;
    }
    HoldJournal::Entry journaled;  // declared first: ends after the lease
    if (!schedule.lock_mode) {
      journaled = Journal(schedule.lock, got.hold.lease());
    }
    JobHold lease = std::move(got.hold);
    const FenceGrant grant = lease.grant();
    // Checked again under the lock, in one script with a claim: from here on
    // a stale runner's late record (an older grant) is refused, and a grant
    // that is stale already — or repeats another grant's token after a
    // Redis rollback — runs nothing. No extra round trip: the check was due.
    const FenceResult claimed = resource.Eval(grant, kReadMarker, {marker}, {});
    if (!claimed.accepted) {
      if (options_.log) {
        options_.log(LogLevel::kWarning,
                     "schedule " + schedule.name + ": the lock's grant " +
                         std::to_string(grant.fence) +
                         " is stale (the resource has seen " +
                         std::to_string(claimed.highest_fence) +
                         "); trying again");
      }
      lease.Release();
      out.retry_after = milliseconds(1000);  // as after an error: no spin
      return out;
    }
    if (!claimed.reply.is_nil() && std::stoll(claimed.reply.str) >= due_ms) {
      return finish(JobResult::kDuplicate);
    }
    // A schedule only tries its limit, as it only tries its lock: no pool
    // thread waits while another worker's jobs hold the permits.
    Permits permits;
    if (schedule.limit) {
      PermitResult got = TakeLimit(*schedule.limit, stop, /*try_only=*/true);
      if (!got) {
        lease.Release();
        out.retry_after = kLimitRetry;  // the permits are busy: not a result
        return out;
      }
      permits = std::move(got.permits);
    }
    // The occurrence is this job's identity: one id per firing.
    const Job job{.id = schedule.name + "@" + std::to_string(due_ms),
                  .lock = schedule.lock,
                  .type = schedule.handler,
                  .payload = schedule.payload,
                  .limit = schedule.limit,
                  .lock_mode = schedule.lock_mode};
    const std::string done_key = DoneKey(job.lock, job.id);
    // A run whose lease was lost is not recorded (its record would be
    // refused anyway once a newer grant claimed the resource): counted as
    // lease_lost and tried again like an occurrence held elsewhere — the
    // retry finds it done by a newer holder, or runs it.
    const auto lease_lost = [&](std::string_view what) {
      if (options_.log) {
        const std::string lost =
            lease.lost() ? lease.Describe(schedule.lock)
                         : "permits of limit '" + schedule.limit->name + "'";
        options_.log(LogLevel::kWarning, "schedule " + schedule.name + " at " +
                                             std::to_string(due_ms) + ": " +
                                             lost + " lost while running; " +
                                             std::string(what) +
                                             ": not recorded, trying again");
      }
      Report(JobSource::kSchedule, schedule.handler, JobResult::kLeaseLost,
             started);
      out.retry_after = milliseconds(1000);  // as after an error: no spin
      return out;
    };
    // The handler's token: shutdown's, or the loss of the lease or permits.
    const internal::AnyStop handler_stop(
        {stop, lease.stop_token(), PermitsToken(permits)});
    JobContext context{.job = job,
                       .source = JobSource::kSchedule,
                       .lease = lease.lease(),
                       .resource = resource,
                       .redis = *redis_,
                       .settings = SettingsFor(schedule.handler),
                       .done_key = done_key,
                       .dedup_ttl = options_.dedup_ttl,
                       .stop = handler_stop.token(),
                       .rw_lease = lease.rw_lease(),
                       .grant = grant};
    JobResult result = JobResult::kOk;
    std::string error;
    try {
      result = spec->run(context);
    } catch (...) {
      const std::exception_ptr thrown = std::current_exception();
      if (stop.stop_requested()) {
        return finish(JobResult::kCancelled);  // not recorded: retried
      }
      if (lease.lost() || (permits.held() && permits.lost())) {
        return lease_lost("the handler stopped (" + Describe(thrown) + ")");
      }
      error = Describe(thrown);
      result = JobResult::kFailed;
      if (options_.log) {
        options_.log(LogLevel::kError, "schedule " + schedule.name + " at " +
                                           std::to_string(due_ms) +
                                           " failed: " + error);
      }
    }
    GiveBack(permits, "schedule " + schedule.name);
    const auto took =
        duration_cast<milliseconds>(SteadyClock()->Now() - started);
    const std::string entry = std::to_string(due_ms) + " " +
                              options_.worker_id + " " + JobResultName(result) +
                              " " + std::to_string(took.count());
    // The handler ran: record it, waiting out a Redis outage, so that no
    // other worker runs this occurrence again.
    FenceResult recorded;
    bool refused = false;  // by the fence: a newer grant claimed the resource
    if (!RetryWhileRedisDown(
            [&] {
              recorded = resource.Eval(grant, kRecordOccurrence,
                                       {marker, ScheduleHistoryKey(schedule)},
                                       {std::to_string(due_ms), entry,
                                        std::to_string(kHistoryKeep)});
              refused = !recorded.accepted;
            },
            "recording schedule " + schedule.name, stop)) {
      recorded.accepted = false;
    }
    if (refused) return lease_lost("its record was refused");
    if (!recorded.accepted && options_.log) {
      options_.log(LogLevel::kWarning,
                   "schedule " + schedule.name + " at " +
                       std::to_string(due_ms) +
                       ": shutting down before it was recorded (another "
                       "worker may run it again)");
    } else if (recorded.reply.integer == 0 && options_.log) {
      options_.log(LogLevel::kError, "schedule " + schedule.name + " at " +
                                         std::to_string(due_ms) +
                                         " ran twice (another run recorded "
                                         "it first)");
    }
    lease.Release();
    return finish(result);
  } catch (const std::exception& e) {
    if (stop.stop_requested()) return finish(JobResult::kCancelled);
    if (options_.log) {
      options_.log(LogLevel::kError, "schedule " + schedule.name + ": " +
                                         e.what() + "; retrying");
    }
    out.retry_after = milliseconds(1000);
    return out;
  }
}

}  // namespace lockfleet::worker
