#include "lockfleet/lockcore/clock.h"

namespace lockfleet {
namespace {

class SteadyClockImpl final : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
};

}  // namespace

std::shared_ptr<Clock> SteadyClock() {
  static const std::shared_ptr<Clock> clock =
      std::make_shared<SteadyClockImpl>();
  return clock;
}

}  // namespace lockfleet
