#include "metrics_state.h"

#include <string>
#include <utility>
#include <vector>

#include "prometheus/text_serializer.h"

namespace lockfleet::metrics::internal {
namespace {

// Lock wait and hold times. An uncontended acquisition waits about one Redis
// round trip (~0.1 ms locally); a local or fair hand-off costs 0.1-0.5 ms, a
// Kafka wake-up 0.5-2 ms; a park that runs to its bound lasts up to park_cap
// (1 s by default) and a waiter may park many times, up to its timeout;
// holds run from a sub-millisecond critical section to a lease the watchdog
// renews for minutes. Hence 100 us .. 60 s at 1-2.5-5 steps per decade: any
// quantile is known within a factor of 2.5 at 18 buckets, which matters
// because each lock class carries two of these histograms.
const Histogram::BucketBoundaries& LockTimeBuckets() {
  static const Histogram::BucketBoundaries kBuckets = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
      0.1,    0.25,    0.5,    1,     2.5,    5,     10,   30,    60};
  return kBuckets;
}

// Unlock-event delay (release to receipt). A real broker long-polls:
// ~0.5 ms; the embedded broker's fetch wait spreads it over 1-2 ms (see
// lessons.md); a lagging consumer or the 500 ms fetch wait of a real
// cluster's defaults reach hundreds of ms; beyond message_timeout (5 s) an
// event is dropped, not late. Denser steps from 0.5 to 3 ms, where healthy
// deployments land, tell those apart; one histogram per process, so the
// extra buckets are cheap.
const Histogram::BucketBoundaries& NotificationDelayBuckets() {
  static const Histogram::BucketBoundaries kBuckets = {
      0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.005,
      0.01,   0.025,   0.05,   0.1,     0.25,  0.5,    1,     2.5,   5};
  return kBuckets;
}

// Job durations, lock wait included: from a millisecond of bookkeeping to
// handlers that call out to other systems for minutes.
const Histogram::BucketBoundaries& JobDurationBuckets() {
  static const Histogram::BucketBoundaries kBuckets = {
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
      1,     2.5,    5,     10,   30,    60,   120, 300};
  return kBuckets;
}

constexpr ErrorCode kErrorCodes[] = {
    ErrorCode::kInvalidArgument, ErrorCode::kRedisUnavailable,
    ErrorCode::kRedisTimeout,    ErrorCode::kRedisAuth,
    ErrorCode::kRedisProtocol,   ErrorCode::kRedisScript,
    ErrorCode::kRedisBusy,       ErrorCode::kKafka,
    ErrorCode::kCancelled,       ErrorCode::kInternal,
    ErrorCode::kRedisReplicas};

template <typename Enum, size_t N>
constexpr bool InEnumOrder(const Enum (&values)[N]) {
  for (size_t i = 0; i < N; ++i) {
    if (static_cast<size_t>(values[i]) != i) return false;
  }
  return true;
}
static_assert(InEnumOrder(kAcquireStatuses) && InEnumOrder(kReleaseStatuses) &&
              InEnumOrder(kWakeCauses) && InEnumOrder(kJobResults) &&
              InEnumOrder(kJobSources));

prometheus::Family<Counter>& CounterFamily(prometheus::Registry& registry,
                                           const char* name, const char* help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}
prometheus::Family<Gauge>& GaugeFamily(prometheus::Registry& registry,
                                       const char* name, const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
}
prometheus::Family<Histogram>& HistogramFamily(prometheus::Registry& registry,
                                               const char* name,
                                               const char* help) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(registry);
}

}  // namespace

MetricsState::MetricsState(MetricsOptions options)
    : options_(std::move(options)),
      acquisitions_(CounterFamily(
          registry_, "lockfleet_lock_acquisitions_total",
          "Lock acquisition calls that ended, by result: acquired, timed_out "
          "or cancelled. Calls that failed with an error are counted in "
          "lockfleet_lock_errors_total instead.")),
      attempts_(CounterFamily(
          registry_, "lockfleet_lock_attempts_total",
          "Acquire scripts run against Redis (one per try; a waiting "
          "acquisition tries again after each wake-up).")),
      contended_(CounterFamily(
          registry_, "lockfleet_lock_contended_total",
          "Acquisition calls in which at least one attempt found the lock "
          "held by another owner.")),
      wait_(HistogramFamily(
          registry_, "lockfleet_lock_wait_seconds",
          "Time acquisition calls took until their result, whatever it was.")),
      hold_(HistogramFamily(registry_, "lockfleet_lock_hold_seconds",
                            "Time from a grant to its release.")),
      releases_(CounterFamily(
          registry_, "lockfleet_lock_releases_total",
          "Holds given back, by result: released, still_held (reentrant "
          "holds remain), not_held (had expired or been force-unlocked) or "
          "not_owner (another owner holds the lock: refused).")),
      wakeups_(CounterFamily(
          registry_, "lockfleet_lock_wakeups_total",
          "Parked waiters woken, by cause: local (a release in this "
          "process), event (an unlock event from another process), bound "
          "(the park bound expired) or spin (the queue head's own check "
          "found its grant).")),
      leases_lost_(CounterFamily(
          registry_, "lockfleet_lock_leases_lost_total",
          "Held locks lost: found taken, expired or force-unlocked at "
          "renewal, or their lease ran out before a renewal succeeded.")),
      spins_(CounterFamily(
          registry_, "lockfleet_lock_spins_total",
          "Spin checks sent by the head of a lock's queue (one Redis round "
          "trip each); those that found the grant are wakeups with cause "
          "spin.")),
      errors_(CounterFamily(
          registry_, "lockfleet_lock_errors_total",
          "Lock operations that failed, by error code (Redis errors and "
          "others).")),
      sem_acquisitions_(CounterFamily(
          registry_, "lockfleet_semaphore_acquisitions_total",
          "Permit acquisition calls of semaphores that ended, by result: "
          "acquired, timed_out or cancelled (errors: "
          "lockfleet_lock_errors_total).")),
      sem_wait_(HistogramFamily(
          registry_, "lockfleet_semaphore_wait_seconds",
          "Time permit acquisition calls took until their result.")),
      sem_hold_(
          HistogramFamily(registry_, "lockfleet_semaphore_hold_seconds",
                          "Time from a permit set's grant to its release.")),
      sem_releases_(CounterFamily(
          registry_, "lockfleet_semaphore_releases_total",
          "Permit sets given back, by result: released or not_held (its "
          "lease had run out, or it was released by id).")),
      sem_lost_(CounterFamily(
          registry_, "lockfleet_semaphore_permits_lost_total",
          "Permit sets lost while held: their lease ran out before a renewal "
          "succeeded, or Redis said they were gone.")),
      sem_held_(
          GaugeFamily(registry_, "lockfleet_semaphore_permits_held",
                      "Permits this process holds now, per semaphore class.")),
      rw_acquisitions_(CounterFamily(
          registry_, "lockfleet_rwlock_acquisitions_total",
          "Read-write lock acquisition calls that ended, by mode (read, "
          "write) and result: acquired, timed_out or cancelled (errors: "
          "lockfleet_lock_errors_total).")),
      rw_wait_(HistogramFamily(
          registry_, "lockfleet_rwlock_wait_seconds",
          "Time read-write lock acquisition calls took until their result, "
          "by mode.")),
      rw_hold_(HistogramFamily(
          registry_, "lockfleet_rwlock_hold_seconds",
          "Time from a read-write lock hold's grant to its release, by "
          "mode.")),
      rw_releases_(CounterFamily(
          registry_, "lockfleet_rwlock_releases_total",
          "Read-write lock holds given back, by mode and result: released or "
          "not_held (its lease had run out).")),
      rw_lost_(CounterFamily(
          registry_, "lockfleet_rwlock_lost_total",
          "Read-write lock holds lost while held, by mode: their lease ran "
          "out before a renewal succeeded, or Redis said they were gone.")),
      rw_held_(GaugeFamily(
          registry_, "lockfleet_rwlock_holds",
          "Read-write lock holds this process has now, per class and mode.")),
      jobs_(CounterFamily(registry_, "lockfleet_jobs_total",
                          "Jobs that ended, by source, type (the handler) and "
                          "result.")),
      job_duration_(HistogramFamily(
          registry_, "lockfleet_job_duration_seconds",
          "Time from picking a job up to its end, lock wait included.")),
      consumer_lag_(GaugeFamily(
          registry_, "lockfleet_jobs_consumer_lag",
          "Records in the jobs topic beyond this worker's position, summed "
          "over its partitions (NaN when unknown).")),
      consumer_partitions_(
          GaugeFamily(registry_, "lockfleet_jobs_consumer_partitions",
                      "Jobs-topic partitions assigned to this worker.")),
      consumer_errors_(CounterFamily(
          registry_, "lockfleet_jobs_consumer_errors_total",
          "Jobs-topic consumer errors, by kind: consume (fetch and transport "
          "errors) or commit (offset commits that failed; retried).")),
      waiters_(GaugeFamily(
                   registry_, "lockfleet_lock_waiters",
                   "Threads waiting in a timed or blocking lock acquisition.")
                   .Add({})),
      renewals_(CounterFamily(registry_, "lockfleet_lock_renewals_total",
                              "Lease renewals that succeeded.")
                    .Add({})),
      renewal_failures_(
          CounterFamily(registry_, "lockfleet_lock_renewal_failures_total",
                        "Lease renewal round trips to Redis that failed.")
              .Add({})),
      notification_delay_(
          HistogramFamily(registry_, "lockfleet_notification_delay_seconds",
                          "Delay of unlock events from the release in the "
                          "publishing process to their receipt here.")
              .Add({}, NotificationDelayBuckets())),
      jobs_running_(GaugeFamily(registry_, "lockfleet_jobs_running",
                                "Jobs running in this process.")
                        .Add({})),
      lock_classes_(options_.max_lock_classes,
                    [this](const std::string& lock_class) {
                      return MakeLockSeries(lock_class);
                    }),
      semaphore_classes_(options_.max_lock_classes,
                         [this](const std::string& semaphore_class) {
                           return MakeSemaphoreSeries(semaphore_class);
                         }),
      rw_classes_(options_.max_lock_classes,
                  [this](const std::string& rwlock_class) {
                    return MakeRwSeries(rwlock_class);
                  }) {
  if (!options_.lock_class) options_.lock_class = LockClass;
  for (ErrorCode code : kErrorCodes) ErrorCounter(code);
  ConsumerErrors("consume");
  ConsumerErrors("commit");
  for (worker::JobSource source : kJobSources) {
    job_types_[static_cast<size_t>(source)] =
        std::make_unique<BoundedSeries<JobSeries>>(
            options_.max_job_types, [this, source](const std::string& type) {
              return MakeJobSeries(source, type);
            });
  }
}

LockClassSeries MetricsState::MakeLockSeries(const std::string& lock_class) {
  LockClassSeries s;
  const prometheus::Labels labels = {{"lock_class", lock_class}};
  auto with = [&](const char* name, const char* value) {
    prometheus::Labels l = labels;
    l.emplace(name, value);
    return l;
  };
  for (AcquireStatus status : kAcquireStatuses) {
    s.acquisitions[static_cast<size_t>(status)] =
        &acquisitions_.Add(with("result", AcquireStatusName(status)));
  }
  s.attempts = &attempts_.Add(labels);
  s.contended = &contended_.Add(labels);
  s.wait = &wait_.Add(labels, LockTimeBuckets());
  s.hold = &hold_.Add(labels, LockTimeBuckets());
  for (ReleaseStatus status : kReleaseStatuses) {
    s.releases[static_cast<size_t>(status)] =
        &releases_.Add(with("result", ReleaseStatusName(status)));
  }
  for (WakeCause cause : kWakeCauses) {
    s.wakeups[static_cast<size_t>(cause)] =
        &wakeups_.Add(with("cause", WakeCauseName(cause)));
  }
  s.leases_lost = &leases_lost_.Add(labels);
  s.spins = &spins_.Add(labels);
  return s;
}

JobSeries MetricsState::MakeJobSeries(worker::JobSource source,
                                      const std::string& type) {
  JobSeries s;
  const prometheus::Labels labels = {{"source", JobSourceName(source)},
                                     {"type", type}};
  for (worker::JobResult result : kJobResults) {
    prometheus::Labels l = labels;
    l.emplace("result", JobResultName(result));
    s.results[static_cast<size_t>(result)] = &jobs_.Add(l);
  }
  s.duration = &job_duration_.Add(labels, JobDurationBuckets());
  return s;
}

const LockClassSeries& MetricsState::Lock(std::string_view name) {
  return lock_classes_.Get(LabelValue(options_.lock_class(name)));
}

SemaphoreClassSeries MetricsState::MakeSemaphoreSeries(
    const std::string& semaphore_class) {
  SemaphoreClassSeries s;
  const prometheus::Labels labels = {{"semaphore_class", semaphore_class}};
  auto with = [&](const char* value) {
    prometheus::Labels l = labels;
    l.emplace("result", value);
    return l;
  };
  for (AcquireStatus status : kAcquireStatuses) {
    s.acquisitions[static_cast<size_t>(status)] =
        &sem_acquisitions_.Add(with(AcquireStatusName(status)));
  }
  s.wait = &sem_wait_.Add(labels, LockTimeBuckets());
  s.hold = &sem_hold_.Add(labels, LockTimeBuckets());
  // A permit set is given back or found gone: no still_held, no not_owner.
  for (ReleaseStatus status :
       {ReleaseStatus::kReleased, ReleaseStatus::kNotHeld}) {
    s.releases[static_cast<size_t>(status)] =
        &sem_releases_.Add(with(ReleaseStatusName(status)));
  }
  s.lost = &sem_lost_.Add(labels);
  s.held = &sem_held_.Add(labels);
  return s;
}

const SemaphoreClassSeries& MetricsState::Semaphore(std::string_view name) {
  return semaphore_classes_.Get(LabelValue(options_.lock_class(name)));
}

RwClassSeries MetricsState::MakeRwSeries(const std::string& rwlock_class) {
  RwClassSeries s;
  for (RwMode mode : {RwMode::kRead, RwMode::kWrite}) {
    RwClassSeries::Mode& m = s.modes[mode == RwMode::kWrite ? 1 : 0];
    const prometheus::Labels labels = {{"rwlock_class", rwlock_class},
                                       {"mode", RwModeName(mode)}};
    auto with = [&](const char* value) {
      prometheus::Labels l = labels;
      l.emplace("result", value);
      return l;
    };
    for (AcquireStatus status : kAcquireStatuses) {
      m.acquisitions[static_cast<size_t>(status)] =
          &rw_acquisitions_.Add(with(AcquireStatusName(status)));
    }
    m.wait = &rw_wait_.Add(labels, LockTimeBuckets());
    m.hold = &rw_hold_.Add(labels, LockTimeBuckets());
    for (ReleaseStatus status :
         {ReleaseStatus::kReleased, ReleaseStatus::kNotHeld}) {
      m.releases[static_cast<size_t>(status)] =
          &rw_releases_.Add(with(ReleaseStatusName(status)));
    }
    m.lost = &rw_lost_.Add(labels);
    m.held = &rw_held_.Add(labels);
  }
  return s;
}

const RwClassSeries& MetricsState::Rw(std::string_view name) {
  return rw_classes_.Get(LabelValue(options_.lock_class(name)));
}

const JobSeries& MetricsState::Job(worker::JobSource source,
                                   std::string_view type) {
  const size_t i = static_cast<size_t>(source);
  const size_t kafka = static_cast<size_t>(worker::JobSource::kKafka);
  return job_types_[i < job_types_.size() ? i : kafka]->Get(LabelValue(type));
}

std::string MetricsState::Exposition() const {
  std::vector<prometheus::MetricFamily> families = registry_.Collect();
  for (auto& family : notifier_.Collect())
    families.push_back(std::move(family));
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace lockfleet::metrics::internal
