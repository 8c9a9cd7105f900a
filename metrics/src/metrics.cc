#include "lockfleet/metrics/metrics.h"

#include <chrono>
#include <cmath>
#include <memory>
#include <string_view>
#include <utility>

#include "metrics_state.h"

namespace lockfleet::metrics {
namespace internal {
namespace {

double Seconds(Clock::Duration d) {
  return std::chrono::duration<double>(d).count();
}

// Observers must not throw: a failure to record (bad_alloc) loses a count.
template <typename F>
void Record(F&& record) noexcept {
  try {
    record();
  } catch (...) {
  }
}

class LockMetrics final : public LockObserver {
 public:
  explicit LockMetrics(std::shared_ptr<MetricsState> state)
      : state_(std::move(state)) {}

  void OnAcquire(std::string_view name, AcquireStatus status,
                 Clock::Duration waited, int attempts,
                 bool contended) noexcept override {
    Record([&] {
      const LockClassSeries& s = state_->Lock(name);
      if (Counter* c = At(s.acquisitions, static_cast<size_t>(status)))
        c->Increment();
      if (attempts > 0) s.attempts->Increment(attempts);
      if (contended) s.contended->Increment();
      s.wait->Observe(Seconds(waited));
    });
  }

  void OnRelease(std::string_view name, ReleaseStatus status,
                 Clock::Duration held) noexcept override {
    Record([&] {
      const LockClassSeries& s = state_->Lock(name);
      if (Counter* c = At(s.releases, static_cast<size_t>(status)))
        c->Increment();
      s.hold->Observe(Seconds(held));
    });
  }

  void OnWakeup(std::string_view name, WakeCause cause) noexcept override {
    Record([&] {
      if (Counter* c =
              At(state_->Lock(name).wakeups, static_cast<size_t>(cause)))
        c->Increment();
    });
  }

  void OnSpin(std::string_view name) noexcept override {
    Record([&] { state_->Lock(name).spins->Increment(); });
  }

  void OnWaiting(int delta) noexcept override {
    state_->waiters().Increment(delta);
  }

  void OnRenewal(uint64_t renewed, bool failed) noexcept override {
    if (renewed > 0) state_->renewals().Increment(static_cast<double>(renewed));
    if (failed) state_->renewal_failures().Increment();
  }

  void OnLeaseLost(std::string_view name) noexcept override {
    Record([&] { state_->Lock(name).leases_lost->Increment(); });
  }

  void OnError(ErrorCode code) noexcept override {
    Record([&] { state_->ErrorCounter(code).Increment(); });
  }

  void OnPermitsAcquire(std::string_view name, AcquireStatus status,
                        Clock::Duration waited) noexcept override {
    Record([&] {
      const SemaphoreClassSeries& s = state_->Semaphore(name);
      if (Counter* c = At(s.acquisitions, static_cast<size_t>(status)))
        c->Increment();
      s.wait->Observe(Seconds(waited));
    });
  }

  void OnPermitsRelease(std::string_view name, ReleaseStatus status,
                        Clock::Duration held) noexcept override {
    Record([&] {
      const SemaphoreClassSeries& s = state_->Semaphore(name);
      if (Counter* c = At(s.releases, static_cast<size_t>(status)))
        c->Increment();
      s.hold->Observe(Seconds(held));
    });
  }

  void OnPermitsLost(std::string_view name) noexcept override {
    Record([&] { state_->Semaphore(name).lost->Increment(); });
  }

  void OnPermitsHeld(std::string_view name, int64_t delta) noexcept override {
    Record([&] {
      state_->Semaphore(name).held->Increment(static_cast<double>(delta));
    });
  }

  void OnRwAcquire(std::string_view name, RwMode mode, AcquireStatus status,
                   Clock::Duration waited) noexcept override {
    Record([&] {
      const RwClassSeries::Mode& m = state_->Rw(name)[mode];
      if (Counter* c = At(m.acquisitions, static_cast<size_t>(status)))
        c->Increment();
      m.wait->Observe(Seconds(waited));
    });
  }

  void OnRwRelease(std::string_view name, RwMode mode, ReleaseStatus status,
                   Clock::Duration held) noexcept override {
    Record([&] {
      const RwClassSeries::Mode& m = state_->Rw(name)[mode];
      if (Counter* c = At(m.releases, static_cast<size_t>(status)))
        c->Increment();
      m.hold->Observe(Seconds(held));
    });
  }

  void OnRwLost(std::string_view name, RwMode mode) noexcept override {
    Record([&] { state_->Rw(name)[mode].lost->Increment(); });
  }

  void OnRwHeld(std::string_view name, RwMode mode,
                int64_t delta) noexcept override {
    Record([&] {
      state_->Rw(name)[mode].held->Increment(static_cast<double>(delta));
    });
  }

 private:
  const std::shared_ptr<MetricsState> state_;
};

class WorkerMetrics final : public worker::WorkerObserver {
 public:
  explicit WorkerMetrics(std::shared_ptr<MetricsState> state)
      : state_(std::move(state)) {}

  void OnJob(worker::JobSource source, std::string_view type,
             worker::JobResult result,
             Clock::Duration duration) noexcept override {
    Record([&] {
      const JobSeries& s = state_->Job(source, type);
      if (Counter* c = At(s.results, static_cast<size_t>(result)))
        c->Increment();
      s.duration->Observe(Seconds(duration));
    });
  }

  void OnRunning(int delta) noexcept override {
    state_->jobs_running().Increment(delta);
  }

  void OnConsumerLag(int64_t lag) noexcept override {
    Record([&] {
      state_->SetConsumerLag(lag < 0 ? std::nan("") : static_cast<double>(lag));
    });
  }

  void OnConsumerErrors(uint64_t errors,
                        uint64_t commit_failures) noexcept override {
    Record([&] {
      state_->ConsumerErrors("consume").Increment(static_cast<double>(errors));
      state_->ConsumerErrors("commit").Increment(
          static_cast<double>(commit_failures));
    });
  }

  void OnConsumerPartitions(int partitions) noexcept override {
    Record([&] { state_->SetConsumerPartitions(partitions); });
  }

 private:
  const std::shared_ptr<MetricsState> state_;
};

}  // namespace
}  // namespace internal

Metrics::Metrics(MetricsOptions options)
    : state_(std::make_shared<internal::MetricsState>(std::move(options))) {}

Metrics::~Metrics() = default;

std::shared_ptr<LockObserver> Metrics::lock_observer() const {
  return std::make_shared<internal::LockMetrics>(state_);
}

std::shared_ptr<worker::WorkerObserver> Metrics::worker_observer() const {
  return std::make_shared<internal::WorkerMetrics>(state_);
}

void Metrics::ObserveNotificationDelay(std::chrono::nanoseconds delay) {
  const double seconds = std::chrono::duration<double>(delay).count();
  state_->notification_delay().Observe(seconds < 0 ? 0 : seconds);
}

void Metrics::AddNotifierStats(std::function<notifier::NotifierStats()> read) {
  state_->notifier().Add(std::move(read));
}

void Metrics::AddRedisRoundTrips(std::function<uint64_t()> read) {
  state_->notifier().AddRoundTrips(std::move(read));
}

std::string Metrics::Exposition() const { return state_->Exposition(); }

}  // namespace lockfleet::metrics
