#include "lockfleet/worker/runner.h"

#include <unistd.h>

#include <condition_variable>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/fenced_resource.h"

namespace lockfleet::worker {
namespace {

using config::LogLevel;
using std::chrono::duration_cast;
using std::chrono::milliseconds;

constexpr int kDeadLetterKeep = 10000;
constexpr int kHistoryKeep = 100;
constexpr std::string_view kUnknownType = "unknown";

// KEYS: marker, history. ARGV: due (ms since epoch), history entry, keep.
// Records an occurrence as done unless a newer one already is.
constexpr std::string_view kRecordOccurrence = R"lua(
local last = tonumber(redis.call('GET', KEYS[1]) or '-1')
if last >= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('LPUSH', KEYS[2], ARGV[2])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[3]) - 1)
return 1
)lua";

std::string Describe(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}

bool IsCancelled(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const JobCancelled&) {
    return true;
  } catch (const Error& e) {
    return e.code() == ErrorCode::kCancelled;
  } catch (...) {
    return false;
  }
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

std::string JobRunner::DeadLetterKey() const {
  return options_.key_prefix + ":jobs:dead";
}

std::string JobRunner::DoneKey(std::string_view lock,
                               std::string_view id) const {
  return FencedResource::KeyOf(options_.key_prefix, lock,
                               "job:" + std::string(id));
}

std::string JobRunner::ScheduleHistoryKey(
    const config::ScheduleConfig& schedule) const {
  return FencedResource::KeyOf(options_.key_prefix, schedule.lock,
                               "schedule:" + schedule.name + ":history");
}

void JobRunner::Report(JobSource source, std::string_view type,
                       JobResult result, Clock::TimePoint started) noexcept {
  if (options_.observer) {
    options_.observer->OnJob(source, type, result,
                             SteadyClock()->Now() - started);
  }
}

void JobRunner::DeadLetter(std::string_view record,
                           std::string_view reason) noexcept {
  if (options_.log) {
    options_.log(LogLevel::kError, "dead-lettered job (" + std::string(reason) +
                                       "): " + std::string(record));
  }
  try {
    const std::string entry = std::string(reason) + "\t" + options_.worker_id +
                              "\t" + std::string(record);
    redis_->Pipeline(
        {{"LPUSH", DeadLetterKey(), entry},
         {"LTRIM", DeadLetterKey(), "0", std::to_string(kDeadLetterKeep - 1)}});
  } catch (const std::exception& e) {
    if (options_.log) {
      options_.log(
          LogLevel::kError,
          std::string("could not record the dead letter: ") + e.what());
    }
  }
}

bool JobRunner::Backoff(int attempt, std::stop_token stop) {
  milliseconds delay = options_.retry_backoff;
  for (int i = 1; i < attempt && delay < std::chrono::seconds(30); ++i) {
    delay *= 2;
  }
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  cv.wait_for(lock, stop, delay, [] { return false; });
  return !stop.stop_requested();
}

void JobRunner::RejectMalformed(std::string_view record,
                                std::string_view reason) {
  DeadLetter(record, "malformed: " + std::string(reason));
  if (options_.observer) {
    options_.observer->OnJob(JobSource::kKafka, kUnknownType,
                             JobResult::kFailed, Clock::Duration::zero());
  }
}

JobResult JobRunner::Run(const Job& job, JobSource source,
                         std::stop_token stop) {
  const Clock::TimePoint started = SteadyClock()->Now();
  const HandlerSpec* spec = handlers_->Find(job.type);
  if (spec == nullptr) {
    DeadLetter(EncodeJob(job), "no handler for type '" + job.type + "'");
    Report(source, kUnknownType, JobResult::kFailed, started);
    return JobResult::kFailed;
  }
  static const Settings kNoSettings;
  const auto configured = options_.handler_settings.find(job.type);
  const Settings& settings = configured == options_.handler_settings.end()
                                 ? kNoSettings
                                 : configured->second;
  const std::string done_key = DoneKey(job.lock, job.id);
  const auto finish = [&](JobResult result) {
    Report(source, job.type, result, started);
    return result;
  };

  std::string last_error;
  for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
    if (attempt > 1 && !Backoff(attempt - 1, stop)) {
      return finish(JobResult::kCancelled);
    }
    try {
      AcquireOptions acquire{.stop = stop};
      Lease lease;
      if (options_.lock_wait) {
        AcquireResult got =
            locks_->AcquireFor(job.lock, *options_.lock_wait, acquire);
        if (got.status == AcquireStatus::kCancelled) {
          return finish(JobResult::kCancelled);
        }
        if (!got) {
          DeadLetter(EncodeJob(job),
                     "lock '" + job.lock + "' not acquired within " +
                         std::to_string(options_.lock_wait->count()) +
                         " ms (held by " + got.holder + ")");
          return finish(JobResult::kTimeout);
        }
        lease = std::move(got.lease);
      } else {
        lease = locks_->Acquire(job.lock, acquire);
      }
      const Reply done = redis_->Execute({"EXISTS", done_key});
      if (done.integer == 1) return finish(JobResult::kDuplicate);

      FencedResource resource(redis_, job.lock, options_.key_prefix);
      JobContext context{.job = job,
                         .source = source,
                         .lease = lease,
                         .resource = resource,
                         .redis = *redis_,
                         .settings = settings,
                         .done_key = done_key,
                         .dedup_ttl = options_.dedup_ttl,
                         .stop = stop};
      const JobResult result = spec->run(context);
      if (result != JobResult::kOk && result != JobResult::kRejected) {
        throw std::logic_error(std::string("handler returned ") +
                               JobResultName(result) +
                               " (only ok or rejected are allowed)");
      }
      redis_->Execute({"SET", done_key, JobResultName(result), "PX",
                       std::to_string(options_.dedup_ttl.count())});
      lease.Release();
      return finish(result);
    } catch (...) {
      const std::exception_ptr error = std::current_exception();
      if (IsCancelled(error) || stop.stop_requested()) {
        return finish(JobResult::kCancelled);
      }
      last_error = Describe(error);
      if (options_.log) {
        options_.log(LogLevel::kWarning,
                     "job " + job.id + " (" + job.type + ") attempt " +
                         std::to_string(attempt) + "/" +
                         std::to_string(options_.max_attempts) +
                         " failed: " + last_error);
      }
    }
  }
  DeadLetter(EncodeJob(job), "failed " + std::to_string(options_.max_attempts) +
                                 " times; last: " + last_error);
  return finish(JobResult::kFailed);
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
  const int64_t due_ms = due.time_since_epoch().count();
  try {
    AcquireResult got =
        locks_->TryAcquire(schedule.lock, AcquireOptions{.stop = stop});
    if (!got) {
      out.retry_after = std::max(got.holder_ttl, milliseconds(50));
      return out;
    }
    Lease lease = std::move(got.lease);
    FencedResource resource(redis_, schedule.lock, options_.key_prefix);
    const std::string marker = resource.Key("schedule:" + schedule.name);
    const Reply last = redis_->Execute({"GET", marker});
    if (!last.is_nil() && std::stoll(last.str) >= due_ms) {
      return finish(JobResult::kDuplicate);
    }
    // The occurrence is this job's identity: one id per firing.
    const Job job{.id = schedule.name + "@" + std::to_string(due_ms),
                  .lock = schedule.lock,
                  .type = schedule.handler,
                  .payload = schedule.payload};
    static const Settings kNoSettings;
    const auto configured = options_.handler_settings.find(schedule.handler);
    const std::string done_key = DoneKey(job.lock, job.id);
    JobContext context{.job = job,
                       .source = JobSource::kSchedule,
                       .lease = lease,
                       .resource = resource,
                       .redis = *redis_,
                       .settings = configured == options_.handler_settings.end()
                                       ? kNoSettings
                                       : configured->second,
                       .done_key = done_key,
                       .dedup_ttl = options_.dedup_ttl,
                       .stop = stop};
    JobResult result = JobResult::kOk;
    std::string error;
    try {
      result = spec->run(context);
    } catch (...) {
      const std::exception_ptr thrown = std::current_exception();
      if (IsCancelled(thrown) || stop.stop_requested()) {
        return finish(JobResult::kCancelled);  // not recorded: retried
      }
      error = Describe(thrown);
      result = JobResult::kFailed;
      if (options_.log) {
        options_.log(LogLevel::kError, "schedule " + schedule.name + " at " +
                                           std::to_string(due_ms) +
                                           " failed: " + error);
      }
    }
    const auto took =
        duration_cast<milliseconds>(SteadyClock()->Now() - started);
    const std::string entry = std::to_string(due_ms) + " " +
                              options_.worker_id + " " + JobResultName(result) +
                              " " + std::to_string(took.count());
    const FenceResult recorded = resource.Eval(
        lease.fence(), kRecordOccurrence,
        {marker, ScheduleHistoryKey(schedule)},
        {std::to_string(due_ms), entry, std::to_string(kHistoryKeep)});
    if (!recorded.accepted && options_.log) {
      options_.log(LogLevel::kWarning,
                   "schedule " + schedule.name + " at " +
                       std::to_string(due_ms) +
                       ": lease lost while running; not recorded (a newer "
                       "holder may run it again)");
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
