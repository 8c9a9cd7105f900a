// Multi-lock: several ordinary locks, taken in sorted order, all-or-nothing
// (see multi_lock.h).
#include "lockfleet/lockcore/multi_lock.h"

#include <algorithm>
#include <exception>
#include <optional>
#include <utility>

#include "lock_core.h"
#include "lockfleet/lockcore/error.h"

namespace lockfleet {
namespace {

// `names` sorted, checked: not empty, not too many, no duplicates, each a
// valid lock name.
std::vector<std::string> CanonicalOrder(const std::vector<std::string>& names) {
  if (names.empty())
    throw Error(ErrorCode::kInvalidArgument, "multi-lock needs lock names");
  if (names.size() > kMaxMultiLockNames) {
    throw Error(ErrorCode::kInvalidArgument,
                "multi-lock of " + std::to_string(names.size()) +
                    " names; the limit is " +
                    std::to_string(kMaxMultiLockNames));
  }
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    internal::ValidateName(sorted[i]);
    if (i > 0 && sorted[i] == sorted[i - 1]) {
      throw Error(ErrorCode::kInvalidArgument,
                  "multi-lock names lock \"" + sorted[i] + "\" twice");
    }
  }
  return sorted;
}

}  // namespace

MultiLease::MultiLease(std::vector<Lease> leases,
                       std::shared_ptr<LockObserver> observer,
                       std::shared_ptr<Clock> clock)
    : leases_(std::move(leases)),
      observer_(std::move(observer)),
      clock_(std::move(clock)) {
  if (clock_ != nullptr) acquired_at_ = clock_->Now();
}

MultiLease& MultiLease::operator=(MultiLease&& other) noexcept {
  if (this != &other) {
    try {
      Release();
    } catch (...) {  // each lease frees when its lease runs out
    }
    leases_ = std::move(other.leases_);
    other.leases_.clear();
    observer_ = std::move(other.observer_);
    clock_ = std::move(other.clock_);
    acquired_at_ = other.acquired_at_;
  }
  return *this;
}

MultiLease::~MultiLease() {
  try {
    Release();
  } catch (...) {  // each lease frees when its lease runs out
  }
}

const Lease& MultiLease::lease(std::string_view name) const {
  for (const Lease& l : leases_)
    if (l.held() && l.name() == name) return l;
  throw Error(ErrorCode::kInvalidArgument,
              "not a lock of this multi-lease: " + std::string(name));
}

bool MultiLease::lost() const noexcept {
  return std::any_of(leases_.begin(), leases_.end(),
                     [](const Lease& l) { return l.lost(); });
}

ReleaseStatus MultiLease::Release() { return Release(nullptr); }

ReleaseStatus MultiLease::Release(std::vector<LeaseRelease>* each) {
  if (leases_.empty()) return ReleaseStatus::kNotHeld;
  std::vector<Lease> leases = std::move(leases_);
  leases_.clear();
  // Its class for the observer (a released Lease no longer has a name).
  const std::string first_name =
      leases.front().held() ? leases.front().name() : "";
  std::optional<ReleaseStatus> first;
  std::exception_ptr error;
  for (auto it = leases.rbegin(); it != leases.rend(); ++it) {
    if (!it->held()) continue;
    LeaseRelease outcome{.name = it->name(), .fence = it->fence()};
    try {
      outcome.status = it->Release();
      if (*outcome.status != ReleaseStatus::kReleased && !first)
        first = outcome.status;
    } catch (const std::exception& e) {
      outcome.error = e.what();
      if (!error) error = std::current_exception();
    } catch (...) {
      outcome.error = "unknown error";
      if (!error) error = std::current_exception();
    }
    if (each != nullptr) each->push_back(std::move(outcome));
  }
  if (error) std::rethrow_exception(error);
  const ReleaseStatus status = first.value_or(ReleaseStatus::kReleased);
  if (observer_ != nullptr && clock_ != nullptr) {
    observer_->OnMultiRelease(first_name, status, clock_->Now() - acquired_at_);
  }
  return status;
}

AcquireAllResult LockClient::TryAcquireAll(
    const std::vector<std::string>& names, const AcquireOptions& options) {
  return AcquireAllUntil(names, Clock::TimePoint::min(), options);
}

AcquireAllResult LockClient::AcquireAllFor(
    const std::vector<std::string>& names, Clock::Duration timeout,
    const AcquireOptions& options) {
  return AcquireAllUntil(
      names, internal::DeadlineAfter(core_->options().clock->Now(), timeout),
      options);
}

AcquireAllResult LockClient::AcquireAllUntil(
    const std::vector<std::string>& names, Clock::TimePoint deadline,
    const AcquireOptions& options) {
  const std::vector<std::string> sorted = CanonicalOrder(names);
  const Clock::TimePoint start = core_->options().clock->Now();
  // Reports the call's end to the observer (not an error: see OnError).
  auto ended = [&](AcquireAllResult& r) -> AcquireAllResult {
    if (LockObserver* observer = core_->observer()) {
      observer->OnMultiAcquire(sorted.front(), sorted.size(), r.status,
                               core_->options().clock->Now() - start);
    }
    return std::move(r);
  };
  // One owner for all of them: the caller's, or this thread's default.
  AcquireOptions each = options;
  if (each.owner.empty()) each.owner = DefaultOwner();
  std::vector<Lease> taken;
  taken.reserve(sorted.size());
  // Gives back what was taken, newest first (MultiLease releases in reverse
  // order); a lease whose release fails frees when it runs out.
  auto give_back = [&taken] {
    MultiLease partial(std::move(taken));
    try {
      partial.Release();
    } catch (...) {
    }
  };
  AcquireAllResult result;
  for (;;) {
    for (const std::string& name : sorted) {
      // Past the deadline (TryAcquireAll: from the start) each lock gets
      // one attempt, as TryAcquire does.
      AcquireResult r;
      try {
        r = AcquireUntil(name, deadline, each);
      } catch (...) {  // a Redis failure mid-way
        give_back();
        throw;
      }
      if (r) {
        taken.push_back(std::move(r.lease));
        continue;
      }
      // Not granted in time: give back what we took before returning.
      give_back();
      result.status = r.status;
      result.blocked_on = name;
      result.holder = std::move(r.holder);
      result.holder_ttl = r.holder_ttl;
      return ended(result);
    }
    // A lock taken early may have been lost while the call waited for a
    // later one (an explicit lease shorter than the wait, renewals failing
    // through an outage): then the set is not held as a whole. Give it all
    // back and start again, within the deadline.
    const auto lost = std::find_if(taken.begin(), taken.end(),
                                   [](const Lease& l) { return l.lost(); });
    if (lost == taken.end()) break;
    const std::string lost_name = lost->name();
    give_back();
    taken.clear();
    if (options.stop.stop_requested() ||
        core_->options().clock->Now() >= deadline) {
      result.status = options.stop.stop_requested() ? AcquireStatus::kCancelled
                                                    : AcquireStatus::kTimedOut;
      result.blocked_on = lost_name;
      return ended(result);
    }
  }
  result.status = AcquireStatus::kAcquired;
  result.lease = MultiLease(std::move(taken), core_->options().observer,
                            core_->options().clock);
  return ended(result);
}

}  // namespace lockfleet
