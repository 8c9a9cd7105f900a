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
      s.lock.Acquired(status, waited);
      if (attempts > 0) s.attempts->Increment(attempts);
      if (contended) s.contended->Increment();
    });
  }

  void OnRelease(std::string_view name, ReleaseStatus status,
                 Clock::Duration held) noexcept override {
    Record([&] { state_->Lock(name).lock.Released(status, held); });
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
    Record([&] { state_->Lock(name).lock.Lost(); });
  }

  void OnError(ErrorCode code) noexcept override {
    Record([&] { state_->ErrorCounter(code).Increment(); });
  }

  void OnPermitsAcquire(std::string_view name, AcquireStatus status,
                        Clock::Duration waited) noexcept override {
    Record([&] { state_->Semaphore(name).semaphore.Acquired(status, waited); });
  }

  void OnPermitsRelease(std::string_view name, ReleaseStatus status,
                        Clock::Duration held) noexcept override {
    Record([&] { state_->Semaphore(name).semaphore.Released(status, held); });
  }

  void OnPermitsLost(std::string_view name) noexcept override {
    Record([&] { state_->Semaphore(name).semaphore.Lost(); });
  }

  void OnPermitsHeld(std::string_view name, int64_t delta) noexcept override {
    Record([&] {
      state_->Semaphore(name).held->Increment(static_cast<double>(delta));
    });
  }

  void OnRwAcquire(std::string_view name, RwMode mode, AcquireStatus status,
                   Clock::Duration waited) noexcept override {
    Record([&] { state_->Rw(name)[mode].hold.Acquired(status, waited); });
  }

  void OnRwRelease(std::string_view name, RwMode mode, ReleaseStatus status,
                   Clock::Duration held) noexcept override {
    Record([&] { state_->Rw(name)[mode].hold.Released(status, held); });
  }

  void OnRwLost(std::string_view name, RwMode mode) noexcept override {
    Record([&] { state_->Rw(name)[mode].hold.Lost(); });
  }

  void OnRwHeld(std::string_view name, RwMode mode,
                int64_t delta) noexcept override {
    Record([&] {
      state_->Rw(name)[mode].held->Increment(static_cast<double>(delta));
    });
  }

  void OnLatchAwait(std::string_view name, AwaitStatus status,
                    Clock::Duration waited) noexcept override {
    Record([&] {
      state_->Latch(name).latch.Acquired(AcquireStatusOf(status), waited);
    });
  }

  void OnLatchCountDown(std::string_view name,
                        CountDownStatus status) noexcept override {
    Record([&] {
      if (Counter* c =
              At(state_->Latch(name).count_downs, static_cast<size_t>(status)))
        c->Increment();
    });
  }

  void OnMultiAcquire(std::string_view first, size_t /*names*/,
                      AcquireStatus status,
                      Clock::Duration waited) noexcept override {
    Record([&] { state_->Multi(first).Acquired(status, waited); });
  }

  void OnMultiRelease(std::string_view first, ReleaseStatus status,
                      Clock::Duration held) noexcept override {
    Record([&] { state_->Multi(first).Released(status, held); });
  }

 private:
  // A latch's await counts as an acquisition: opened is acquired.
  static AcquireStatus AcquireStatusOf(AwaitStatus status) {
    switch (status) {
      case AwaitStatus::kOpened:
        return AcquireStatus::kAcquired;
      case AwaitStatus::kTimedOut:
        return AcquireStatus::kTimedOut;
      case AwaitStatus::kCancelled:
        break;
    }
    return AcquireStatus::kCancelled;
  }

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

  void OnLimitSampled(std::string_view name, int64_t in_use, int64_t available,
                      int64_t waiters) noexcept override {
    Record([&] { state_->SetLimitSample(name, in_use, available, waiters); });
  }

  void OnLimitUnknown(std::string_view name) noexcept override {
    Record([&] { state_->ForgetLimit(name); });
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
