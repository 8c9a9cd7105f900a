#include "metrics_state.h"

#include <chrono>
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
              InEnumOrder(kWakeCauses) && InEnumOrder(kCountDownStatuses) &&
              InEnumOrder(kJobResults) && InEnumOrder(kJobSources));

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

double Seconds(Clock::Duration d) {
  return std::chrono::duration<double>(d).count();
}

const char* KindName(Kind kind) noexcept {
  switch (kind) {
    case Kind::kLock:
      return "lock";
    case Kind::kRwRead:
      return "rwlock_read";
    case Kind::kRwWrite:
      return "rwlock_write";
    case Kind::kSemaphore:
      return "semaphore";
    case Kind::kLatch:
      return "latch";
    case Kind::kMultiLock:
      return "multilock";
  }
  return "unknown";
}

void HoldSeries::Acquired(AcquireStatus status, Clock::Duration waited) const {
  if (Counter* c = At(acquisitions, static_cast<size_t>(status)))
    c->Increment();
  if (wait != nullptr) wait->Observe(Seconds(waited));
}

void HoldSeries::Released(ReleaseStatus status, Clock::Duration held) const {
  if (Counter* c = At(releases, static_cast<size_t>(status))) c->Increment();
  if (hold != nullptr) hold->Observe(Seconds(held));
}

void HoldSeries::Lost() const {
  if (lost != nullptr) lost->Increment();
}

MetricsState::MetricsState(MetricsOptions options)
    : options_(std::move(options)),
      acquisitions_(CounterFamily(
          registry_, "lockfleet_lock_acquisitions_total",
          "Acquisition calls that ended, by kind (lock, rwlock_read, "
          "rwlock_write, semaphore, latch: an await, multilock: a whole "
          "multi-lock) and result: acquired (a latch: opened), timed_out or "
          "cancelled. Calls that failed with an error are counted in "
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
          "Time acquisition calls took until their result, whatever it was, "
          "by kind.")),
      hold_(HistogramFamily(registry_, "lockfleet_lock_hold_seconds",
                            "Time from a grant to its release, by kind.")),
      releases_(CounterFamily(
          registry_, "lockfleet_lock_releases_total",
          "Holds given back, by kind and result: released, still_held "
          "(reentrant holds remain), not_held (had expired or been "
          "force-unlocked) or not_owner (another owner holds the lock: "
          "refused).")),
      wakeups_(CounterFamily(
          registry_, "lockfleet_lock_wakeups_total",
          "Parked waiters woken, by cause: local (a release in this "
          "process), event (an unlock event from another process), bound "
          "(the park bound expired) or spin (the queue head's own check "
          "found its grant).")),
      leases_lost_(CounterFamily(
          registry_, "lockfleet_lock_leases_lost_total",
          "Holds lost, by kind: found taken, expired or force-unlocked at "
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
      sem_held_(
          GaugeFamily(registry_, "lockfleet_semaphore_permits_held",
                      "Permits this process holds now, per semaphore class.")),
      rw_held_(GaugeFamily(
          registry_, "lockfleet_rwlock_holds",
          "Read-write lock holds this process has now, per class and mode.")),
      latch_count_downs_(CounterFamily(
          registry_, "lockfleet_latch_count_downs_total",
          "Latch count-downs, by result: counted, opened (this one opened "
          "the latch), already_open or no_latch.")),
      limit_in_use_(GaugeFamily(
          registry_, "lockfleet_semaphore_permits_in_use",
          "Permits out (held, or handed to a waiter not yet claimed) of a "
          "worker limit, fleet-wide, as this worker last read them from "
          "Redis (every worker that used the limit reports the same value: "
          "aggregate with max).")),
      limit_available_(GaugeFamily(
          registry_, "lockfleet_semaphore_permits_available",
          "Free permits of a worker limit, as this worker last read them "
          "from Redis.")),
      limit_waiters_(GaugeFamily(
          registry_, "lockfleet_semaphore_waiters",
          "Waiters queued for a worker limit, as this worker last read them "
          "from Redis.")),
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
                  }),
      latch_classes_(options_.max_lock_classes,
                     [this](const std::string& latch_class) {
                       return MakeLatchSeries(latch_class);
                     }),
      multi_classes_(options_.max_lock_classes,
                     [this](const std::string& lock_class) {
                       return MakeHoldSeries(Kind::kMultiLock, lock_class,
                                             kReleaseStatuses,
                                             /*lost=*/false);
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

HoldSeries MetricsState::MakeHoldSeries(Kind kind,
                                        const std::string& lock_class,
                                        std::span<const ReleaseStatus> releases,
                                        bool lost) {
  HoldSeries s;
  const prometheus::Labels labels = {{"kind", KindName(kind)},
                                     {"lock_class", lock_class}};
  auto with = [&](const char* value) {
    prometheus::Labels l = labels;
    l.emplace("result", value);
    return l;
  };
  for (AcquireStatus status : kAcquireStatuses) {
    s.acquisitions[static_cast<size_t>(status)] =
        &acquisitions_.Add(with(AcquireStatusName(status)));
  }
  s.wait = &wait_.Add(labels, LockTimeBuckets());
  if (releases.size() > 0) s.hold = &hold_.Add(labels, LockTimeBuckets());
  for (ReleaseStatus status : releases) {
    s.releases[static_cast<size_t>(status)] =
        &releases_.Add(with(ReleaseStatusName(status)));
  }
  if (lost) s.lost = &leases_lost_.Add(labels);
  return s;
}

LockClassSeries MetricsState::MakeLockSeries(const std::string& lock_class) {
  LockClassSeries s;
  s.lock = MakeHoldSeries(Kind::kLock, lock_class, kReleaseStatuses,
                          /*lost=*/true);
  const prometheus::Labels labels = {{"lock_class", lock_class}};
  s.attempts = &attempts_.Add(labels);
  s.contended = &contended_.Add(labels);
  for (WakeCause cause : kWakeCauses) {
    prometheus::Labels l = labels;
    l.emplace("cause", WakeCauseName(cause));
    s.wakeups[static_cast<size_t>(cause)] = &wakeups_.Add(l);
  }
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

// A permit set or a read-write hold is given back or found gone: no
// still_held, no not_owner.
constexpr ReleaseStatus kSetReleases[] = {ReleaseStatus::kReleased,
                                          ReleaseStatus::kNotHeld};

SemaphoreClassSeries MetricsState::MakeSemaphoreSeries(
    const std::string& semaphore_class) {
  SemaphoreClassSeries s;
  s.semaphore = MakeHoldSeries(Kind::kSemaphore, semaphore_class, kSetReleases,
                               /*lost=*/true);
  s.held = &sem_held_.Add({{"semaphore_class", semaphore_class}});
  return s;
}

const SemaphoreClassSeries& MetricsState::Semaphore(std::string_view name) {
  return semaphore_classes_.Get(LabelValue(options_.lock_class(name)));
}

RwClassSeries MetricsState::MakeRwSeries(const std::string& rwlock_class) {
  RwClassSeries s;
  for (RwMode mode : {RwMode::kRead, RwMode::kWrite}) {
    const bool write = mode == RwMode::kWrite;
    RwClassSeries::Mode& m = s.modes[write ? 1 : 0];
    m.hold = MakeHoldSeries(write ? Kind::kRwWrite : Kind::kRwRead,
                            rwlock_class, kSetReleases, /*lost=*/true);
    m.held = &rw_held_.Add(
        {{"rwlock_class", rwlock_class}, {"mode", RwModeName(mode)}});
  }
  return s;
}

const RwClassSeries& MetricsState::Rw(std::string_view name) {
  return rw_classes_.Get(LabelValue(options_.lock_class(name)));
}

LatchClassSeries MetricsState::MakeLatchSeries(const std::string& latch_class) {
  LatchClassSeries s;
  s.latch = MakeHoldSeries(Kind::kLatch, latch_class, {}, /*lost=*/false);
  for (CountDownStatus status : kCountDownStatuses) {
    s.count_downs[static_cast<size_t>(status)] = &latch_count_downs_.Add(
        {{"lock_class", latch_class}, {"result", CountDownStatusName(status)}});
  }
  return s;
}

const LatchClassSeries& MetricsState::Latch(std::string_view name) {
  return latch_classes_.Get(LabelValue(options_.lock_class(name)));
}

void MetricsState::SetLimitSample(std::string_view name, int64_t in_use,
                                  int64_t available, int64_t waiters) {
  std::lock_guard lock(limits_mu_);
  auto it = limits_.find(name);
  if (it == limits_.end()) {
    if (limits_.size() >= options_.max_lock_classes) return;
    std::string label = LabelValue(name);
    for (const auto& [other, series] : limits_) {
      if (series.label == label) return;  // two names, one series: neither
    }
    const prometheus::Labels labels = {
        {"semaphore_class", LabelValue(options_.lock_class(name))},
        {"limit", label}};
    it = limits_
             .emplace(std::string(name),
                      LimitSeries{.label = std::move(label),
                                  .in_use = &limit_in_use_.Add(labels),
                                  .available = &limit_available_.Add(labels),
                                  .waiters = &limit_waiters_.Add(labels)})
             .first;
  }
  it->second.in_use->Set(static_cast<double>(in_use));
  it->second.available->Set(static_cast<double>(available));
  it->second.waiters->Set(static_cast<double>(waiters));
}

void MetricsState::ForgetLimit(std::string_view name) {
  std::lock_guard lock(limits_mu_);
  const auto it = limits_.find(name);
  if (it == limits_.end()) return;
  limit_in_use_.Remove(it->second.in_use);
  limit_available_.Remove(it->second.available);
  limit_waiters_.Remove(it->second.waiters);
  limits_.erase(it);
}

const HoldSeries& MetricsState::Multi(std::string_view first) {
  return multi_classes_.Get(LabelValue(options_.lock_class(first)));
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
