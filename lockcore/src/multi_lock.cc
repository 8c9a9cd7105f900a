// Multi-lock: several ordinary locks, taken in sorted order, all-or-nothing
// (see multi_lock.h).
#include "lockfleet/lockcore/multi_lock.h"

#include <algorithm>
#include <exception>
#include <optional>
#include <utility>

#include "key_slot.h"
#include "lock_core.h"
#include "lockfleet/lockcore/error.h"
#include "scripts.h"

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

// Gives back leases taken (newest first, as MultiLease releases); one whose
// release fails frees when its lease runs out.
void GiveBackQuietly(std::vector<Lease>&& leases) noexcept {
  MultiLease taken(std::move(leases));
  try {
    taken.Release();
  } catch (...) {
  }
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

namespace internal {

std::optional<LockCore::AllAtOnce> LockCore::TryAllAtOnce(
    const std::vector<std::string>& sorted, const AcquireOptions& options,
    Clock::TimePoint deadline) {
  // Outside a cluster one server has every key; on a cluster a script's
  // keys must share a slot (each lock's keys share their name's).
  if (redis_->endpoint().cluster()) {
    const uint16_t slot = KeySlot(LockKey(sorted.front()));
    for (const std::string& name : sorted)
      if (KeySlot(LockKey(name)) != slot) return std::nullopt;
  }
  const std::string owner =
      options.owner.empty() ? DefaultOwner() : options.owner;
  const std::chrono::milliseconds lease =
      options.lease.value_or(options_.default_lease);
  const bool renew = !options.lease.has_value();
  const bool fair = options.fair.value_or(options_.fair);
  std::vector<std::string> keys;
  keys.reserve(4 * sorted.size());
  std::vector<std::string> args = {owner, std::to_string(lease.count()),
                                   fair ? "1" : "0"};
  args.reserve(3 + 2 * sorted.size());
  std::vector<std::string> holds;  // each lock's hold id, as AcquireUntil's
  holds.reserve(sorted.size());
  for (const std::string& name : sorted) {
    for (std::string& key : Keys(name)) keys.push_back(std::move(key));
    holds.push_back(NextRequestId());
    args.push_back(holds.back());
    // As AcquireUntil's: the thread's own token, and none of the lock held
    // here under it.
    args.push_back(options.owner.empty() && !HoldsHere(name, owner) ? "1"
                                                                    : "0");
  }
  // The holds a try may have granted unseen (a lost reply), given back
  // within one kGiveUpBudget for all of them (those Redis does not answer
  // for in time are remembered, as GiveBackLostHolds remembers one).
  auto give_back = [&](size_t from) noexcept {
    const Clock::TimePoint until = options_.clock->Now() + kGiveUpBudget;
    for (size_t i = from; i < sorted.size(); ++i) {
      try {
        ReleaseOrphans(sorted[i], owner, 0, {holds[i]}, until);
      } catch (...) {  // allocation failure: the hold ends with its lease
      }
    }
  };
  const Clock::TimePoint sent = options_.clock->Now();
  bool may_hold = false;
  std::string shortfall;
  Reply r;
  try {
    r = EvalRetryOnce(MultiAcquireScript(), keys, args, deadline, &may_hold,
                      &shortfall);
  } catch (const Error&) {
    if (may_hold) give_back(0);
    throw;
  }
  // One attempt per lock, as k single tries would count (LockStats and
  // the observer agree per lock).
  attempts_.fetch_add(sorted.size(), std::memory_order_relaxed);
  AllAtOnce out;
  if (r.type == Reply::Type::kArray && !r.elements.empty() &&
      r.elements[0].integer != 1) {
    // A retry refused after a first try that ran unseen: that try's holds
    // are in the other locks.
    if (may_hold) give_back(0);
    contended_.fetch_add(1, std::memory_order_relaxed);
    const int64_t index = IntElement(r, 1, "multi-acquire");
    if (index < 1 || static_cast<size_t>(index) > sorted.size()) {
      throw Error(ErrorCode::kRedisProtocol,
                  "multi-acquire refused lock " + std::to_string(index) +
                      " of " + std::to_string(sorted.size()));
    }
    out.refused = static_cast<size_t>(index - 1);
    out.ttl_ms = IntElement(r, 2, "multi-acquire");
    out.holder = Element(r, 3, "multi-acquire").str;
    return out;
  }
  if (r.elements.size() != 1 + 2 * sorted.size()) {
    give_back(0);
    throw Error(ErrorCode::kRedisProtocol,
                "multi-acquire answered " + std::to_string(r.elements.size()) +
                    " elements for " + std::to_string(sorted.size()) +
                    " locks");
  }
  if (!shortfall.empty()) {
    // As TryOnce: grants the replicas may not have are given back before
    // anything uses them.
    give_back(0);
    throw Error(ErrorCode::kRedisReplicas,
                "multi-lock of " + std::to_string(sorted.size()) +
                    " locks from '" + sorted.front() + "' was granted but " +
                    shortfall + "; given back");
  }
  out.leases.reserve(sorted.size());
  for (size_t i = 0; i < sorted.size(); ++i) {
    Attempt a;
    try {
      a = Granted(sorted[i], owner, lease, renew, options, holds[i],
                  r.elements[1 + 2 * i].integer, sent);
    } catch (...) {  // allocation failure: nothing held as a whole
      GiveBackQuietly(std::move(out.leases));
      give_back(i);
      throw;
    }
    if (!a.granted) {
      // Stale (see Granted: another call under our token holds a newer
      // grant): not held as a whole. Give it all back; the caller's next
      // attempt re-enters the newer grant.
      GiveBackQuietly(std::move(out.leases));
      give_back(i);
      AllAtOnce stale;
      stale.refused = i;
      stale.holder = owner;
      return stale;
    }
    out.leases.push_back(std::move(a.lease));
  }
  out.granted = true;
  return out;
}

}  // namespace internal

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
  if (options.lease && *options.lease <= std::chrono::milliseconds(0))
    throw Error(ErrorCode::kInvalidArgument, "lease must be positive");
  // All of them in one script, where they can share one: a multi-lock that
  // is free costs one round trip, and a refused try has held none of them
  // (unless a lost reply's retry is refused: see TryAllAtOnce). Refused, a
  // call that may wait takes them one by one, in order, queueing as any
  // acquisition does.
  const bool try_only = deadline <= core_->options().clock->Now();
  std::optional<internal::LockCore::AllAtOnce> all;
  try {
    all = core_->TryAllAtOnce(sorted, options,
                              try_only ? Clock::TimePoint::max() : deadline);
  } catch (const Error& e) {
    // A call that may wait rides a Redis outage out as one acquisition does
    // (one by one, below), once the client has reached Redis; a try fails
    // at once, as TryAcquire does.
    if (try_only || !internal::IsOutage(e.code()) || !core_->reached()) throw;
  }
  if (all) {
    if (all->granted) {
      if (LockObserver* observer = core_->observer()) {
        for (const std::string& name : sorted) {
          observer->OnAcquire(name, AcquireStatus::kAcquired,
                              core_->options().clock->Now() - start, 1, false);
        }
      }
      AcquireAllResult result;
      result.status = AcquireStatus::kAcquired;
      result.lease =
          MultiLease(std::move(all->leases), core_->options().observer,
                     core_->options().clock);
      return ended(result);
    }
    if (try_only) {  // the answer
      AcquireAllResult result;
      result.blocked_on = sorted[all->refused];
      result.holder = std::move(all->holder);
      result.holder_ttl = std::chrono::milliseconds(all->ttl_ms);
      if (LockObserver* observer = core_->observer()) {
        observer->OnAcquire(result.blocked_on, AcquireStatus::kTimedOut,
                            core_->options().clock->Now() - start, 1, true);
      }
      return ended(result);
    }
  }
  // One owner for all of them: the caller's, or (none given) this thread's
  // default, which each wait takes as a single wait does — "fresh" (a grant
  // under it that this client does not hold is replaced, not re-entered)
  // and handed the lock in full.
  std::vector<Lease> taken;
  taken.reserve(sorted.size());
  auto give_back = [&taken] { GiveBackQuietly(std::move(taken)); };
  AcquireAllResult result;
  for (;;) {
    for (const std::string& name : sorted) {
      // Past the deadline (TryAcquireAll: from the start) each lock gets
      // one attempt, as TryAcquire does.
      AcquireResult r;
      try {
        r = AcquireUntil(name, deadline, options);
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
