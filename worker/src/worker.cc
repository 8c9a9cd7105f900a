#include "lockfleet/worker/worker.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace lockfleet::worker {
namespace {

using std::chrono::milliseconds;
using std::chrono::system_clock;
using std::chrono::time_point_cast;

constexpr milliseconds kPollTimeout{100};
constexpr milliseconds kLagInterval{1000};
constexpr milliseconds kPauseAfter{1000};
// How often the limits this worker used are read from Redis for the
// permits gauges (one round trip per limit).
constexpr milliseconds kLimitSampleInterval{5000};
// The scheduler reads the wall clock at least this often: a stepped clock
// (or a fake one in a test) is noticed without waiting for a far deadline.
constexpr milliseconds kScheduleRecheck{1000};
// An occurrence seen at most this late (and at most half the gap to the next
// one) is on time; later, it is a backlog that catch_up coalesces.
constexpr milliseconds kOnTimeLimit{5000};

class SystemWall final : public WallClock {
 public:
  SysMillis Now() const override {
    return time_point_cast<milliseconds>(system_clock::now());
  }
};

// The first occurrence of `schedule` strictly after `after`.
SysMillis NextOccurrence(const config::ScheduleConfig& schedule,
                         SysMillis after) {
  if (schedule.every) {
    const int64_t every = schedule.every->count();
    const int64_t t = after.time_since_epoch().count();
    return SysMillis(milliseconds((t / every + 1) * every));
  }
  const auto seconds = std::chrono::floor<std::chrono::seconds>(after);
  return time_point_cast<milliseconds>(schedule.cron->Next(seconds));
}

// The occurrences of `schedule` due at `now`, from `first` (the first one
// not yet handled, <= now) on.
struct DueOccurrences {
  uint64_t count = 0;          // due: first .. the latest <= now
  std::vector<SysMillis> run;  // the ones to run, oldest first
  SysMillis following;         // the first occurrence after now
};

// Which of the due occurrences run: the only one, if it is on time; of a
// backlog, the latest `catch_up`. Depends only on the schedule, `first` and
// `now`, so workers that fell behind together agree.
DueOccurrences TakeDue(const config::ScheduleConfig& schedule, SysMillis first,
                       SysMillis now) {
  DueOccurrences out;
  const auto keep = static_cast<uint64_t>(std::max(schedule.catch_up, 0));
  if (schedule.every) {
    // Arithmetic: a long step must not enumerate millions of occurrences.
    const milliseconds every = *schedule.every;
    const SysMillis last = first + (now - first) / every * every;
    out.count = static_cast<uint64_t>((last - first) / every) + 1;
    const uint64_t runs = std::min(keep, out.count);
    for (uint64_t k = runs; k > 0; --k) {
      out.run.push_back(last - static_cast<int64_t>(k - 1) * every);
    }
    out.following = last + every;
  } else {
    std::deque<SysMillis> latest;
    SysMillis t = first;
    while (t <= now) {
      ++out.count;
      latest.push_back(t);
      if (latest.size() > keep) latest.pop_front();
      t = NextOccurrence(schedule, t);
    }
    out.run.assign(latest.begin(), latest.end());
    out.following = t;
  }
  const milliseconds tolerance =
      std::min(kOnTimeLimit, (out.following - first) / 2);
  if (out.count == 1 && now - first <= tolerance) out.run = {first};
  return out;
}

}  // namespace

std::shared_ptr<WallClock> SystemWallClock() {
  static const auto* clock = new std::shared_ptr<WallClock>(
      std::make_shared<SystemWall>());  // never destroyed: no exit order
  return *clock;
}

class Worker::Impl {
 public:
  Impl(std::shared_ptr<JobRunner> runner, WorkerOptions options,
       std::unique_ptr<notifier::JobConsumer> jobs)
      : runner_(std::move(runner)),
        options_(std::move(options)),
        wall_(options_.wall_clock ? options_.wall_clock : SystemWallClock()),
        consumer_(std::move(jobs)) {
    if (!runner_) throw std::invalid_argument("Worker needs a JobRunner");
    if (options_.threads < 1 || options_.threads > 1024) {
      throw std::invalid_argument("threads must be 1..1024");
    }
    if (options_.grace_period < milliseconds(0)) {
      throw std::invalid_argument("grace_period must be >= 0");
    }
    for (const config::ScheduleConfig& schedule : options_.schedules) {
      if (schedule.every.has_value() == schedule.cron.has_value()) {
        throw std::invalid_argument("schedule " + schedule.name +
                                    ": give exactly one of every and cron");
      }
      if (schedule.every && *schedule.every <= milliseconds(0)) {
        throw std::invalid_argument("schedule " + schedule.name +
                                    ": every must be > 0");
      }
      if (schedule.catch_up < 0) {
        throw std::invalid_argument("schedule " + schedule.name +
                                    ": catch_up must be >= 0");
      }
    }
  }

  void Start() {
    std::lock_guard lock(mu_);
    if (started_) throw std::logic_error("Worker::Start called twice");
    started_ = true;
    for (int i = 0; i < options_.threads; ++i) {
      pool_.emplace_back([this] { PoolLoop(); });
    }
    if (consumer_) poller_ = std::thread([this] { PollLoop(); });
    if (runner_->options().observer) {
      sampler_ = std::thread([this] { SampleLoop(); });
    }
    if (!options_.schedules.empty()) {
      // Read here, not in the thread: occurrences count from Start().
      const SysMillis start = wall_->Now();
      scheduler_ = std::thread([this, start] { ScheduleLoop(start); });
    }
  }

  void Shutdown() {
    std::unique_lock lock(mu_);
    if (!started_ || stopped_) return;
    if (draining_) {
      cv_.wait(lock, [this] { return stopped_; });
      return;
    }
    draining_ = true;
    sampling_.request_stop();  // a sample in progress stops at its next limit
    cv_.notify_all();
    const auto deadline =
        std::chrono::steady_clock::now() + options_.grace_period;
    if (!cv_.wait_until(lock, deadline, [this] { return running_ == 0; })) {
      cancel_.request_stop();  // grace is over: cancel what still runs
      cv_.wait(lock, [this] { return running_ == 0; });
    }
    stats_.handed_back += queue_.size();
    queue_.clear();
    lock.unlock();
    for (std::thread& thread : pool_) thread.join();
    if (poller_.joinable()) poller_.join();  // commits, leaves the group
    if (scheduler_.joinable()) scheduler_.join();
    if (sampler_.joinable()) sampler_.join();
    lock.lock();
    stopped_ = true;
    cv_.notify_all();
  }

  HealthReport Health() {
    {
      std::lock_guard lock(mu_);
      if (!started_) return {false, "not started"};
      if (draining_) return {false, "draining (shutting down)"};
    }
    try {
      const Reply pong = runner_->redis().Execute({"PING"});
      if (pong.is_error()) return {false, "redis: " + pong.str};
    } catch (const std::exception& e) {
      return {false, std::string("redis: ") + e.what()};
    }
    return {true, "ok"};
  }

  WorkerStats stats() const {
    std::lock_guard lock(mu_);
    WorkerStats out = stats_;
    out.running = running_;
    out.schedule_pending = static_cast<int>(pending_.size());
    out.draining = draining_;
    return out;
  }

 private:
  struct Task {
    // A job from the topic, or an occurrence of schedule `schedule`.
    std::optional<notifier::JobRecord> record;
    Job job;
    size_t schedule = 0;
    SysMillis due;
  };
  struct Pending {
    size_t schedule;
    SysMillis due;
    // The first occurrence after the batch `due` came in (the next one, or
    // the one after a backlog): retries of `due` end just before it.
    SysMillis next_due;
    SysMillis try_at;
    bool in_flight = false;
    bool last_try = false;  // try_at was pulled in to just before next_due
  };

  void Observe(int delta) {
    if (const auto& observer = runner_->options().observer) {
      observer->OnRunning(delta);
    }
  }

  void PoolLoop() {
    std::unique_lock lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return draining_ || !queue_.empty(); });
      if (draining_) return;  // queued tasks are handed back by Shutdown
      Task task = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
      lock.unlock();
      Observe(+1);
      Execute(task);
      Observe(-1);
      lock.lock();
      --running_;
      cv_.notify_all();  // capacity for the poller; Shutdown's wait
    }
  }

  void Execute(Task& task) {
    if (task.record) {
      const JobResult result =
          runner_->Run(task.job, JobSource::kKafka, cancel_.get_token());
      std::lock_guard lock(mu_);
      if (result == JobResult::kCancelled) {
        ++stats_.handed_back;  // not marked: the group redelivers it
      } else {
        consumer_->MarkDone(*task.record);
        ++stats_.finished;
      }
      return;
    }
    const config::ScheduleConfig& schedule = options_.schedules[task.schedule];
    const OccurrenceResult result =
        runner_->RunOccurrence(schedule, task.due, cancel_.get_token());
    std::lock_guard lock(mu_);
    auto pending =
        std::find_if(pending_.begin(), pending_.end(), [&](const Pending& p) {
          return p.schedule == task.schedule && p.due == task.due;
        });
    if (result.result == JobResult::kCancelled) ++stats_.handed_back;
    if (result.result) {
      if (*result.result != JobResult::kCancelled) ++stats_.finished;
      if (pending != pending_.end()) pending_.erase(pending);
    } else if (pending != pending_.end()) {
      // Another worker holds the lock. Come back when its lease would have
      // run out (it may have crashed) — but no later than just before the
      // next occurrence: a runner that finished is then found done
      // (duplicate); one still running at that point overran the whole
      // interval, and this occurrence is given up (timeout).
      const SysMillis limit =
          pending->next_due -
          std::min(milliseconds(100), (pending->next_due - pending->due) / 10);
      if (pending->last_try) {
        if (const auto& observer = runner_->options().observer) {
          observer->OnJob(JobSource::kSchedule, schedule.handler,
                          JobResult::kTimeout, Clock::Duration::zero());
        }
        pending_.erase(pending);
      } else {
        pending->in_flight = false;
        pending->try_at = wall_->Now() + result.retry_after;
        if (pending->try_at >= limit) {
          pending->try_at = limit;
          pending->last_try = true;
        }
      }
    }
    cv_.notify_all();  // the scheduler re-arms
  }

  // Flow control. The local queue holds up to 4 jobs per thread. When it is
  // full the poll thread first just waits for room (short jobs free it in
  // milliseconds); only if it stays full for kPauseAfter does it pause the
  // consumer, so that Poll keeps serving the group (rebalances, the poll
  // interval) while long jobs run. Pausing is not the default because a
  // resume refetches from the broker, which on librdkafka 2.0 costs several
  // hundred milliseconds; with short jobs that capped the rate at ~16 jobs/s.
  // Returns whether the consumer should be paused; false with draining_.
  bool FlowControl(std::unique_lock<std::mutex>& lock, bool paused) {
    const size_t low = static_cast<size_t>(options_.threads);
    const size_t high = 4 * low;
    if (paused) return queue_.size() >= low;
    if (queue_.size() < high) return false;
    return !cv_.wait_for(lock, kPauseAfter,
                         [&] { return draining_ || queue_.size() < low; });
  }

  // Samples the limits for the metrics until draining.
  void SampleLoop() {
    std::unique_lock lock(mu_);
    while (!cv_.wait_for(lock, kLimitSampleInterval,
                         [this] { return draining_; })) {
      lock.unlock();
      runner_->SampleLimits(sampling_.get_token());
      lock.lock();
    }
  }

  void PollLoop() {
    auto next_lag = std::chrono::steady_clock::now();
    const auto& observer = runner_->options().observer;
    bool paused = false;
    notifier::JobConsumerStats reported;  // as of the last report
    while (true) {
      {
        std::unique_lock lock(mu_);
        if (draining_) break;
        paused = FlowControl(lock, paused);
        if (draining_) break;
      }
      consumer_->SetPaused(paused);
      std::optional<notifier::JobRecord> record = consumer_->Poll(kPollTimeout);
      if (observer && std::chrono::steady_clock::now() >= next_lag) {
        const notifier::JobConsumerStats stats = consumer_->stats();
        observer->OnConsumerLag(consumer_->Lag());
        observer->OnConsumerPartitions(stats.assigned_partitions);
        observer->OnConsumerErrors(
            stats.errors - reported.errors,
            stats.commit_failures - reported.commit_failures);
        reported = stats;
        next_lag = std::chrono::steady_clock::now() + kLagInterval;
      }
      if (!record) continue;
      Task task{.record = std::move(record)};
      try {
        task.job = ParseJob(task.record->value);
      } catch (const JobError& e) {
        if (runner_->RejectMalformed(task.record->value, e.what(),
                                     cancel_.get_token())) {
          consumer_->MarkDone(*task.record);  // nothing to retry
        }
        continue;
      }
      std::lock_guard lock(mu_);
      if (draining_) break;  // not queued, not marked: redelivered
      queue_.push_back(std::move(task));
      ++stats_.taken;
      cv_.notify_all();
    }
    // Draining: keep serving the group (paused) until the running jobs have
    // ended and marked their records, then commit and leave.
    consumer_->SetPaused(true);
    while (true) {
      {
        std::lock_guard lock(mu_);
        if (running_ == 0) break;
      }
      consumer_->Poll(kPollTimeout);  // paused: returns nothing we keep
    }
    consumer_->Close();
  }

  void ScheduleLoop(SysMillis start) {
    std::vector<SysMillis> next(options_.schedules.size());
    for (size_t i = 0; i < next.size(); ++i) {
      next[i] = NextOccurrence(options_.schedules[i], start);
    }
    std::unique_lock lock(mu_);
    while (!draining_) {
      const SysMillis now = wall_->Now();
      for (size_t i = 0; i < next.size(); ++i) {
        if (next[i] > now) continue;
        const config::ScheduleConfig& schedule = options_.schedules[i];
        const DueOccurrences due = TakeDue(schedule, next[i], now);
        for (const SysMillis t : due.run) {
          pending_.push_back({.schedule = i,
                              .due = t,
                              .next_due = due.following,
                              .try_at = t});
        }
        const uint64_t skipped = due.count - due.run.size();
        if (skipped > 0) {
          stats_.skipped += skipped;
          LogSkipped(schedule, next[i], now, due, skipped);
        }
        next[i] = due.following;
      }
      SysMillis wake = SysMillis::max();
      for (auto it = pending_.begin(); it != pending_.end();) {
        if (it->in_flight) {
          ++it;
          continue;
        }
        if (it->try_at <= now) {
          it->in_flight = true;
          queue_.push_back({.schedule = it->schedule, .due = it->due});
          ++stats_.taken;
          cv_.notify_all();
        } else {
          wake = std::min(wake, it->try_at);
        }
        ++it;
      }
      for (const SysMillis& t : next) wake = std::min(wake, t);
      // Relative and bounded: the wall clock may be stepped (or fake).
      const milliseconds sleep =
          std::clamp(wake - now, milliseconds(1), kScheduleRecheck);
      cv_.wait_for(lock, sleep, [this] { return draining_; });
    }
  }

  void LogSkipped(const config::ScheduleConfig& schedule, SysMillis first,
                  SysMillis now, const DueOccurrences& due, uint64_t skipped) {
    const auto& log = runner_->options().log;
    if (!log) return;
    const auto ms = [](SysMillis t) {
      return std::to_string(t.time_since_epoch().count());
    };
    log(config::LogLevel::kWarning,
        "schedule " + schedule.name + ": " + std::to_string(due.count) +
            " occurrence(s) due at once or overdue (the first at " + ms(first) +
            " ms, now " + ms(now) + " ms); catch_up " +
            std::to_string(schedule.catch_up) + ": running " +
            std::to_string(due.run.size()) + ", skipped " +
            std::to_string(skipped));
  }

  const std::shared_ptr<JobRunner> runner_;
  const WorkerOptions options_;
  const std::shared_ptr<WallClock> wall_;
  const std::unique_ptr<notifier::JobConsumer> consumer_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;        // guarded by mu_
  std::vector<Pending> pending_;  // guarded by mu_
  int running_ = 0;               // guarded by mu_
  bool started_ = false;          // guarded by mu_
  bool draining_ = false;         // guarded by mu_
  bool stopped_ = false;          // guarded by mu_
  WorkerStats stats_;             // guarded by mu_
  std::stop_source cancel_;
  std::vector<std::thread> pool_;
  std::thread poller_;
  std::thread scheduler_;
  std::thread sampler_;
  std::stop_source sampling_;  // requested when draining starts
};

Worker::Worker(std::shared_ptr<JobRunner> runner, WorkerOptions options,
               std::unique_ptr<notifier::JobConsumer> jobs)
    : impl_(std::make_unique<Impl>(std::move(runner), std::move(options),
                                   std::move(jobs))) {}

Worker::~Worker() { Shutdown(); }

void Worker::Start() { impl_->Start(); }
void Worker::Shutdown() { impl_->Shutdown(); }
HealthReport Worker::Health() { return impl_->Health(); }
WorkerStats Worker::stats() const { return impl_->stats(); }

}  // namespace lockfleet::worker
