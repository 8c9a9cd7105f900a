// Internal: the state behind a Metrics and its observers: the registry,
// its families, and the series of each lock class and job type.
#pragma once

#include <array>
#include <cstddef>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>

#include "bounded_series.h"
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

struct LockClassSeries {
  std::array<Counter*, std::size(kAcquireStatuses)> acquisitions{};
  Counter* attempts = nullptr;
  Counter* contended = nullptr;
  Histogram* wait = nullptr;
  Histogram* hold = nullptr;
  std::array<Counter*, std::size(kReleaseStatuses)> releases{};
  std::array<Counter*, std::size(kWakeCauses)> wakeups{};
  Counter* leases_lost = nullptr;
  Counter* spins = nullptr;
};

// A semaphore class's series (the class comes from the semaphore's name, as
// a lock's does).
struct SemaphoreClassSeries {
  std::array<Counter*, std::size(kAcquireStatuses)> acquisitions{};
  Histogram* wait = nullptr;
  Histogram* hold = nullptr;
  std::array<Counter*, std::size(kReleaseStatuses)> releases{};
  Counter* lost = nullptr;
  Gauge* held = nullptr;
};

// A read-write lock class's series, per mode (kRead, kWrite).
struct RwClassSeries {
  struct Mode {
    std::array<Counter*, std::size(kAcquireStatuses)> acquisitions{};
    Histogram* wait = nullptr;
    Histogram* hold = nullptr;
    std::array<Counter*, std::size(kReleaseStatuses)> releases{};
    Counter* lost = nullptr;
    Gauge* held = nullptr;
  };
  std::array<Mode, 2> modes;
  const Mode& operator[](RwMode mode) const {
    return modes[mode == RwMode::kWrite ? 1 : 0];
  }
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

  std::string Exposition() const;

 private:
  LockClassSeries MakeLockSeries(const std::string& lock_class);
  SemaphoreClassSeries MakeSemaphoreSeries(const std::string& semaphore_class);
  RwClassSeries MakeRwSeries(const std::string& rwlock_class);
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
  prometheus::Family<Counter>& sem_acquisitions_;
  prometheus::Family<Histogram>& sem_wait_;
  prometheus::Family<Histogram>& sem_hold_;
  prometheus::Family<Counter>& sem_releases_;
  prometheus::Family<Counter>& sem_lost_;
  prometheus::Family<Gauge>& sem_held_;
  prometheus::Family<Counter>& rw_acquisitions_;
  prometheus::Family<Histogram>& rw_wait_;
  prometheus::Family<Histogram>& rw_hold_;
  prometheus::Family<Counter>& rw_releases_;
  prometheus::Family<Counter>& rw_lost_;
  prometheus::Family<Gauge>& rw_held_;
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
  std::array<std::unique_ptr<BoundedSeries<JobSeries>>, std::size(kJobSources)>
      job_types_;
};

}  // namespace lockfleet::metrics::internal
