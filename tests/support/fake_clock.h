// FakeClock: steady time that moves only when a test says so.
#pragma once

#include <atomic>
#include <chrono>

#include "lockfleet/lockcore/clock.h"

namespace lockfleet::testing {

class FakeClock final : public Clock {
 public:
  explicit FakeClock(TimePoint start = std::chrono::steady_clock::now())
      : now_ns_(Ns(start)) {}
  TimePoint Now() const override {
    return TimePoint(std::chrono::nanoseconds(now_ns_.load()));
  }
  void Advance(Duration d) {
    now_ns_.fetch_add(
        std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
  }

 private:
  static int64_t Ns(TimePoint t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               t.time_since_epoch())
        .count();
  }
  std::atomic<int64_t> now_ns_;
};

}  // namespace lockfleet::testing
