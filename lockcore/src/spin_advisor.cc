#include "spin_advisor.h"

#include <algorithm>

namespace lockfleet::internal {
namespace {

using std::chrono::microseconds;

constexpr Clock::Duration kMinStep = microseconds(10);
constexpr Clock::Duration kMinInterval = microseconds(50);
constexpr int kMaxBackoffShift = 6;  // skip at most 63 episodes

}  // namespace

SpinAdvisor::Entry& SpinAdvisor::EntryLocked(const std::string& name) {
  auto it = entries_.find(name);
  if (it != entries_.end()) {
    ages_.splice(ages_.end(), ages_, it->second.age);  // most recent
    return it->second;
  }
  if (entries_.size() >= kMaxLocks) {
    entries_.erase(ages_.front());
    ages_.pop_front();
  }
  Entry& e = entries_[name];
  e.age = ages_.insert(ages_.end(), name);
  return e;
}

void SpinAdvisor::OnHold(const std::string& name, Clock::Duration held) {
  if (!enabled() || held <= Clock::Duration::zero()) return;
  std::lock_guard lock(mu_);
  if (held > max_hold_ && !entries_.contains(name)) return;
  Entry& e = EntryLocked(name);
  if (e.hold == Clock::Duration::zero()) {
    e.hold = held;
  } else {
    e.hold += (held - e.hold) / 8;  // EWMA, weight 1/8
  }
}

SpinAdvisor::Plan SpinAdvisor::PlanFor(const std::string& name,
                                       Clock::TimePoint anchor, Anchor kind,
                                       Clock::TimePoint now) {
  Plan plan;
  if (!enabled()) return plan;
  std::lock_guard lock(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) return plan;
  Entry& e = it->second;
  if (e.hold <= Clock::Duration::zero() || e.hold > max_hold_) return plan;
  const Clock::TimePoint expected =
      anchor + e.hold + e.lag[static_cast<size_t>(kind)];
  // Long past the expected release (a longer hold, a dead holder, a grant
  // older than we thought): park for the event.
  if (now > expected + e.hold) return plan;
  if (e.skip > 0) {
    --e.skip;
    return plan;
  }
  plan.spin = true;
  plan.late = now > expected;
  plan.first_check = std::max(now, expected);
  plan.interval = std::max(kMinInterval, e.hold / 16);
  plan.checks = kMaxChecks;
  plan.anchor = anchor;
  plan.kind = kind;
  plan.hold = e.hold;
  return plan;
}

void SpinAdvisor::OnOutcome(const std::string& name, const Plan& plan,
                            int checks_sent, Clock::TimePoint last_sent,
                            int won_at, Clock::TimePoint woken_at) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(name);
  if (it == entries_.end() || !plan.spin) return;
  Entry& e = it->second;
  const Clock::Duration step = std::max(kMinStep, plan.hold / 32);
  const Clock::TimePoint base = plan.anchor + plan.hold;
  // Where the release fell (as well as this episode tells), against base.
  Clock::Duration sample;
  const bool woken = woken_at != Clock::TimePoint::max();
  if (won_at == 1) {
    sample = (last_sent - base) - step;  // in time: a little earlier
  } else if (won_at > 1) {
    sample = (last_sent - base) - plan.interval / 2;  // between two checks
  } else if (checks_sent == 0 && woken) {
    sample = woken_at - base;  // the wake came first: at the latest then
  } else if (woken) {
    sample = (last_sent - base) + (woken_at - last_sent) / 2;
  } else {
    sample = (last_sent - base) + plan.interval;  // all too early
  }
  if (!plan.late) {
    Clock::Duration& lag = e.lag[static_cast<size_t>(plan.kind)];
    lag += (sample - lag) / 4;
    lag = std::clamp(lag, -e.hold, 4 * e.hold);
  }
  if (won_at > 0 || checks_sent == 0) {
    e.failures = 0;  // won, or cost nothing
    e.skip = 0;
  } else {
    e.failures = std::min(e.failures + 1, kMaxBackoffShift);
    e.skip = (1 << e.failures) - 1;
  }
}

Clock::Duration SpinAdvisor::HoldForTesting(const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(name);
  return it == entries_.end() ? Clock::Duration::zero() : it->second.hold;
}

Clock::Duration SpinAdvisor::LagForTesting(const std::string& name,
                                           Anchor kind) const {
  std::lock_guard lock(mu_);
  auto it = entries_.find(name);
  return it == entries_.end() ? Clock::Duration::zero()
                              : it->second.lag[static_cast<size_t>(kind)];
}

}  // namespace lockfleet::internal
