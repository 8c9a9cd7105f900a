// Internal: the state behind a Metrics and its observers: the registry,
// its families, and the series of each lock class and job type.
#pragma once

#include <array>
#include <cstddef>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include "bounded_series.h"
#include "lockfleet/lockcore/latch.h"
#include "lockfleet/lockcore/lease.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/rwlock.h"
#include "lockfleet/metrics/metrics.h"
#include "notifier_collector.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace lockfleet::metrics::internal {

using prometheus::Counter;
using prometheus::Gauge;
using prometheus::Histogram;

// Every value of each enum that labels a series, in enum order, so that the
// enum's value indexes the array of its series.
inline constexpr AcquireStatus kAcquireStatuses[] = {AcquireStatus::kAcquired,
                                                     AcquireStatus::kTimedOut,
                                                     AcquireStatus::kCancelled};
inline constexpr ReleaseStatus kReleaseStatuses[] = {
    ReleaseStatus::kReleased, ReleaseStatus::kStillHeld,
    ReleaseStatus::kNotHeld, ReleaseStatus::kNotOwner};
inline constexpr WakeCause kWakeCauses[] = {
    WakeCause::kLocal, WakeCause::kEvent, WakeCause::kBound, WakeCause::kSpin};
inline constexpr CountDownStatus kCountDownStatuses[] = {
    CountDownStatus::kCounted, CountDownStatus::kOpened,
    CountDownStatus::kAlreadyOpen, CountDownStatus::kNoLatch};
inline constexpr worker::JobResult kJobResults[] = {
    worker::JobResult::kOk,        worker::JobResult::kRejected,
    worker::JobResult::kFailed,    worker::JobResult::kDuplicate,
    worker::JobResult::kCancelled, worker::JobResult::kTimeout,
    worker::JobResult::kLeaseLost};
inline constexpr worker::JobSource kJobSources[] = {
    worker::JobSource::kKafka, worker::JobSource::kSchedule};

// The series of `values[i]` at index i; nullptr past the end.
template <typename T, size_t N>
T* At(const std::array<T*, N>& series, size_t i) {
  return i < N ? series[i] : nullptr;
}

// `d` in seconds, the unit of every duration series.
double Seconds(Clock::Duration d);

// The kinds of hold, the `kind` label of the families every kind shares
// (acquisitions, wait, hold, releases, leases lost).
enum class Kind { kLock, kRwRead, kRwWrite, kSemaphore, kLatch, kMultiLock };
// "lock", "rwlock_read", "rwlock_write", "semaphore", "latch", "multilock".
const char* KindName(Kind kind) noexcept;

// One class's series of one kind in the shared families, labelled
// {kind, lock_class}. A series the kind cannot have is null: a latch is
// awaited, never held; a multi-lock's losses are its locks'.
struct HoldSeries {
  std::array<Counter*, std::size(kAcquireStatuses)> acquisitions{};
  Histogram* wait = nullptr;
  Histogram* hold = nullptr;
  std::array<Counter*, std::size(kReleaseStatuses)> releases{};
  Counter* lost = nullptr;

  void Acquired(AcquireStatus status, Clock::Duration waited) const;
  void Released(ReleaseStatus status, Clock::Duration held) const;
  void Lost() const;
};

struct LockClassSeries {
  HoldSeries lock;  // kind="lock"
  Counter* attempts = nullptr;
  Counter* contended = nullptr;
  std::array<Counter*, std::size(kWakeCauses)> wakeups{};
  Counter* spins = nullptr;
};

// A semaphore class's series (the class comes from the semaphore's name, as
// a lock's does).
struct SemaphoreClassSeries {
  HoldSeries semaphore;  // kind="semaphore"
  Gauge* held = nullptr;
};

// A read-write lock class's series, per mode (kRead, kWrite).
struct RwClassSeries {
  struct Mode {
    HoldSeries hold;  // kind="rwlock_read" or "rwlock_write"
    Gauge* held = nullptr;
  };
  std::array<Mode, 2> modes;
  const Mode& operator[](RwMode mode) const {
    return modes[mode == RwMode::kWrite ? 1 : 0];
  }
};

// A latch class's series: its awaits as acquisitions (acquired: it opened)
// and its count-downs by CountDownStatus.
struct LatchClassSeries {
  HoldSeries latch;  // kind="latch": acquisitions and wait only
  std::array<Counter*, std::size(kCountDownStatuses)> count_downs{};
};

struct JobSeries {
  std::array<Counter*, std::size(kJobResults)> results{};
  Histogram* duration = nullptr;
};

// Everything behind a Metrics. Shared by the Metrics and its observers.
//
// Thread-safety: all methods may be called from any thread concurrently.
class MetricsState {
 public:
  explicit MetricsState(MetricsOptions options);

  const LockClassSeries& Lock(std::string_view name);
  const SemaphoreClassSeries& Semaphore(std::string_view name);
  const RwClassSeries& Rw(std::string_view name);
  const LatchClassSeries& Latch(std::string_view name);
  // A multi-lock's series (kind="multilock"), by the class of `first`.
  const HoldSeries& Multi(std::string_view first);
  const JobSeries& Job(worker::JobSource source, std::string_view type);
  Counter& ErrorCounter(ErrorCode code) {
    return errors_.Add({{"code", std::string(ErrorCodeName(code))}});
  }
  Gauge& waiters() { return waiters_; }
  Counter& renewals() { return renewals_; }
  Counter& renewal_failures() { return renewal_failures_; }
  Histogram& notification_delay() { return notification_delay_; }
  Gauge& jobs_running() { return jobs_running_; }
  // The series appears with the first report: no value beats a wrong one.
  void SetConsumerLag(double lag) { consumer_lag_.Add({}).Set(lag); }
  Counter& ConsumerErrors(const std::string& kind) {
    return consumer_errors_.Add({{"kind", kind}});
  }
  void SetConsumerPartitions(int partitions) {
    consumer_partitions_.Add({}).Set(partitions);
  }
  NotifierCollector& notifier() { return notifier_; }
  // A worker's sample of limit (semaphore) `name`: its gauges, labelled by
  // its class and its name (cut as a label value). At most max_lock_classes
  // limits are kept; samples of later ones, and of a name whose label value
  // another limit already has, are dropped.
  void SetLimitSample(std::string_view name, int64_t in_use, int64_t available,
                      int64_t waiters);
  // Withdraws `name`'s gauges (it could not be read, or is gone) until its
  // next sample: a stale value would mislead.
  void ForgetLimit(std::string_view name);

  std::string Exposition() const;

 private:
  LockClassSeries MakeLockSeries(const std::string& lock_class);
  SemaphoreClassSeries MakeSemaphoreSeries(const std::string& semaphore_class);
  RwClassSeries MakeRwSeries(const std::string& rwlock_class);
  LatchClassSeries MakeLatchSeries(const std::string& latch_class);
  // The shared families' series of `kind` and `lock_class`, with the
  // release results in `releases` (none: no hold series either) and a lost
  // series if `lost`.
  HoldSeries MakeHoldSeries(Kind kind, const std::string& lock_class,
                            std::span<const ReleaseStatus> releases, bool lost);
  JobSeries MakeJobSeries(worker::JobSource source, const std::string& type);

  MetricsOptions options_;
  prometheus::Registry registry_;
  NotifierCollector notifier_;

  prometheus::Family<Counter>& acquisitions_;
  prometheus::Family<Counter>& attempts_;
  prometheus::Family<Counter>& contended_;
  prometheus::Family<Histogram>& wait_;
  prometheus::Family<Histogram>& hold_;
  prometheus::Family<Counter>& releases_;
  prometheus::Family<Counter>& wakeups_;
  prometheus::Family<Counter>& leases_lost_;
  prometheus::Family<Counter>& spins_;
  prometheus::Family<Counter>& errors_;
  prometheus::Family<Gauge>& sem_held_;
  prometheus::Family<Gauge>& rw_held_;
  prometheus::Family<Counter>& latch_count_downs_;
  prometheus::Family<Gauge>& limit_in_use_;
  prometheus::Family<Gauge>& limit_available_;
  prometheus::Family<Gauge>& limit_waiters_;
  prometheus::Family<Counter>& jobs_;
  prometheus::Family<Histogram>& job_duration_;
  prometheus::Family<Gauge>& consumer_lag_;
  prometheus::Family<Gauge>& consumer_partitions_;
  prometheus::Family<Counter>& consumer_errors_;

  Gauge& waiters_;
  Counter& renewals_;
  Counter& renewal_failures_;
  Histogram& notification_delay_;
  Gauge& jobs_running_;

  BoundedSeries<LockClassSeries> lock_classes_;
  BoundedSeries<SemaphoreClassSeries> semaphore_classes_;
  BoundedSeries<RwClassSeries> rw_classes_;
  BoundedSeries<LatchClassSeries> latch_classes_;
  struct LimitSeries {
    std::string label;  // its `limit` label value
    Gauge* in_use = nullptr;
    Gauge* available = nullptr;
    Gauge* waiters = nullptr;
  };
  std::mutex limits_mu_;
  std::map<std::string, LimitSeries, std::less<>> limits_;  // limits_mu_
  BoundedSeries<HoldSeries> multi_classes_;
  std::array<std::unique_ptr<BoundedSeries<JobSeries>>, std::size(kJobSources)>
      job_types_;
};

}  // namespace lockfleet::metrics::internal
