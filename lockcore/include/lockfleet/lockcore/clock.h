// Clock: the seam through which lockfleet reads steady time.
//
// Everything that decides by time (lease validity, renewal scheduling, park
// bounds) asks a Clock, so tests can substitute a FakeClock and move time
// forward without sleeping. Blocking waits convert the clock's deadlines into
// relative durations, so a fake clock changes decisions, never how long a
// thread really sleeps.
//
// Thread-safety: implementations must be safe to call from any thread.
#pragma once

#include <chrono>
#include <memory>

namespace lockfleet {

class Clock {
 public:
  using Duration = std::chrono::steady_clock::duration;
  using TimePoint = std::chrono::steady_clock::time_point;

  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
};

// The process-wide steady clock. Never null; lives forever.
std::shared_ptr<Clock> SteadyClock();

}  // namespace lockfleet
