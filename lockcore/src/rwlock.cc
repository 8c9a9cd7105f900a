// Read-write locks: LockCore's part. A read-write lock is a semaphore of
// kRwPermits permits whose sets have owners (semaphore.cc does the waiting,
// scripts.cc's RwAcquireScript the granting); the contracts are in rwlock.h.
#include "lockfleet/lockcore/rwlock.h"

#include <algorithm>
#include <string>

#include "lock_core.h"
#include "lockfleet/lockcore/error.h"
#include "scripts.h"

namespace lockfleet {

const char* RwModeName(RwMode mode) noexcept {
  return mode == RwMode::kWrite ? "write" : "read";
}

namespace internal {

RwResult LockCore::RwAcquireUntil(const std::string& name, RwMode mode,
                                  Clock::TimePoint deadline, bool wait,
                                  const RwOptions& options) {
  ValidateName(name);
  SetAsk ask;
  ask.kind = mode == RwMode::kWrite ? SetKind::kWrite : SetKind::kRead;
  ask.k = mode == RwMode::kWrite ? kRwPermits : 1;
  ask.owner = options.owner.empty() ? DefaultOwner() : options.owner;
  ask.fair = options.fair.value_or(options_.fair);
  if (options.owner.empty()) {
    // The calling thread's own token: sets Redis has under it that this
    // client does not hold are not the caller's (scripts.h, "fresh").
    std::lock_guard lock(mu_);
    ask.fresh = !rw_owned_.contains({name, ask.owner});
  }
  PermitOptions set_options;
  set_options.lease = options.lease;
  set_options.stop = options.stop;
  set_options.on_lost = options.on_lost;
  PermitResult r = SemAcquireUntil(name, ask, deadline, wait, set_options);
  RwResult result;
  result.status = r.status;
  result.attempts = r.attempts;
  result.last_error = std::move(r.last_error);
  if (r) result.lease = RwLease(std::move(r.permits), mode);
  return result;
}

RwInfo LockCore::RwInspect(const std::string& name, size_t max_holders) {
  ValidateName(name);
  const Reply r =
      EvalRetryOnce(RwInspectScript(), SemKeys(name, "", "", SetKind::kRead),
                    {std::to_string(std::min<size_t>(max_holders, 1'000'000))});
  auto bad = [] {
    return Error(ErrorCode::kRedisProtocol,
                 "unexpected reply from read-write lock inspect");
  };
  if (r.type != Reply::Type::kArray || r.elements.size() < 2) throw bad();
  auto integer = [&](const Reply& e) {
    if (e.type != Reply::Type::kInteger) throw bad();
    return e.integer;
  };
  RwInfo info;
  info.last_token = integer(r.elements[0]);
  info.waiters = integer(r.elements[1]);
  for (size_t i = 2; i < r.elements.size(); ++i) {
    const Reply& e = r.elements[i];
    if (e.type != Reply::Type::kArray || e.elements.size() != 5 ||
        e.elements[0].type != Reply::Type::kString ||
        e.elements[2].type != Reply::Type::kString) {
      throw bad();
    }
    RwHolder h;
    h.id = e.elements[0].str;
    h.mode = integer(e.elements[1]) == 1 ? RwMode::kWrite : RwMode::kRead;
    h.owner = e.elements[2].str;
    h.token = integer(e.elements[3]);
    h.ttl = std::chrono::milliseconds(integer(e.elements[4]));
    info.holders.push_back(std::move(h));
  }
  return info;
}

}  // namespace internal

RwResult ReadWriteLock::TryAcquire(RwMode mode, const RwOptions& options) {
  return core_->RwAcquireUntil(name_, mode, Clock::TimePoint::max(), false,
                               options);
}

RwResult ReadWriteLock::AcquireFor(RwMode mode, Clock::Duration timeout,
                                   const RwOptions& options) {
  return AcquireUntil(
      mode, internal::DeadlineAfter(core_->options().clock->Now(), timeout),
      options);
}

RwResult ReadWriteLock::AcquireUntil(RwMode mode, Clock::TimePoint deadline,
                                     const RwOptions& options) {
  return core_->RwAcquireUntil(name_, mode, deadline, true, options);
}

RwLease ReadWriteLock::Acquire(RwMode mode, const RwOptions& options) {
  RwResult r = AcquireUntil(mode, Clock::TimePoint::max(), options);
  if (!r) {
    throw Error(ErrorCode::kCancelled, std::string("waiting for the ") +
                                           RwModeName(mode) + " lock of '" +
                                           name_ + "' cancelled");
  }
  return std::move(r.lease);
}

RwInfo ReadWriteLock::Inspect(size_t max_holders) {
  return core_->RwInspect(name_, max_holders);
}

}  // namespace lockfleet
