// Semaphores with expiring permits: LockCore's part (the scripts are in
// scripts.cc, the contracts in semaphore.h).
#include "lockfleet/lockcore/semaphore.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>

#include "lock_core.h"
#include "lockfleet/lockcore/error.h"
#include "scripts.h"

namespace lockfleet {
namespace internal {
namespace {

using std::chrono::milliseconds;

}  // namespace

void CheckPermits(int64_t permits, int64_t low, const char* what) {
  if (permits < low || permits > kMaxSemaphorePermits) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string(what) + " must be " + std::to_string(low) + ".." +
                    std::to_string(kMaxSemaphorePermits) + ", not " +
                    std::to_string(permits));
  }
}

namespace {

// A read-write lock set's token, as the script returns it (a string: Lua
// numbers are doubles, tokens are up to 2^63).
int64_t SetToken(const Reply& r) {
  if (r.type == Reply::Type::kInteger) return r.integer;
  if (r.type == Reply::Type::kString) {
    if (std::optional<long long> v = ParseInteger(r.str)) return *v;
  }
  throw Error(ErrorCode::kRedisProtocol,
              "unexpected token from read-write lock acquire");
}

void ThrowIfShortfall(const std::string& shortfall, const std::string& what) {
  if (!shortfall.empty()) {
    throw Error(ErrorCode::kRedisReplicas,
                what + " not acknowledged by the replicas: " + shortfall);
  }
}

}  // namespace

std::string LockCore::SemShortfall(const std::string& shortfall,
                                   bool retried) const {
  // A retry that found the first try's work done (its own setting, a
  // latched reply) wrote nothing, so its WAIT does not answer for the first
  // try's writes (see scripts.h, "Replica acknowledgement").
  if (!shortfall.empty() || !retried || !ReplicaWanted()) return shortfall;
  return "a retry after a lost reply, whose WAIT does not cover the first "
         "try's writes";
}

std::vector<std::string> LockCore::SemKeys(std::string_view name,
                                           const std::string& request_id,
                                           const std::string& gone_id,
                                           SetKind kind) const {
  const std::string tag = options_.key_prefix + ":{" + std::string(name) + "}:";
  const std::string base =
      tag + (kind == SetKind::kPermits || kind == SetKind::kNone ? "semaphore"
                                                                 : "rwlock");
  std::vector<std::string> keys = {base, base + ":expiry", base + ":queue",
                                   base + ":waiters"};
  if (!request_id.empty()) keys.push_back(tag + "latch:" + request_id);
  if (!gone_id.empty()) keys.push_back(base + ":gone:" + gone_id);
  return keys;
}

void LockCore::SemHanded(const std::string& name, const Reply& handed,
                         const std::string& self, SetKind kind, bool freed) {
  WaitTable& waits = WaitsOf(kind);
  if (handed.type != Reply::Type::kArray) return;
  UnlockEvent event;
  event.lock = name;
  event.cause = UnlockCause::kPermits;
  int named = 0;
  for (const Reply& waiter : handed.elements) {
    if (waiter.type != Reply::Type::kString || waiter.str == self) continue;
    // Ours: woken directly, no event. Another process's: only it wakes.
    if (waits.HandedOff(name, waiter.str, WakeCause::kLocal, {}, 0,
                        /*promote=*/false)) {
      continue;
    }
    if (named > 0) event.next_waiter += '\n';
    event.next_waiter += waiter.str;
    if (++named == kMaxGranteesPerEvent) {
      Publish(event);
      event.next_waiter.clear();
      named = 0;
    }
  }
  if (named > 0) {
    Publish(event);
  } else if (freed && handed.elements.empty()) {
    // Freed for nobody queued: a waiter that barges may take it now.
    waits.WakeOne(name, WakeCause::kLocal);
    Publish(event);
  }
}

bool LockCore::SemTrySet(const std::string& name, int64_t permits) {
  ValidateName(name);
  CheckPermits(permits, 0, "semaphore permits");
  std::string shortfall;
  bool retried = false;
  const std::string request = NextRequestId();
  const Reply r = EvalRetryOnce(SemSetScript(), SemKeys(name),
                                {std::to_string(permits), request},
                                Clock::TimePoint::max(), &retried, &shortfall);
  const bool set = IntElement(r, 0, "semaphore set") == 1;
  if (set)
    ThrowIfShortfall(SemShortfall(shortfall, retried),
                     "semaphore '" + name + "' set");
  return set;
}

int64_t LockCore::SemChange(const std::string& name, int64_t n, bool add) {
  ValidateName(name);
  if (n < -kMaxSemaphorePermits || n > kMaxSemaphorePermits) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string("semaphore permits to ") + (add ? "add" : "set") +
                    " must be -" + std::to_string(kMaxSemaphorePermits) + ".." +
                    std::to_string(kMaxSemaphorePermits));
  }
  std::string shortfall;
  bool retried = false;
  const std::string request = NextRequestId();
  const Reply r = EvalRetryOnce(
      SemAddScript(), SemKeys(name, request),
      {std::to_string(n), std::to_string(options_.claim_window.count()),
       std::to_string(options_.retry_latch.count()),
       std::to_string(kMaxSemaphorePermits), add ? "add" : "set"},
      Clock::TimePoint::max(), &retried, &shortfall);
  const int64_t permits = IntElement(r, 1, "semaphore change");
  if (IntElement(r, 0, "semaphore change") != 1) {
    throw Error(ErrorCode::kInvalidArgument,
                "semaphore '" + name + "' has " + std::to_string(permits) +
                    " permits: " + (add ? "adding " : "setting ") +
                    std::to_string(n) + " would leave it outside 0.." +
                    std::to_string(kMaxSemaphorePermits));
  }
  SemHanded(name, Element(r, 2, "semaphore change"));
  ThrowIfShortfall(SemShortfall(shortfall, retried),
                   "semaphore '" + name + "' change");
  return permits;
}

SemaphoreInfo LockCore::SemInspect(const std::string& name) {
  ValidateName(name);
  const Reply r = EvalRetryOnce(SemInspectScript(), SemKeys(name), {});
  SemaphoreInfo info;
  const int64_t permits = IntElement(r, 0, "semaphore inspect");
  if (permits < 0) return info;
  info.exists = true;
  info.permits = permits;
  info.used = IntElement(r, 1, "semaphore inspect");
  info.available = std::max<int64_t>(0, permits - info.used);
  info.holders = IntElement(r, 2, "semaphore inspect");
  info.waiters = IntElement(r, 3, "semaphore inspect");
  return info;
}

bool LockCore::SemAbandon(const std::string& name, const std::string& id,
                          int64_t gone_ms, SetKind kind) noexcept {
  try {
    const std::string request = NextRequestId();
    const Reply r = EvalRetryOnce(
        SemReleaseScript(), SemKeys(name, request, id, kind),
        {id, std::to_string(options_.claim_window.count()),
         std::to_string(options_.retry_latch.count()), std::to_string(gone_ms)},
        options_.clock->Now() + kGiveUpBudget);
    SemHanded(name, Element(r, 1, "semaphore abandon"), id, kind);
    return true;
  } catch (...) {
    // Redis unreachable or slow (counted): the queue entry lapses after
    // presence_window, a set handed to us after claim_window, one a lost
    // reply granted after its lease.
    return false;
  }
}

PermitResult LockCore::SemAcquireUntil(const std::string& name,
                                       const SetAsk& ask,
                                       Clock::TimePoint deadline, bool wait,
                                       const PermitOptions& options) {
  ValidateName(name);
  const bool rw = ask.kind != SetKind::kPermits;
  const int64_t k = ask.k;
  if (!rw) CheckPermits(k, 1, "permits to acquire");
  const std::string what =
      (rw ? "read-write lock '" : "semaphore '") + name + "'";
  if (options.lease && *options.lease <= milliseconds(0)) {
    throw Error(ErrorCode::kInvalidArgument, "lease must be positive");
  }
  const milliseconds lease = options.lease.value_or(options_.default_lease);
  const bool renew = !options.lease.has_value();
  if (wait && deadline != Clock::TimePoint::max() &&
      deadline <= options_.clock->Now()) {
    wait = false;  // one try: it never queues
  }
  // The call's id: its place in the queue and its permit set's id. Every
  // try sends it, so a try whose reply was lost and a later one are one
  // set, not two.
  const std::string id = NextRequestId();
  PermitResult result;
  // Tells the observer how the call ended, whichever way it returns.
  struct Report {
    LockCore* core;
    const std::string& name;
    Clock::TimePoint start;
    const PermitResult& result;
    const SetKind kind;
    ~Report() {
      if (core->observer() == nullptr || std::uncaught_exceptions() > 0) return;
      const Clock::Duration waited = core->options_.clock->Now() - start;
      if (kind == SetKind::kPermits) {
        core->observer()->OnPermitsAcquire(name, result.status, waited);
      } else {
        core->observer()->OnRwAcquire(name, RwModeOf(kind), result.status,
                                      waited);
      }
    }
  } report{this, name, options_.clock->Now(), result, ask.kind};

  // Listen first: the slot is registered before the first attempt.
  WaitTable::Slot slot;
  slot.waiter_id = id;
  WaitTable& waits = WaitsOf(ask.kind);
  Watching watching(this, name);  // outlives the slot (Leave)
  if (wait) waits.Register(name, &slot);
  if (wait) sem_waiting_.fetch_add(1, std::memory_order_relaxed);
  // Whether Redis may have our set or our queue entry: on a way out without
  // permits, the call leaves (SemAbandon).
  bool touched = false;
  // Whether a try may have run with its reply lost — and so may still run
  // late, after the call ended: its end then leaves a tombstone for as long
  // as a late try could create a set (its lease) or reach the server.
  bool unsure = false;
  const int64_t gone_ms = lease.count() + options_.retry_latch.count();
  struct Leave {
    LockCore* core;
    const std::string& name;
    const std::string& id;
    const bool wait;
    const bool& touched;
    const bool& unsure;
    const int64_t gone_ms;
    const SetKind kind;
    WaitTable::Slot* slot;
    const PermitResult& result;
    ~Leave() {
      const bool acquired = result.status == AcquireStatus::kAcquired;
      // `unsure` alone too: a try-only call whose first try's reply was
      // lost (its retry answered) may still have that try run late.
      if (!acquired && (touched || unsure))
        core->SemAbandon(name, id, unsure ? gone_ms : 0, kind);
      if (!wait) return;
      core->WaitsOf(kind).Unregister(name, slot);
      core->sem_waiting_.fetch_sub(1, std::memory_order_relaxed);
    }
  } leave{this,   name,    id,       wait,  touched,
          unsure, gone_ms, ask.kind, &slot, result};

  const std::vector<std::string> keys = SemKeys(name, "", id, ask.kind);
  std::vector<std::string> args = {
      id,
      std::to_string(k),
      std::to_string(lease.count()),
      std::to_string(options_.presence_window.count()),
      wait ? "1" : "0",
      std::to_string(options_.claim_window.count())};
  if (rw) {
    args.insert(args.end(), {ask.owner, ask.fresh ? "1" : "0",
                             ask.fair ? "1" : "0", std::to_string(kRwPermits)});
  }
  const Script& script = rw ? RwAcquireScript() : SemAcquireScript();
  bool in_outage = false;
  Clock::TimePoint outage_since;
  milliseconds backoff(0);
  for (;;) {
    bool failed = false;
    int64_t wait_hint = -1;
    try {
      ++result.attempts;
      const Clock::TimePoint sent = options_.clock->Now();
      std::string shortfall;
      bool may_have_run = false;
      Reply r;
      try {
        r = EvalRetryOnce(script, keys, args, deadline, &may_have_run,
                          &shortfall);
      } catch (const Error&) {
        if (may_have_run) touched = unsure = true;
        throw;
      }
      if (may_have_run) unsure = true;  // the retry answered; the first may run
      touched = wait || touched;
      if (!reached_.load(std::memory_order_relaxed))
        reached_.store(true, std::memory_order_relaxed);
      in_outage = false;
      const long long status = IntElement(r, 0, "semaphore acquire");
      SemHanded(name, Element(r, status == 1 ? 2 : 3, "semaphore acquire"), id,
                ask.kind);
      if (status == -3) {
        throw Error(ErrorCode::kInternal,
                    what + ": this acquisition has ended");
      }
      if (status == -4) {
        throw Error(ErrorCode::kInvalidArgument,
                    what + ": owner '" + ask.owner +
                        "' holds it for reading only; a read lock cannot be "
                        "upgraded (it would wait for itself): release it, "
                        "then take the write lock");
      }
      if (status == -1) {
        throw Error(
            ErrorCode::kInvalidArgument,
            "semaphore '" + name + "' does not exist (set its permits first)");
      }
      if (status == -2) {
        throw Error(ErrorCode::kInvalidArgument,
                    "semaphore '" + name + "' has " +
                        std::to_string(IntElement(r, 1, "semaphore acquire")) +
                        " permits; " + std::to_string(k) + " asked for");
      }
      if (status == 1) {
        touched = true;  // a set is ours: given back if we do not keep it
        ThrowIfShortfall(shortfall, rw ? what + " granted but"
                                       : "permits of " + what + " granted but");
        auto held = std::make_shared<HeldLock>();
        held->name = name;
        held->key = keys[0];
        held->expiry_key = keys[1];
        held->owner = id;
        held->set_kind = ask.kind;
        held->set_owner = ask.owner;
        held->fence = rw ? SetToken(Element(r, 3, "read-write lock acquire"))
                         : IntElement(r, 1, "semaphore acquire");
        held->lease = lease;
        held->renew = renew;
        held->local_holds = 1;
        held->gone_ms = unsure ? gone_ms : 0;
        held->valid_until_ns.store(ValidUntilNs(sent, lease));
        held->acquired_at = options_.clock->Now();
        if (renew) held->next_check = sent + lease / 3;
        if (options.on_lost) held->on_lost.push_back(options.on_lost);
        {
          std::lock_guard lock(mu_);
          if (stopping_) {
            // The LockClient is gone: nothing would renew the set or tell
            // its holder when it ends. Given back (Leave).
            throw Error(ErrorCode::kInvalidArgument,
                        what + ": its LockClient has been destroyed");
          }
          permits_[id] = held;
          if (rw) ++rw_owned_[{name, ask.owner}];
          Schedule(held);
        }
        (rw ? rw_acquisitions_ : sem_acquisitions_)
            .fetch_add(1, std::memory_order_relaxed);
        if (observer()) ObserveHeld(*held, 1);
        result.status = AcquireStatus::kAcquired;
        result.permits = Permits(shared_from_this(), std::move(held));
        result.last_error.clear();
        return result;
      }
      result.available = IntElement(r, 1, "semaphore acquire");
      wait_hint = IntElement(r, 2, "semaphore acquire");
    } catch (const Error& e) {
      if (!wait || !IsOutage(e.code()) ||
          !reached_.load(std::memory_order_relaxed)) {
        throw;
      }
      result.last_error = e.what();
      const Clock::TimePoint now = options_.clock->Now();
      if (!in_outage) {
        in_outage = true;
        outage_since = now;
      }
      if (now >= deadline) {
        result.status = AcquireStatus::kTimedOut;
        return result;
      }
      if (now - outage_since >= options_.outage_grace) throw;
      outage_waits_.fetch_add(1, std::memory_order_relaxed);
      failed = true;
    }
    if (!wait) {
      result.status = AcquireStatus::kTimedOut;
      return result;
    }
    RunHook(name);
    if (options.stop.stop_requested()) {
      result.status = AcquireStatus::kCancelled;
      return result;
    }
    const Clock::TimePoint now = options_.clock->Now();
    if (now >= deadline) {
      result.status = AcquireStatus::kTimedOut;
      return result;
    }
    // Bounded: the remaining wait, the cap, our presence's refresh, and the
    // earliest set's lease end (+1 ms: surely ended on the server) — a
    // holder that died gives its permits back then, and no event says so.
    Clock::Duration bound = std::min<Clock::Duration>(
        {deadline - now, Clock::Duration(options_.park_cap),
         Clock::Duration(options_.presence_window / 3)});
    if (failed) {
      backoff = std::clamp(backoff * 2, milliseconds(50), milliseconds(1000));
      bound = std::min<Clock::Duration>(bound, backoff);
    } else {
      sem_parks_.fetch_add(1, std::memory_order_relaxed);
      if (wait_hint >= 0)
        bound = std::min<Clock::Duration>(bound, milliseconds(wait_hint + 1));
    }
    watching.Begin();
    switch (waits.Park(&slot, bound, options.stop)) {
      case WakeCause::kLocal:
        wake_local_.fetch_add(1, std::memory_order_relaxed);
        break;
      case WakeCause::kEvent:
        wake_event_.fetch_add(1, std::memory_order_relaxed);
        break;
      case WakeCause::kCancelled:
        result.status = AcquireStatus::kCancelled;
        return result;
      default:
        wake_bound_.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

ReleaseStatus LockCore::SemRelease(const std::string& name,
                                   const std::string& permit_id,
                                   const std::shared_ptr<HeldLock>& held) {
  // A late try of the set's acquisition must not bring it back: with one
  // possible (a lost reply), or not knowing (a release by id), a tombstone.
  int64_t gone_ms =
      held ? held->gone_ms
           : options_.default_lease.count() + options_.retry_latch.count();
  const SetKind kind = held ? held->set_kind : SetKind::kPermits;
  const bool rw = kind != SetKind::kPermits;
  LostCalls lost_calls;
  {
    std::lock_guard lock(mu_);
    if (held) {
      held->released = true;  // the watchdog ignores it from now on
      // Off the held gauge now, whatever the script answers (a lost one
      // was taken off when it was lost).
      if (!held->lost.load() && observer()) ObserveHeld(*held, -1);
      Forget(held);
    } else if (auto it = permits_.find(permit_id);
               it != permits_.end() && it->second->name == name &&
               it->second->set_kind == SetKind::kPermits) {
      // Released by id while a Permits of this client holds it: that holder
      // has lost it (stop token, on_lost), as another client's release by
      // id is learnt at its next renewal.
      std::shared_ptr<HeldLock> mine = it->second;
      gone_ms = std::max<int64_t>(
          gone_ms, mine->lease.count() + options_.retry_latch.count());
      MarkLostLocked(mine, &lost_calls);
      Forget(mine);
    }
  }
  DeferCallbacks(std::move(lost_calls));
  const std::string request = NextRequestId();
  Reply r;
  try {
    std::string shortfall;
    r = EvalRetryOnce(
        SemReleaseScript(), SemKeys(name, request, permit_id, kind),
        {permit_id, std::to_string(options_.claim_window.count()),
         std::to_string(options_.retry_latch.count()), std::to_string(gone_ms)},
        Clock::TimePoint::max(), nullptr, &shortfall);
  } catch (const Error&) {
    release_failures_.fetch_add(1, std::memory_order_relaxed);
    throw;
  }
  const ReleaseStatus status = IntElement(r, 0, "semaphore release") == 1
                                   ? ReleaseStatus::kReleased
                                   : ReleaseStatus::kNotHeld;
  // A release that handed nothing wakes a barging waiter only where one
  // could now get in: the lock is free, or a writer left (readers may
  // enter). A reader leaving beside other readers frees nothing.
  const bool freed = rw && status == ReleaseStatus::kReleased &&
                     (kind == SetKind::kWrite ||
                      (r.elements.size() > 2 &&
                       IntElement(r, 2, "read-write lock release") == 0));
  SemHanded(name, Element(r, 1, "semaphore release"), "", kind, freed);
  (status != ReleaseStatus::kReleased ? releases_not_held_
   : rw                               ? rw_releases_
                                      : sem_releases_)
      .fetch_add(1, std::memory_order_relaxed);
  if (held && rw && observer()) {
    observer()->OnRwRelease(name, RwModeOf(kind), status,
                            options_.clock->Now() - held->acquired_at);
  } else if (held && observer()) {
    observer()->OnPermitsRelease(name, status,
                                 options_.clock->Now() - held->acquired_at);
  }
  return status;
}

}  // namespace internal

// Semaphore.

Semaphore::Semaphore(std::shared_ptr<internal::LockCore> core, std::string name)
    : core_(std::move(core)), name_(std::move(name)) {}

bool Semaphore::TrySetPermits(int64_t permits) {
  return core_->SemTrySet(name_, permits);
}

int64_t Semaphore::AddPermits(int64_t delta) {
  return core_->SemChange(name_, delta, /*add=*/true);
}

void Semaphore::SetPermits(int64_t permits) {
  internal::CheckPermits(permits, 0, "semaphore permits");
  core_->SemChange(name_, permits, /*add=*/false);
}

SemaphoreInfo Semaphore::Inspect() { return core_->SemInspect(name_); }

PermitResult Semaphore::TryAcquire(int64_t permits,
                                   const PermitOptions& options) {
  return core_->SemAcquireUntil(name_, {.k = permits}, Clock::TimePoint::max(),
                                false, options);
}

PermitResult Semaphore::AcquireFor(int64_t permits, Clock::Duration timeout,
                                   const PermitOptions& options) {
  return AcquireUntil(
      permits, internal::DeadlineAfter(core_->options().clock->Now(), timeout),
      options);
}

PermitResult Semaphore::AcquireUntil(int64_t permits, Clock::TimePoint deadline,
                                     const PermitOptions& options) {
  return core_->SemAcquireUntil(name_, {.k = permits}, deadline, true, options);
}

Permits Semaphore::Acquire(int64_t permits, const PermitOptions& options) {
  PermitResult r = AcquireUntil(permits, Clock::TimePoint::max(), options);
  if (!r) {
    throw Error(ErrorCode::kCancelled,
                "waiting for permits of semaphore '" + name_ + "' cancelled");
  }
  return std::move(r.permits);
}

ReleaseStatus Semaphore::Release(std::string_view permit_id) {
  if (permit_id.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "permit id must not be empty");
  }
  return core_->SemRelease(name_, std::string(permit_id), nullptr);
}

// Permits.

namespace {
const std::string kNone;
}

Permits::Permits() noexcept = default;

Permits::Permits(std::shared_ptr<internal::LockCore> core,
                 std::shared_ptr<internal::HeldLock> held) noexcept
    : core_(std::move(core)), held_(std::move(held)) {}

Permits::~Permits() {
  if (!held()) return;
  try {
    Release();
  } catch (...) {  // counted; the permits come back when the lease ends
  }
}

Permits::Permits(Permits&& other) noexcept = default;

Permits& Permits::operator=(Permits&& other) noexcept {
  if (this == &other) return *this;
  if (held()) {
    try {
      Release();
    } catch (...) {
    }
  }
  core_ = std::move(other.core_);
  held_ = std::move(other.held_);
  return *this;
}

const std::string& Permits::name() const {
  return held() ? held_->name : kNone;
}
const std::string& Permits::id() const { return held() ? held_->owner : kNone; }
int64_t Permits::count() const { return held() ? held_->fence : 0; }

bool Permits::lost() const noexcept { return !held() || core_->Lost(*held_); }

std::stop_token Permits::stop_token() const {
  return internal::StopTokenOf(held_.get());
}

Clock::TimePoint Permits::valid_until() const {
  return internal::ValidUntilOf(held_.get());
}

ReleaseStatus Permits::Release() {
  if (!held()) {
    throw Error(ErrorCode::kInvalidArgument,
                "Release() on a Permits that holds nothing");
  }
  std::shared_ptr<internal::LockCore> core = std::move(core_);
  std::shared_ptr<internal::HeldLock> held = std::move(held_);
  return core->SemRelease(held->name, held->owner, held);
}

}  // namespace lockfleet
