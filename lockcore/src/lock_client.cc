#include "lockfleet/lockcore/lock_client.h"

#include <algorithm>
#include <charconv>
#include <random>

#include "key_slot.h"
#include "lock_core.h"
#include "lockfleet/lockcore/error.h"
#include "redis_connection.h"
#include "scripts.h"

namespace lockfleet {
namespace internal {
namespace {

using std::chrono::milliseconds;

std::string RandomClientId() {
  std::random_device rd;
  std::uniform_int_distribution<int> hex(0, 15);
  std::string id;
  for (int i = 0; i < 16; ++i) id += "0123456789abcdef"[hex(rd)];
  return id;
}

uint64_t ThreadNumber() {
  static std::atomic<uint64_t> next{1};
  thread_local uint64_t number = next.fetch_add(1, std::memory_order_relaxed);
  return number;
}

LockClientOptions Validate(LockClientOptions o) {
  auto bad = [](const std::string& why) {
    throw Error(ErrorCode::kInvalidArgument, why);
  };
  if (o.key_prefix.empty() ||
      o.key_prefix.find_first_of("{}") != std::string::npos) {
    bad("key_prefix must be non-empty and contain no '{' or '}'");
  }
  if (o.default_lease < milliseconds(30))
    bad("default_lease must be at least 30ms");
  if (o.park_cap <= milliseconds(0)) bad("park_cap must be positive");
  if (o.presence_window < milliseconds(30))
    bad("presence_window must be at least 30ms");
  if (o.claim_window <= o.presence_window / 3) {
    bad("claim_window must exceed presence_window / 3 (a grantee parks that "
        "long at most)");
  }
  if (o.claim_window > o.presence_window) {
    // A dead waiter then delays the next grant by at most presence_window.
    bad("claim_window must not exceed presence_window");
  }
  if (o.outage_grace < milliseconds(0))
    bad("outage_grace must not be negative");
  if (o.retry_latch < milliseconds(1000))
    bad("retry_latch must be at least 1s");
  if (o.min_replicas < 0 || o.min_replicas > 100)
    bad("min_replicas must be between 0 and 100");
  if (o.replica_timeout <= milliseconds(0))
    bad("replica_timeout must be positive");
  if (o.spin_max_hold < milliseconds(0))
    bad("spin_max_hold must not be negative");
  if (!o.client_id.empty() && !o.client_id_prefix.empty())
    bad("set client_id or client_id_prefix, not both");
  if (!o.clock) o.clock = SteadyClock();
  if (o.client_id.empty()) o.client_id = o.client_id_prefix + RandomClientId();
  return o;
}

}  // namespace

const Reply& Element(const Reply& r, size_t i, const char* what) {
  if (r.type != Reply::Type::kArray || r.elements.size() <= i) {
    throw Error(ErrorCode::kRedisProtocol,
                std::string("unexpected reply from ") + what);
  }
  return r.elements[i];
}

std::optional<long long> ParseInteger(std::string_view text) {
  long long v = 0;
  const char* end = text.data() + text.size();
  const auto [at, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || at != end) return std::nullopt;
  return v;
}

long long IntElement(const Reply& r, size_t i, const char* what) {
  const Reply& e = Element(r, i, what);
  if (e.type != Reply::Type::kInteger) {
    throw Error(ErrorCode::kRedisProtocol,
                std::string("unexpected reply from ") + what);
  }
  return e.integer;
}

// Redis failures a waiting acquisition rides out (see lock_client.h).
bool IsOutage(ErrorCode code) {
  return code == ErrorCode::kRedisUnavailable ||
         code == ErrorCode::kRedisTimeout || code == ErrorCode::kRedisBusy;
}

void ValidateName(std::string_view name) {
  if (name.empty())
    throw Error(ErrorCode::kInvalidArgument, "lock name must not be empty");
  if (name.front() == '}') {
    // Its keys' hash tag would be empty ("P:{}..."), so Redis would hash
    // each key whole: the lock's keys would not share a Cluster slot.
    throw Error(ErrorCode::kInvalidArgument,
                "lock name must not start with '}'");
  }
  if (name.size() > kMaxLockNameBytes) {
    throw Error(ErrorCode::kInvalidArgument,
                "lock name is " + std::to_string(name.size()) +
                    " bytes; the limit is " +
                    std::to_string(kMaxLockNameBytes));
  }
}

LockCore::LockCore(std::shared_ptr<RedisClient> redis,
                   LockClientOptions options)
    : redis_(std::move(redis)),
      options_(Validate(std::move(options))),
      instance_(RandomClientId().substr(0, 8)),
      // With min_replicas, a check would WAIT for the replicas each time
      // (up to replica_timeout, outside the park bound): no spinning.
      spin_(options_.min_replicas > 0
                ? Clock::Duration::zero()
                : Clock::Duration(options_.spin_max_hold)) {
  if (!redis_)
    throw Error(ErrorCode::kInvalidArgument, "LockClient needs a RedisClient");
}

LockCore::~LockCore() { StopWatchdog(); }

std::string LockCore::LockKey(std::string_view name) const {
  return options_.key_prefix + ":{" + std::string(name) + "}:lock";
}

std::string LockCore::LatchKey(std::string_view name) const {
  return options_.key_prefix + ":{" + std::string(name) + "}:countdown";
}

std::string LockCore::FenceKey(std::string_view name) const {
  return FenceCounterKey(options_.key_prefix, LockKey(name));
}

std::vector<std::string> LockCore::Keys(std::string_view name) const {
  const std::string tag = options_.key_prefix + ":{" + std::string(name) + "}:";
  std::string lock = tag + "lock";
  std::string fence = FenceCounterKey(options_.key_prefix, lock);
  return {std::move(lock), std::move(fence), tag + "queue", tag + "waiters"};
}

std::vector<std::string> LockCore::KeysWithLatch(
    std::string_view name, const std::string& request_id) const {
  std::vector<std::string> keys = Keys(name);
  keys.push_back(options_.key_prefix + ":{" + std::string(name) +
                 "}:latch:" + request_id);
  return keys;
}

// Globally unique: hold ids and waiter ids of different clients never
// collide, even when the clients share an owner token.
std::string LockCore::NextRequestId() {
  // The instance part keeps ids unique when a restarted process reuses its
  // client id while the previous run's reply latches still live.
  return options_.client_id + ":" + instance_ + ":" +
         std::to_string(next_request_.fetch_add(1, std::memory_order_relaxed) +
                        1);
}

std::string LockCore::DefaultOwner() const {
  return options_.client_id + ":" + std::to_string(ThreadNumber());
}

milliseconds LockCore::AttemptBudget(Clock::TimePoint deadline) const {
  // 0: the command timeout.
  if (deadline == Clock::TimePoint::max()) return milliseconds(0);
  return std::max(kMinAttemptBudget, std::chrono::duration_cast<milliseconds>(
                                         deadline - options_.clock->Now()));
}

Reply LockCore::EvalRetryOnce(const Script& script,
                              const std::vector<std::string>& keys,
                              const std::vector<std::string>& args,
                              Clock::TimePoint deadline, bool* may_have_run,
                              std::string* shortfall) {
  // Every script sent here is retry-safe (hold ids, waiter ids, owner+fence
  // checks, reply latches: see scripts.h), so one retry on a fresh
  // connection is safe and rides over a server restart or a killed
  // connection.
  const bool bounded = deadline != Clock::TimePoint::max();
  std::optional<ReplicaWait> wait;
  if (shortfall) wait = ReplicaWanted();
  for (int tries = 1;; ++tries) {
    try {
      Reply r = redis_->Eval(script, keys, args, AttemptBudget(deadline),
                             wait ? &*wait : nullptr);
      if (!reached_.load(std::memory_order_relaxed))
        reached_.store(true, std::memory_order_relaxed);
      if (!Acknowledged(wait)) {
        *shortfall =
            wait->acked < 0
                ? "WAIT failed: " + wait->error
                : "acknowledged by " + std::to_string(wait->acked) + " of " +
                      std::to_string(wait->replicas) + " replicas within " +
                      std::to_string(wait->timeout.count()) + " ms (WAIT)";
      }
      return r;
    } catch (const Error& e) {
      // Only a failure before sending or an error reply says the script
      // did not run (see internal::MayHaveRun).
      const bool connection = e.code() == ErrorCode::kRedisUnavailable ||
                              e.code() == ErrorCode::kRedisTimeout;
      if (may_have_run && internal::MayHaveRun(e)) *may_have_run = true;
      const bool retry =
          tries == 1 && connection &&
          (!bounded || options_.clock->Now() < deadline);  // not past it
      if (!retry) {
        if (observer()) observer()->OnError(e.code());
        throw;
      }
    }
  }
}

std::optional<ReplicaWait> LockCore::ReplicaWanted() const {
  if (options_.min_replicas == 0) return std::nullopt;
  return ReplicaWait{.replicas = options_.min_replicas,
                     .timeout = options_.replica_timeout};
}

bool LockCore::Acknowledged(const std::optional<ReplicaWait>& wait) {
  if (!wait || wait->acknowledged()) return true;
  replica_shortfalls_.fetch_add(1, std::memory_order_relaxed);
  if (observer()) observer()->OnError(ErrorCode::kRedisReplicas);
  return false;
}

Reply LockCore::ReleaseHold(const std::string& name, const std::string& owner,
                            int64_t fence, const std::string& hold_id,
                            Clock::TimePoint deadline, bool again,
                            const std::vector<WaitTable::LocalWaiter>& locals,
                            bool* acknowledged) {
  // The hold id is the release's request id: a retry after a lost reply
  // finds the first try's reply latched under it. A release of a hold
  // remembered after a fault (`again`) is a request of its own, named by
  // the grant it is sent to: the latched answer of an earlier release of the
  // same hold (a give-back that freed the lock) must not stand in for it —
  // a late try may have granted the hold since. Fence 0 sends "": the hold
  // id alone names the grant (ids are unique).
  const std::string request =
      again ? hold_id + "@" + std::to_string(fence) : hold_id;
  // A release (or hand-off) replicas did not acknowledge stands on the
  // master; a failover before they catch up brings the hold back until its
  // lease ends (a delay, not a second holder). Counted (EvalRetryOnce). A
  // give-back (`again`) sends no WAIT: it is bounded by kGiveUpBudget.
  std::string shortfall;
  std::vector<std::string> args = {
      owner, fence == 0 ? std::string() : std::to_string(fence), hold_id,
      std::to_string(options_.claim_window.count()),
      std::to_string(options_.retry_latch.count())};
  for (const WaitTable::LocalWaiter& w : locals) {
    args.push_back(w.waiter_id);
    args.push_back(w.hold_id);
    args.push_back(std::to_string(w.lease_ms));
  }
  bool retried = false;  // a first try may have run, its reply lost
  Reply r = EvalRetryOnce(ReleaseScript(), KeysWithLatch(name, request), args,
                          deadline, &retried, again ? nullptr : &shortfall);
  // A retry that found the first try's reply latched wrote nothing, so its
  // WAIT does not answer for the first try's writes (see scripts.h).
  if (acknowledged)
    *acknowledged = shortfall.empty() && !(retried && ReplicaWanted());
  return r;
}

LockCore::Attempt LockCore::TryOnce(
    const std::string& name, const std::string& owner, milliseconds lease,
    bool renew, const AcquireOptions& options, const std::string& waiter_id,
    const std::string& hold_id, bool fresh, bool enqueue,
    Clock::TimePoint deadline, bool* may_hold, bool spin_check) {
  Clock::TimePoint sent = options_.clock->Now();
  std::string shortfall;  // of replicas (min_replicas)
  const Reply r =
      waiter_id.empty()
          ? EvalRetryOnce(AcquireScript(), {LockKey(name), FenceKey(name)},
                          {owner, std::to_string(lease.count()), hold_id,
                           fresh ? "1" : "0"},
                          deadline, may_hold, &shortfall)
      : spin_check
          ? EvalRetryOnce(
                SpinClaimScript(), {LockKey(name)},
                {owner, std::to_string(lease.count()), hold_id, waiter_id},
                deadline, may_hold, &shortfall)
          : EvalRetryOnce(
                AcquireFairScript(), Keys(name),
                {owner, std::to_string(lease.count()), hold_id, waiter_id,
                 std::to_string(options_.presence_window.count()),
                 enqueue ? "1" : "0", fresh ? "1" : "0"},
                deadline, may_hold, &shortfall);
  CountTry(name, spin_check);
  Attempt out;
  if (Element(r, 0, "acquire").integer != 1) {
    if (!spin_check) contended_.fetch_add(1, std::memory_order_relaxed);
    out.ttl_ms = Element(r, 1, "acquire").integer;
    out.holder = Element(r, 2, "acquire").str;
    if (r.elements.size() > 6) {  // a fair refusal that queued
      out.queued = true;
      out.place = static_cast<int>(r.elements[3].integer);
      out.age_us = r.elements[4].integer;
      out.place_fence = r.elements[5].integer;
      out.handed_off = r.elements[6].integer == 1;
    }
    return out;
  }
  int64_t fence = Element(r, 1, "acquire").integer;
  if (!shortfall.empty()) {
    // A grant (or claim) the replicas may not have: a failover now could
    // lose it, or roll its fence back, while we held it — a second holder.
    // The call ends with an error, and its end gives the hold back (the
    // caller's give-back of a hold that may have been granted: may_hold),
    // before anything here uses it. A re-entry gives back only this hold.
    *may_hold = true;
    throw Error(ErrorCode::kRedisReplicas,
                "lock '" + name + "' was granted (fence " +
                    std::to_string(fence) + ") but " + shortfall +
                    "; given back");
  }
  return Granted(name, owner, lease, renew, options, hold_id, fence, sent);
}

LockCore::Attempt LockCore::Granted(const std::string& name,
                                    const std::string& owner,
                                    milliseconds lease, bool renew,
                                    const AcquireOptions& options,
                                    const std::string& hold_id, int64_t fence,
                                    Clock::TimePoint sent,
                                    std::optional<milliseconds> valid_for) {
  Attempt out;
  std::shared_ptr<HeldLock> held;
  LostCalls lost_calls;
  std::vector<std::string> orphans;  // stale holds of this very grant
  {
    std::lock_guard lock(mu_);
    if (auto it = held_.find({name, owner});
        it != held_.end() && fence < it->second->fence && !Lost(*it->second)) {
      // Another call sharing our owner token holds a newer grant (tokens
      // only grow), so this reply's grant has ended since, and our hold with
      // it: stale. Not granted — the caller tries again and re-enters the
      // newer grant, which is not lost. (Were Redis rolled back below the
      // newer grant, that one ends by its own validity: bounded.)
      contended_.fetch_add(1, std::memory_order_relaxed);
      Attempt stale;
      stale.ttl_ms = 0;  // try again at once
      stale.holder = owner;
      return stale;
    }
    if (auto it = orphans_.find({name, owner}); it != orphans_.end()) {
      for (const OrphanHold& orphan : it->second) {
        if (orphan.fence == fence || orphan.fence == 0)
          orphans.push_back(orphan.hold_id);
      }
      orphans_.erase(it);  // other grants' holds expired with their grant
    }
    std::shared_ptr<HeldLock>& entry = held_[{name, owner}];
    if (entry && entry->fence == fence && !entry->lost) {
      held = entry;  // reentrant: same grant
      ++held->local_holds;
    } else {
      if (entry) {  // an older grant is gone
        MarkLostLocked(entry, &lost_calls);
        Unschedule(entry);
      }
      held = std::make_shared<HeldLock>();
      held->name = name;
      held->key = LockKey(name);
      held->owner = owner;
      held->fence = fence;
      held->local_holds = 1;
      held_[{name, owner}] = held;
    }
    int64_t valid = ValidUntilNs(sent, valid_for.value_or(lease));
    if (valid > held->valid_until_ns.load()) held->valid_until_ns.store(valid);
    if (held->local_holds == 1) {  // a new grant: its mode is this call's
      held->renew = renew;
      held->lease = lease;
      if (renew) held->next_check = sent + lease / 3;
      if (renew && valid_for) {
        // A hand-off in full: its first renewal extends the claim window to
        // the lease, a third of the way into the validity left (a short
        // hold is released before it is due).
        const Clock::TimePoint now = options_.clock->Now();
        held->next_check = now + std::max<Clock::Duration>(FromNs(valid) - now,
                                                           Clock::Duration{}) /
                                     3;
      }
    } else if (!held->renew) {
      // Re-entry keeps an explicit lease explicit (never silently renewed);
      // the acquire script extended the key to `lease` if it was shorter.
      held->lease = std::max(held->lease, lease);
    }
    if (options.on_lost) held->on_lost.push_back(options.on_lost);
    Schedule(held);
  }
  out.granted = true;
  out.lease = Lease(shared_from_this(), std::move(held), hold_id,
                    options_.clock->Now());
  acquisitions_.fetch_add(1, std::memory_order_relaxed);
  DeferCallbacks(std::move(lost_calls));
  if (!orphans.empty()) {
    // Bounded: what Redis does not answer for in time waits for a next grant.
    ReleaseOrphans(name, owner, fence, std::move(orphans),
                   options_.clock->Now() + kGiveUpBudget);
  }
  return out;
}

void LockCore::CountTry(const std::string& name, bool spin_check) {
  if (spin_check) {
    spins_.fetch_add(1, std::memory_order_relaxed);
    if (observer()) observer()->OnSpin(name);
  } else {
    attempts_.fetch_add(1, std::memory_order_relaxed);
  }
}

LockCore::Attempt LockCore::ConfirmHandOff(
    const std::string& name, const std::string& owner, milliseconds lease,
    bool renew, const AcquireOptions& options, const std::string& hold_id,
    Clock::TimePoint checked, Clock::TimePoint deadline, bool spin_check) {
  // Read-only: a retry is harmless, and a failure is the caller's outage.
  // A timed wait's read keeps its deadline as an attempt does.
  const Reply r = redis_->Execute(HandOffConfirmCommand(LockKey(name), hold_id),
                                  AttemptBudget(deadline));
  if (r.type == Reply::Type::kError)
    throw Error(ErrorReplyCode(r.str, ErrorCode::kRedisProtocol),
                "HMGET of lock '" + name + "': " + r.str);
  CountTry(name, spin_check);
  const auto field = [&](size_t i) -> const Reply* {
    if (r.type != Reply::Type::kArray || i >= r.elements.size() ||
        r.elements[i].type == Reply::Type::kNil)
      return nullptr;
    return &r.elements[i];
  };
  Attempt out;
  const Reply* holder = field(0);
  if (holder == nullptr) return out;  // free: a full attempt takes it
  out.holder = holder->str;
  out.ttl_ms = -1;  // not read (as a spin check's)
  const std::optional<long long> fence =
      field(1) ? ParseInteger(field(1)->str) : std::nullopt;
  // Not a token: the full attempt decides.
  if (out.holder != owner || field(2) == nullptr || !fence) return out;
  // Ours, with our hold: a hand-off in full, made after `checked` with the
  // claim window (its field) as its lease. (A late try of ours that added
  // the hold set our lease, and ran after `checked` too.)
  milliseconds window = lease;
  if (const Reply* claim = field(3)) {
    window = std::min(window, milliseconds(std::max(
                                  0LL, ParseInteger(claim->str).value_or(0))));
  }
  // Too little of it left to be worth holding (a waiter that woke late):
  // the full attempt re-enters it with our own lease instead.
  const Clock::TimePoint now = options_.clock->Now();
  if (window <= milliseconds(0) ||
      FromNs(ValidUntilNs(checked, window)) - now < window / 4)
    return out;
  return Granted(name, owner, lease, renew, options, hold_id, *fence, checked,
                 window);
}

void LockCore::RememberOrphan(const std::string& name, const std::string& owner,
                              int64_t fence, const std::string& hold_id) {
  constexpr size_t kMaxOrphans = 4096;  // names x owners remembered
  constexpr size_t kMaxHolds = 64;      // per name and owner
  std::lock_guard lock(mu_);
  auto it = orphans_.find({name, owner});
  if (it == orphans_.end()) {
    if (orphans_.size() >= kMaxOrphans) orphans_.erase(orphans_.begin());
    it = orphans_.try_emplace({name, owner}).first;
  }
  std::vector<OrphanHold>& holds = it->second;
  for (const OrphanHold& h : holds) {
    if (h.hold_id == hold_id) return;  // remembered already
  }
  if (holds.size() >= kMaxHolds) {
    // Make room: the oldest hold that may never have been granted (a lost
    // acquire, fence 0) goes before any failed release of a known grant —
    // that one is surely in the lock.
    auto victim =
        std::find_if(holds.begin(), holds.end(),
                     [](const OrphanHold& h) { return h.fence == 0; });
    holds.erase(victim != holds.end() ? victim : holds.begin());
  }
  holds.push_back({fence, hold_id});
}

void LockCore::ReleaseOrphans(const std::string& name, const std::string& owner,
                              int64_t fence, std::vector<std::string> hold_ids,
                              Clock::TimePoint deadline) noexcept {
  // On a re-grant (`fence` is the new grant's), the hold just granted keeps
  // the lock ours, so this only drops the stale holds' fields; a hold that
  // is not in the grant — already gone, or never granted — is a no-op. On a
  // give-up (`fence` 0) a hold that was granted may free the lock: it is
  // handed on and announced. If Redis fails again, or the deadline passes,
  // the rest wait for the next re-grant. So does every hold a give-up sent,
  // answered or not: another try of the call may still be queued on a
  // stalled server and grant the hold again after this (see lockcore.md,
  // Limits), and the owner's next grants of the lock would then re-enter it
  // for ever. Releasing it there again is a no-op if it never came back.
  std::vector<std::string> keep;
  size_t i = 0;
  try {
    for (; i < hold_ids.size(); ++i) {
      if (deadline != Clock::TimePoint::max() &&
          options_.clock->Now() >= deadline)
        break;
      Reply r = ReleaseHold(name, owner, fence, hold_ids[i], deadline,
                            /*again=*/true);
      const long long status = Element(r, 0, "release").integer;
      if (status == 1 || status == 3)
        Freed(name, owner, fence, UnlockCause::kRelease, r, 1);
      if (fence == 0) keep.push_back(hold_ids[i]);
    }
  } catch (...) {
  }
  for (; i < hold_ids.size(); ++i) keep.push_back(std::move(hold_ids[i]));
  for (const std::string& hold_id : keep) {
    try {
      RememberOrphan(name, owner, fence, hold_id);
    } catch (...) {  // allocation failure: it expires with its lease
    }
  }
}

void LockCore::GiveBackLostHolds(const std::string& name,
                                 const std::string& owner,
                                 const std::string& hold_id) noexcept {
  // Earlier calls' holds were given back by their own give-ups and wait
  // (remembered) for the owner's next grant: only this call's is sent now.
  std::vector<std::string> lost;
  try {
    lost.push_back(hold_id);
  } catch (...) {  // allocation failure: the hold expires with its lease
    return;
  }
  ReleaseOrphans(name, owner, 0, std::move(lost),
                 options_.clock->Now() + kGiveUpBudget);
}

AcquireResult LockCore::AcquireUntil(std::string_view name_view,
                                     Clock::TimePoint deadline, bool wait,
                                     const AcquireOptions& options) {
  ValidateName(name_view);
  if (options.lease && *options.lease <= milliseconds(0)) {
    throw Error(ErrorCode::kInvalidArgument, "lease must be positive");
  }
  const std::string name(name_view);
  const std::string owner =
      options.owner.empty() ? DefaultOwner() : options.owner;
  const milliseconds lease = options.lease.value_or(options_.default_lease);
  const bool renew = !options.lease.has_value();
  const bool fair = options.fair.value_or(options_.fair);
  // A wait whose deadline has already passed is one try: it never queues.
  if (wait && deadline != Clock::TimePoint::max() &&
      deadline <= options_.clock->Now()) {
    wait = false;
  }
  // Fair mode queues under a wait id unique to this call; a try-only attempt
  // never queues. One hold id for every try of this call (see TryOnce).
  // A call whose watchdog renews its lease, with no replica acknowledgement
  // to wait for, is handed the lock in full: its waiter id "g:<hold id>"
  // tells the releasing script which hold to grant (scripts.h,
  // ReleaseScript), and a read confirms it (ConfirmHandOff). Only under
  // the calling thread's own owner token (given or not): no other call can
  // re-enter such a grant before its grantee confirms it (another token may be
  // shared, and a call sharing it would re-enter the grant of a grantee that
  // died, holding the lock for a whole lease instead of the claim window). Any
  // other call queues as "w:<id>" and claims its hand-off.
  const bool in_full =
      fair && renew && options_.min_replicas == 0 && owner == DefaultOwner();
  const std::string request_id = NextRequestId();
  const std::string hold_id = in_full ? request_id : NextRequestId();
  const std::string waiter_id = !fair     ? std::string()
                                : in_full ? "g:" + request_id
                                          : "w:" + request_id;
  // True once a try may have granted hold_id unseen.
  bool may_hold = false;
  // The calling thread's own token (no AcquireOptions::owner) is this
  // client's alone: when the client holds none of the lock under it, a grant
  // Redis has under that token is one a rollback revived (or one given up
  // on), which the acquire scripts replace by a new grant (scripts.h,
  // "fresh"). Decided once per call: the thread does nothing else meanwhile.
  const bool fresh = options.owner.empty() && !HoldsHere(name, owner);

  AcquireResult result;
  bool contended = false;
  // Tells the observer how the call ended, whichever way it returns.
  struct Report {
    LockCore* core;
    std::string_view name;
    Clock::TimePoint start;
    const AcquireResult& result;
    const bool& contended;
    ~Report() {
      if (core->observer() == nullptr || std::uncaught_exceptions() > 0) return;
      core->observer()->OnAcquire(name, result.status,
                                  core->options_.clock->Now() - start,
                                  result.attempts, contended);
    }
  } report{this, name_view, options_.clock->Now(), result, contended};
  auto finish = [&](Attempt& a) {
    ++result.attempts;
    if (a.granted) {
      result.status = AcquireStatus::kAcquired;
      result.lease = std::move(a.lease);
      result.holder.clear();
      result.last_error.clear();
      return true;
    }
    contended = true;
    result.holder = std::move(a.holder);
    result.holder_ttl = milliseconds(a.ttl_ms);
    return false;
  };

  if (!wait) {
    Attempt a;
    try {
      a = TryOnce(name, owner, lease, renew, options, waiter_id, hold_id, fresh,
                  false, Clock::TimePoint::max(), &may_hold);
    } catch (const Error&) {
      if (may_hold) GiveBackLostHolds(name, owner, hold_id);
      throw;
    }
    if (!finish(a)) result.status = AcquireStatus::kTimedOut;
    return result;
  }

  // Listen first: the slot is registered before the first attempt.
  WaitTable::Slot slot;
  slot.waiter_id = waiter_id;
  if (fair) {  // what a release in this process needs for a direct grant
    slot.hold_id = hold_id;
    slot.lease_ms = lease.count();
  }
  // Before the slot: destroyed after the slot leaves (Leave, below).
  Watching watching(this, name);
  waits_.Register(name, &slot);
  waiting_.fetch_add(1, std::memory_order_relaxed);
  if (observer()) observer()->OnWaiting(+1);
  // A wake-up (kLocal/kEvent) not yet followed by an attempt that reached
  // Redis: nothing used it. A call that leaves hands it to the next local
  // waiter (through Unregister), instead of that waiter sleeping out its
  // bound for a free lock. A call riding an outage out keeps it through its
  // back-off parks and tries again: passed on at once, every local waiter
  // would fail in turn, a busy loop for as long as Redis is down.
  WakeCause unused_wake = WakeCause::kNone;
  struct Leave {
    LockCore* core;
    const std::string& name;
    const std::string& owner;
    const std::string& hold_id;
    const bool& may_hold;
    const WakeCause& unused_wake;
    WaitTable::Slot* slot;
    const AcquireResult& result;
    ~Leave() {
      // First: no refresh of our entry starts after this (one in flight
      // cannot make it again: PresenceScript never adds an entry).
      if (!slot->waiter_id.empty()) core->DropPresence(slot->waiter_id);
      bool acquired = result.status == AcquireStatus::kAcquired;
      // A fair waiter that gives up must leave the queue (and pass on a
      // grant that may have reached it since its last attempt). Its abandon
      // script also gives back our hold if a grant carries it: a direct grant
      // from a release in this process that raced our leaving.
      bool unanswered = false;
      if (!acquired && !slot->waiter_id.empty())
        unanswered = !core->Abandon(name, slot->waiter_id, hold_id);
      // Out of the table: no direct grant reaches us after this (the
      // releaser gives back one that finds us gone: DeliverDirectGrant).
      const bool granted = core->waits_.Unregister(name, slot, unused_wake);
      // Our hold may still be in the lock, nobody renewing it (it would block
      // the lock for its whole lease): a try whose reply a Redis fault lost
      // may have granted it, and so may a direct grant the abandon could not
      // give back (unanswered) or that reached the slot after it (a late try
      // of ours queued us again). Give it back — a no-op if it is gone — or
      // remember it for the owner's next grant.
      if (!acquired && (may_hold || unanswered || granted))
        core->GiveBackLostHolds(name, owner, hold_id);
      core->waiting_.fetch_sub(1, std::memory_order_relaxed);
      if (core->observer()) core->observer()->OnWaiting(-1);
    }
  } leave{this, name, owner, hold_id, may_hold, unused_wake, &slot, result};

  bool in_outage = false;
  Clock::TimePoint outage_since;
  milliseconds backoff(0);
  // A hand-off in full's read (ConfirmHandOff), once we are queued: its
  // validity runs from the latest send that found us still queued — our
  // refused attempt (KeepPresence) or the watchdog's confirmed check, as
  // the presence record keeps them. None before (or without the record):
  // the caller makes its usual attempt.
  auto confirm = [&](bool spin_check) -> std::optional<Attempt> {
    if (!in_full) return std::nullopt;
    const Clock::TimePoint checked =
        PresenceChecked(waiter_id, options_.clock->Now()).first;
    if (checked == Clock::TimePoint::min()) return std::nullopt;
    return ConfirmHandOff(name, owner, lease, renew, options, hold_id, checked,
                          deadline, spin_check);
  };
  // Whether the wait ran out at `now` (then counted, and the result says so).
  auto timed_out = [&](Clock::TimePoint now) {
    if (now < deadline) return false;
    timeouts_.fetch_add(1, std::memory_order_relaxed);
    result.status = AcquireStatus::kTimedOut;
    return true;
  };
  for (;;) {
    Attempt a;
    bool failed = false;
    const Clock::TimePoint attempt_sent = options_.clock->Now();
    try {
      a = TryOnce(name, owner, lease, renew, options, waiter_id, hold_id, fresh,
                  true, deadline, &may_hold);
      unused_wake = WakeCause::kNone;
      in_outage = false;
      backoff = milliseconds(0);
    } catch (const Error& e) {
      if (!IsOutage(e.code()) || !reached_.load(std::memory_order_relaxed))
        throw;
      result.last_error = e.what();
      const Clock::TimePoint now = options_.clock->Now();
      if (!in_outage) {
        in_outage = true;
        outage_since = now;
      }
      // Out of time during an outage: a timeout, with its cause.
      if (timed_out(now)) return result;
      if (now - outage_since >= options_.outage_grace) throw;
      failed = true;
    }
    if (!failed) {
      if (finish(a)) return result;
      RunHook(name);
    }
    if (options.stop.stop_requested()) {
      cancellations_.fetch_add(1, std::memory_order_relaxed);
      result.status = AcquireStatus::kCancelled;
      return result;
    }
    Clock::TimePoint now = options_.clock->Now();
    if (timed_out(now)) return result;
    // Queued: from now on the watchdog refreshes our queue entry and checks
    // for us (PresenceScript), for all parked waiters of this client in one
    // pipelined round trip, and wakes us (kChecked) when we must try:
    // handed the lock (its event lost or late), dropped from the queue, the
    // lock free with us first, or held under our owner token. Our park keeps
    // its bound (below), but when it ends we park on without a round trip of
    // our own if the watchdog's check is recent (see the loop around
    // ParkSpinning).
    const bool kept = fair && !failed && a.queued &&
                      KeepPresence(name, owner, waiter_id, attempt_sent);
    // Bound: remaining wait, the holder's remaining TTL (+1ms so the key has
    // surely expired on the server), and the configured cap.
    Clock::Duration bound =
        std::min<Clock::Duration>(deadline - now, options_.park_cap);
    const Clock::TimePoint ttl_at =
        a.ttl_ms >= 0 ? attempt_sent + milliseconds(a.ttl_ms + 1)
                      : Clock::TimePoint::max();
    if (failed) {
      // Back off through the outage: 50 ms doubling to 1 s, and never past
      // the end of the grace period (then one more try decides).
      backoff = std::clamp(backoff * 2, milliseconds(50), milliseconds(1000));
      bound = std::min<Clock::Duration>(bound, backoff);
      outage_waits_.fetch_add(1, std::memory_order_relaxed);
    } else if (a.ttl_ms >= 0) {
      bound = std::min<Clock::Duration>(bound, milliseconds(a.ttl_ms + 1));
    }
    // A queued waiter's place must be refreshed before it lapses (by the
    // watchdog, or by our next attempt).
    if (fair)
      bound = std::min<Clock::Duration>(bound, options_.presence_window / 3);
    DirectGrant grant;
    Attempt won;  // by a spin check
    SpinAdvisor::Plan plan;
    if (fair && !failed && spin_.enabled()) {
      waits_.SetPlace(&slot, a.place, a.place_fence);
      plan = PlanAfterRefusal(name, a);
    }
    watching.Begin();
    WakeCause last_wake;
    uint64_t confirmed = 0;  // the watchdog's confirmed checks, before a park
    if (kept) confirmed = PresenceChecked(waiter_id, now).second;
    for (;;) {
      last_wake = ParkSpinning(
          name, &slot, bound, options.stop, &grant, plan, owner,
          [&] {
            std::optional<Attempt> read = confirm(/*spin_check=*/true);
            if (!read)
              return TryOnce(name, owner, lease, renew, options, waiter_id,
                             hold_id, fresh, false, deadline, &may_hold,
                             /*spin_check=*/true);
            return std::move(*read);
          },
          &won);
      if (last_wake != WakeCause::kBound || !kept) break;
      // Park on, without a round trip, while the watchdog keeps checking
      // for us: a check it made during this park, and one within the last
      // interval — so our place is checked at least every interval, by it
      // or by our own attempt, as before. A watchdog that fell behind (or a
      // clock that stands still) confirms none: we try. Not past the
      // deadline (the last attempt decides) or the holder's TTL.
      const Clock::TimePoint at = options_.clock->Now();
      const auto [checked, count] = PresenceChecked(waiter_id, at);
      const Clock::TimePoint next = checked + PresenceInterval();
      if (at >= deadline || at >= ttl_at || count == confirmed || next <= at)
        break;
      confirmed = count;
      bound = std::min<Clock::Duration>(
          {deadline - at, next - at, PresenceInterval(),
           ttl_at == Clock::TimePoint::max() ? next - at : ttl_at - at});
      plan = {};  // the refusal that planned a spin is old news
    }
    if (won.granted) {
      wake_spin_.fetch_add(1, std::memory_order_relaxed);
      if (observer()) observer()->OnWakeup(name, lockfleet::WakeCause::kSpin);
      finish(won);
      return result;
    }
    if (last_wake == WakeCause::kGranted) {
      // A release in this process granted us the lock in full (its script
      // checked that we were the first live waiter): ours without a claim.
      wake_local_.fetch_add(1, std::memory_order_relaxed);
      direct_grants_.fetch_add(1, std::memory_order_relaxed);
      if (observer()) observer()->OnWakeup(name, lockfleet::WakeCause::kLocal);
      Attempt direct = Granted(name, owner, lease, renew, options, hold_id,
                               grant.fence, grant.sent);
      if (finish(direct)) return result;
      continue;  // stale (see Granted): the next try re-enters the newer one
    }
    // A spin check gave way to a full attempt (the lock free or ours, Redis
    // out): no wake-up to count. Not past the deadline: the check was an
    // attempt's worth of it.
    if (last_wake == WakeCause::kNone) {
      if (timed_out(options_.clock->Now())) return result;
      continue;
    }
    if (last_wake == WakeCause::kLocal || last_wake == WakeCause::kEvent)
      unused_wake = last_wake;
    if (observer() && last_wake != WakeCause::kCancelled) {
      observer()->OnWakeup(name, last_wake == WakeCause::kLocal
                                     ? lockfleet::WakeCause::kLocal
                                 : last_wake == WakeCause::kEvent
                                     ? lockfleet::WakeCause::kEvent
                                     : lockfleet::WakeCause::kBound);
    }
    switch (last_wake) {
      case WakeCause::kLocal:
        wake_local_.fetch_add(1, std::memory_order_relaxed);
        break;
      case WakeCause::kEvent:
        wake_event_.fetch_add(1, std::memory_order_relaxed);
        break;
      case WakeCause::kCancelled:
        cancellations_.fetch_add(1, std::memory_order_relaxed);
        result.status = AcquireStatus::kCancelled;
        return result;
      default:
        wake_bound_.fetch_add(1, std::memory_order_relaxed);
    }
    if (grant.handed &&
        (last_wake == WakeCause::kLocal || last_wake == WakeCause::kEvent ||
         last_wake == WakeCause::kChecked)) {
      // The wake named us as a hand-off's grantee, or the watchdog found us
      // off the queue (handed the lock, its event lost or late — or dropped
      // as lapsed): a read confirms a grant in full. If it does not (free,
      // a hand-off to claim from an older client, a wrong hint, Redis out),
      // the full attempt follows. The watchdog's other wake (the lock free
      // with us first, or held under our owner token) goes straight to it.
      std::optional<Attempt> handed;
      try {
        handed = confirm(/*spin_check=*/false);
      } catch (const Error& e) {
        if (!IsOutage(e.code()) || !reached_.load(std::memory_order_relaxed))
          throw;
        result.last_error = e.what();
        if (observer()) observer()->OnError(e.code());
      }
      if (handed && handed->granted) {
        unused_wake = WakeCause::kNone;  // used: it got us the lock
        finish(*handed);
        return result;
      }
      // The read was our last look if the deadline passed meanwhile (it is
      // bounded as an attempt is: another attempt would overrun it twice).
      if (timed_out(options_.clock->Now())) return result;
    }
  }
}

SpinAdvisor::Plan LockCore::PlanAfterRefusal(const std::string& name,
                                             const Attempt& refused) {
  // Only the head spins, and not behind a holder of this process: its
  // release grants us directly (DeliverDirectGrant), no check needed. The
  // current grant was made age_us ago (Redis's clock) — its hold began then,
  // or, for a claimed hand-off, at its claim a little later — or a hand-off
  // waits for its claim (-2); -1: unknown, no plan.
  if (refused.place != 1 || refused.age_us == -1 || OwnedHere(refused.holder))
    return {};
  const Clock::TimePoint now = options_.clock->Now();
  if (refused.age_us == -2)
    return spin_.PlanFor(name, now, SpinAdvisor::Anchor::kPending, now);
  return spin_.PlanFor(name, now - std::chrono::microseconds(refused.age_us),
                       refused.handed_off ? SpinAdvisor::Anchor::kHandedOff
                                          : SpinAdvisor::Anchor::kClaimed,
                       now);
}

template <typename Check>
WakeCause LockCore::ParkSpinning(const std::string& name, WaitTable::Slot* slot,
                                 Clock::Duration bound,
                                 const std::stop_token& stop,
                                 DirectGrant* grant, SpinAdvisor::Plan plan,
                                 const std::string& owner, Check&& check,
                                 Attempt* won) {
  const Clock::Duration zero = Clock::Duration::zero();
  const Clock::TimePoint park_until = options_.clock->Now() + bound;
  int checks = 0;
  Clock::TimePoint next_check = plan.first_check;
  Clock::TimePoint last_sent;
  for (;;) {
    const Clock::TimePoint now = options_.clock->Now();
    Clock::Duration wait = std::max(zero, park_until - now);
    const Clock::Duration to_check = std::max(zero, next_check - now);
    const bool check_due = plan.spin && to_check < wait;
    if (check_due) wait = to_check;
    const WakeCause wake = waits_.Park(slot, wait, stop, grant);
    if (wake == WakeCause::kPromoted) {
      // The hand-offs we saw say we are the head now, behind the grant just
      // made. (A slot is promoted only from place 2 on: nothing was planned.)
      const Clock::TimePoint at = options_.clock->Now();
      plan = spin_.PlanFor(name, at, SpinAdvisor::Anchor::kPromoted, at);
      next_check = plan.first_check;
      continue;
    }
    if (wake != WakeCause::kBound || !check_due) {
      if (plan.spin &&
          (wake == WakeCause::kLocal || wake == WakeCause::kEvent ||
           wake == WakeCause::kGranted)) {
        // The wake came first: the release was before it.
        spin_.OnOutcome(name, plan, checks, last_sent, 0,
                        options_.clock->Now());
      }
      return wake;
    }
    ++checks;
    last_sent = options_.clock->Now();
    try {
      *won = check();
    } catch (const Error& e) {
      if (!IsOutage(e.code()) || !reached_.load(std::memory_order_relaxed))
        throw;
      return WakeCause::kNone;  // the full attempt rides the outage out
    }
    if (won->granted) {
      spin_.OnOutcome(name, plan, checks, last_sent, checks,
                      Clock::TimePoint::max());
      return WakeCause::kNone;
    }
    // Free, or granted to our owner token (a check whose reply was lost
    // claimed it): the full attempt takes or re-enters it now.
    if (won->holder.empty() || won->holder == owner) return WakeCause::kNone;
    if (checks >= plan.checks) {
      spin_.OnOutcome(name, plan, checks, last_sent, 0,
                      Clock::TimePoint::max());
      plan.spin = false;
    } else {
      next_check = options_.clock->Now() + plan.interval;
    }
  }
}

ReleaseStatus LockCore::Release(const std::shared_ptr<HeldLock>& held,
                                const std::string& hold_id,
                                Clock::TimePoint acquired_at) {
  ReleaseStatus status = ReleaseImpl(held, hold_id);
  // How long this process holds the lock: what a spinning head expects.
  if (status == ReleaseStatus::kReleased)
    spin_.OnHold(held->name, options_.clock->Now() - acquired_at);
  if (observer())
    observer()->OnRelease(held->name, status,
                          options_.clock->Now() - acquired_at);
  return status;
}

ReleaseStatus LockCore::ReleaseImpl(const std::shared_ptr<HeldLock>& held,
                                    const std::string& hold_id) {
  {
    std::lock_guard lock(mu_);
    if (--held->local_holds <= 0) {
      held->released = true;  // the watchdog ignores it from now on
      Forget(held);
    }
  }
  // This client's fair waiters on the lock: if the first live one in the
  // queue is among them, the script grants it the lock in full (direct).
  // Not looked up when no call of this client waits at all (most releases):
  // a waiter that registers meanwhile is served as any other waiter is, by
  // the pending grant and its wake.
  const std::vector<WaitTable::LocalWaiter> locals =
      waiting_.load(std::memory_order_relaxed) == 0
          ? std::vector<WaitTable::LocalWaiter>{}
          : waits_.LocalWaiters(held->name, kMostLocalWaiters);
  const Clock::TimePoint sent = options_.clock->Now();
  bool acknowledged = true;
  Reply r;
  try {
    r = ReleaseHold(held->name, held->owner, held->fence, hold_id,
                    Clock::TimePoint::max(), false, locals, &acknowledged);
  } catch (const Error&) {
    release_failures_.fetch_add(1, std::memory_order_relaxed);
    RememberOrphan(held->name, held->owner, held->fence, hold_id);
    throw;
  }
  const long long status = Element(r, 0, "release").integer;
  switch (status) {
    case 1:
    case 3:  // freed and handed to the first queued waiter
      releases_.fetch_add(1, std::memory_order_relaxed);
      Freed(held->name, held->owner, held->fence, UnlockCause::kRelease, r, 1);
      return ReleaseStatus::kReleased;
    case 4:  // freed and granted to a waiter of ours
      releases_.fetch_add(1, std::memory_order_relaxed);
      DeliverDirectGrant(held->name, r, sent, acknowledged);
      return ReleaseStatus::kReleased;
    case 2:
      releases_.fetch_add(1, std::memory_order_relaxed);
      return ReleaseStatus::kStillHeld;
    case 0:
      releases_not_held_.fetch_add(1, std::memory_order_relaxed);
      return ReleaseStatus::kNotHeld;
    default:
      releases_not_owner_.fetch_add(1, std::memory_order_relaxed);
      return ReleaseStatus::kNotOwner;
  }
}

void LockCore::DeliverDirectGrant(const std::string& name, const Reply& reply,
                                  Clock::TimePoint sent, bool acknowledged) {
  const std::string& waiter_id = Element(reply, 1, "release").str;
  const std::string& next_owner = Element(reply, 2, "release").str;
  const int64_t fence = Element(reply, 3, "release").integer;
  const std::string& hold_id = Element(reply, 4, "release").str;
  // No unlock event: the lock is not free, and no other process waits for
  // this grant. Unacknowledged by the replicas, the grant is not handed over:
  // the waiter's next try re-enters it and waits for them itself (or gives
  // it back).
  RunHook(name, Hook::kBeforeDirectGrant);
  if (SawHandOff(name, waiter_id,
                 acknowledged ? WakeCause::kGranted : WakeCause::kLocal,
                 {.fence = fence, .sent = sent}, fence, next_owner)) {
    return;
  }
  // The waiter's call has returned (it leaves the table last). With the lock
  // — a try of its own found this grant and re-entered it, and filed it in
  // held_ before returning — or without it; then its abandon script most
  // likely gave the hold back, but not if Redis did not answer it, nor if a
  // late try of the call queued it again after the abandon. So unless this
  // process holds the grant, the hold goes back here: a no-op if it is gone
  // already, and never another grant's hold (hold ids are unique).
  {
    std::lock_guard lock(mu_);
    auto it = held_.find({name, next_owner});
    if (it != held_.end() && it->second->fence == fence) return;
  }
  GiveBackLostHolds(name, next_owner, hold_id);
}

void LockCore::Freed(const std::string& name, const std::string& owner,
                     int64_t fence, UnlockCause cause, const Reply& handoff,
                     size_t handoff_at) {
  UnlockEvent event;
  if (handoff.type == Reply::Type::kArray &&
      handoff.elements.size() >= handoff_at + 3 &&
      handoff.elements[0].integer == 3) {
    event.next_waiter = handoff.elements[handoff_at].str;
    event.next_owner = handoff.elements[handoff_at + 1].str;
    event.next_fence = handoff.elements[handoff_at + 2].integer;
  }
  if (event.next_waiter.empty()) {
    waits_.WakeOne(name, WakeCause::kLocal);
  } else {
    SawHandOff(name, event.next_waiter, WakeCause::kLocal, {},  // if ours
               event.next_fence, event.next_owner);
  }
  if (!options_.publisher) return;
  event.lock = name;
  event.owner = owner;
  event.fence = fence;
  event.cause = cause;
  Publish(event);
}

void LockCore::Publish(UnlockEvent& event) {
  if (!options_.publisher) return;
  event.client_id = options_.client_id;
  event.released_at_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count();
  options_.publisher->Publish(event);
  events_published_.fetch_add(1, std::memory_order_relaxed);
}

bool LockCore::SawHandOff(const std::string& name, const std::string& waiter_id,
                          WakeCause cause, const DirectGrant& grant,
                          int64_t fence, const std::string& next_owner) {
  return waits_.HandedOff(name, waiter_id, cause, grant, fence,
                          /*promote=*/!OwnedHere(next_owner));
}

bool LockCore::HoldsHere(const std::string& name, const std::string& owner) {
  std::lock_guard lock(mu_);
  const auto it = held_.find({name, owner});
  return it != held_.end() && it->second->local_holds > 0 &&
         !it->second->released && !Lost(*it->second);
}

bool LockCore::OwnedHere(const std::string& owner) const {
  // Default owner tokens are "<client id>:<thread>" (DefaultOwner).
  const std::string& id = options_.client_id;
  return owner.size() > id.size() && owner.starts_with(id) &&
         owner[id.size()] == ':';
}

bool LockCore::Abandon(const std::string& name, const std::string& waiter_id,
                       const std::string& hold_id) noexcept {
  try {
    Reply r =
        EvalRetryOnce(AbandonScript(), KeysWithLatch(name, waiter_id),
                      {waiter_id, std::to_string(options_.claim_window.count()),
                       std::to_string(options_.retry_latch.count()), hold_id},
                      options_.clock->Now() + kGiveUpBudget);
    const long long status = Element(r, 0, "abandon").integer;
    if (status == 1 || status == 3) {
      // A grant had reached us: it is passed on (or the lock freed).
      Freed(name, "", 0, UnlockCause::kRelease, r, 1);
    }
    return true;
  } catch (...) {
    // Redis unreachable or slow (counted): our queue entry lapses after
    // presence_window, and a grant pending to us after claim_window; a
    // direct grant's hold the caller gives back (GiveBackLostHolds).
    return false;
  }
}

void LockCore::Forget(const std::shared_ptr<HeldLock>& held) {
  Unschedule(held);
  if (!held->expiry_key.empty()) {
    auto it = permits_.find(held->owner);
    if (it == permits_.end() || it->second != held) return;
    permits_.erase(it);
    if (held->set_kind == SetKind::kRead || held->set_kind == SetKind::kWrite) {
      auto owned = rw_owned_.find({held->name, held->set_owner});
      if (owned != rw_owned_.end() && --owned->second <= 0)
        rw_owned_.erase(owned);
    }
    return;
  }
  auto it = held_.find({held->name, held->owner});
  if (it != held_.end() && it->second == held) held_.erase(it);
}

void LockCore::ObserveHeld(const HeldLock& held, int sign) {
  switch (held.set_kind) {
    case SetKind::kPermits:
      observer()->OnPermitsHeld(held.name, sign * held.fence);
      break;
    case SetKind::kRead:
    case SetKind::kWrite:
      observer()->OnRwHeld(held.name, RwModeOf(held.set_kind), sign);
      break;
    case SetKind::kNone:
      break;
  }
}

void LockCore::ObserveLost(const HeldLock& held) {
  switch (held.set_kind) {
    case SetKind::kPermits:
      observer()->OnPermitsLost(held.name);
      break;
    case SetKind::kRead:
    case SetKind::kWrite:
      observer()->OnRwLost(held.name, RwModeOf(held.set_kind));
      break;
    case SetKind::kNone:
      observer()->OnLeaseLost(held.name);
      return;
  }
  ObserveHeld(held, -1);
}

void LockCore::DeferCallbacks(LostCalls calls) {
  if (calls.empty()) return;
  {
    std::lock_guard lock(mu_);
    for (auto& c : calls) deferred_calls_.push_back(std::move(c));
  }
  watchdog_cv_.notify_one();
}

void LockCore::MarkLostLocked(const std::shared_ptr<HeldLock>& held,
                              LostCalls* calls) {
  if (held->lost.exchange(true)) return;
  leases_lost_.fetch_add(1, std::memory_order_relaxed);
  if (observer()) ObserveLost(*held);
  calls->push_back(held);  // stop token and callbacks: on the watchdog thread
}

void LockCore::SetUnlockInterest(std::shared_ptr<UnlockInterest> interest) {
  std::lock_guard lock(interest_mu_);
  interest_ = std::move(interest);
}

void LockCore::Watching::Begin() {
  if (begun_) return;
  begun_ = true;
  {
    std::lock_guard lock(core_->interest_mu_);
    interest_ = core_->interest_;
  }
  if (interest_) interest_->Watch(name_);
}

LockCore::Watching::~Watching() {
  if (interest_) interest_->Unwatch(name_);
}

LockInfo LockCore::Inspect(std::string_view name) {
  ValidateName(name);
  Reply r = EvalRetryOnce(InspectScript(), Keys(name), {});
  LockInfo info;
  info.owner = Element(r, 0, "inspect").str;
  info.locked = !info.owner.empty();
  info.hold_count = Element(r, 1, "inspect").integer;
  info.fence = Element(r, 2, "inspect").integer;
  info.ttl = milliseconds(
      info.locked ? std::max<long long>(0, Element(r, 3, "inspect").integer)
                  : 0);
  info.last_fence = Element(r, 4, "inspect").integer;
  info.pending_waiter = Element(r, 5, "inspect").str;
  for (size_t i = 6; i < r.elements.size(); ++i) {
    const Reply& w = r.elements[i];
    QueuedWaiter q;
    q.waiter_id = Element(w, 0, "inspect").str;
    q.owner = Element(w, 1, "inspect").str;
    q.presence_left = milliseconds(Element(w, 2, "inspect").integer);
    info.queue.push_back(std::move(q));
  }
  return info;
}

ForceUnlockResult LockCore::ForceUnlock(std::string_view name_view,
                                        const ForceUnlockOptions& options) {
  ValidateName(name_view);
  if (options.expect_fence < 0)
    throw Error(ErrorCode::kInvalidArgument, "expect_fence must be >= 0");
  const std::string name(name_view);
  const std::string request = "f:" + NextRequestId();
  std::string shortfall;  // counted only: the grant is gone on the primary
  Reply r =
      EvalRetryOnce(ForceUnlockScript(), KeysWithLatch(name, request),
                    {std::to_string(options_.claim_window.count()),
                     options.expect_owner, std::to_string(options.expect_fence),
                     std::to_string(options_.retry_latch.count())},
                    Clock::TimePoint::max(), nullptr, &shortfall);
  ForceUnlockResult out;
  const long long status = Element(r, 0, "force-unlock").integer;
  if (status == 0) return out;
  out.previous_owner = Element(r, 1, "force-unlock").str;
  out.previous_fence = Element(r, 2, "force-unlock").integer;
  if (status < 0) {
    out.mismatch = true;
    return out;
  }
  out.was_locked = true;
  force_unlocks_.fetch_add(1, std::memory_order_relaxed);
  MarkLostIfHeld(name, out.previous_owner, out.previous_fence);
  Freed(name, out.previous_owner, out.previous_fence, UnlockCause::kForce, r,
        3);
  return out;
}

void LockCore::MarkLostIfHeld(const std::string& name, const std::string& owner,
                              int64_t fence) {
  LostCalls calls;
  {
    std::lock_guard lock(mu_);
    auto it = held_.find({name, owner});
    if (it != held_.end() && it->second->fence == fence) {
      std::shared_ptr<HeldLock> victim = it->second;
      MarkLostLocked(victim, &calls);
      Forget(victim);
    }
  }
  DeferCallbacks(std::move(calls));
}

void LockCore::CheckIfHeld(const std::string& name, const std::string& owner,
                           int64_t fence) {
  {
    std::lock_guard lock(mu_);
    auto it = held_.find({name, owner});
    if (it == held_.end() || it->second->fence != fence) return;
    const std::shared_ptr<HeldLock>& held = it->second;
    if (held->lost.load() || held->released) return;
    // The watchdog runs it, at once or — rate-limited — at no_check_before:
    // a flood of events costs one check per kForcedCheckInterval, and a real
    // event right after a forged one is still checked.
    held->check_now = true;
    Schedule(held);  // wakes the watchdog if it is due before its wake-up
  }
}

void LockCore::DeliverUnlockEvent(const UnlockEvent& event) noexcept {
  events_received_.fetch_add(1, std::memory_order_relaxed);
  if (event.client_id == options_.client_id) return;  // woken directly already
  try {
    if (event.cause == UnlockCause::kOpened) {
      // A latch opened elsewhere: its awaiters here ask Redis again.
      latches_.WakeAll(event.lock, WakeCause::kEvent);
      return;
    }
    if (event.cause == UnlockCause::kPermits) {
      // A semaphore or read-write lock handed permits to the waiters named
      // (ids joined by '\n'): only those wake (their claims ask Redis). None
      // named: a read-write lock was freed for nobody; one waiter (barging)
      // wakes.
      if (event.next_waiter.empty()) {
        rw_waits_.WakeOne(event.lock, WakeCause::kEvent);
        return;
      }
      std::string_view ids = event.next_waiter;
      while (!ids.empty()) {
        const size_t end = std::min(ids.find('\n'), ids.size());
        if (end > 0) {
          const std::string id(ids.substr(0, end));
          if (!sem_waits_.HandedOff(event.lock, id, WakeCause::kEvent, {}, 0,
                                    /*promote=*/false)) {
            rw_waits_.HandedOff(event.lock, id, WakeCause::kEvent, {}, 0,
                                /*promote=*/false);
          }
        }
        ids.remove_prefix(std::min(end + 1, ids.size()));
      }
      return;
    }
    if (event.cause == UnlockCause::kForce) {
      // Someone says a grant this process may hold was force-unlocked. An
      // event is a hint (anyone who can write to the topic can send one):
      // ask Redis now, rather than at the next renewal (an explicit lease
      // has none). Only Redis's "not ours" marks the lease lost.
      CheckIfHeld(event.lock, event.owner, event.fence);
    }
    if (event.next_waiter.empty()) {
      waits_.WakeOne(event.lock, WakeCause::kEvent);
    } else {
      // A fair hand-off: only the named grantee wakes, if it waits here.
      SawHandOff(event.lock, event.next_waiter, WakeCause::kEvent, {},
                 event.next_fence, event.next_owner);
    }
  } catch (...) {  // allocation failure: the waiter's bound covers it
  }
}

bool LockCore::Lost(const HeldLock& held) const noexcept {
  return held.lost.load() ||
         ToNs(options_.clock->Now()) >= held.valid_until_ns.load();
}

LockStats LockCore::Stats() const {
  auto get = [](const std::atomic<uint64_t>& v) {
    return v.load(std::memory_order_relaxed);
  };
  LockStats s;
  s.attempts = get(attempts_);
  s.contended_attempts = get(contended_);
  s.acquisitions = get(acquisitions_);
  s.timeouts = get(timeouts_);
  s.cancellations = get(cancellations_);
  s.releases = get(releases_);
  s.releases_not_held = get(releases_not_held_);
  s.releases_not_owner = get(releases_not_owner_);
  s.release_failures = get(release_failures_);
  s.wakeups_local = get(wake_local_);
  s.wakeups_event = get(wake_event_);
  s.wakeups_bound = get(wake_bound_);
  s.spins = get(spins_);
  s.wakeups_spin = get(wake_spin_);
  s.presence_refreshes = get(presence_refreshes_);
  s.presence_wakes = get(presence_wakes_);
  s.renewals = get(renewals_);
  s.renewal_failures = get(renewal_failures_);
  s.replica_shortfalls = get(replica_shortfalls_);
  s.direct_grants = get(direct_grants_);
  s.leases_lost = get(leases_lost_);
  s.events_published = get(events_published_);
  s.events_received = get(events_received_);
  s.force_unlocks = get(force_unlocks_);
  s.forced_checks = get(forced_checks_);
  s.outage_waits = get(outage_waits_);
  s.waiting = waiting_.load(std::memory_order_relaxed);
  s.latch_parks = get(latch_parks_);
  s.latches_opened = get(latches_opened_);
  s.latch_waiting = latch_waiting_.load(std::memory_order_relaxed);
  s.permit_acquisitions = get(sem_acquisitions_);
  s.permit_releases = get(sem_releases_);
  s.rw_acquisitions = get(rw_acquisitions_);
  s.rw_releases = get(rw_releases_);
  s.permit_parks = get(sem_parks_);
  s.permit_waiting = sem_waiting_.load(std::memory_order_relaxed);
  return s;
}

void LockCore::RunHook(std::string_view name, Hook which) {
  const auto i = static_cast<size_t>(which);
  if (!has_hook_[i].load(std::memory_order_acquire)) return;
  std::function<void(std::string_view)> hook;
  {
    std::lock_guard lock(hook_mu_);
    hook = hooks_[i];
  }
  if (hook) hook(name);
}

void LockCore::SetHook(std::function<void(std::string_view)> hook, Hook which) {
  const auto i = static_cast<size_t>(which);
  std::lock_guard lock(hook_mu_);
  has_hook_[i].store(static_cast<bool>(hook), std::memory_order_release);
  hooks_[i] = std::move(hook);
}

}  // namespace internal

// ---- LockClient: a thin handle on the core ----

LockClient::LockClient(std::shared_ptr<RedisClient> redis,
                       LockClientOptions options)
    : core_(std::make_shared<internal::LockCore>(std::move(redis),
                                                 std::move(options))) {
  core_->StartWatchdog();
}

LockClient::~LockClient() { core_->StopWatchdog(); }

AcquireResult LockClient::TryAcquire(std::string_view name,
                                     const AcquireOptions& options) {
  return core_->AcquireUntil(name, Clock::TimePoint::min(), false, options);
}

AcquireResult LockClient::AcquireFor(std::string_view name,
                                     Clock::Duration timeout,
                                     const AcquireOptions& options) {
  return core_->AcquireUntil(
      name, internal::DeadlineAfter(core_->options().clock->Now(), timeout),
      true, options);
}

AcquireResult LockClient::AcquireUntil(std::string_view name,
                                       Clock::TimePoint deadline,
                                       const AcquireOptions& options) {
  return core_->AcquireUntil(name, deadline, true, options);
}

Lease LockClient::Acquire(std::string_view name,
                          const AcquireOptions& options) {
  AcquireResult r =
      core_->AcquireUntil(name, Clock::TimePoint::max(), true, options);
  if (r.status != AcquireStatus::kAcquired) {
    throw Error(ErrorCode::kCancelled,
                "acquisition of lock '" + std::string(name) + "' cancelled");
  }
  return std::move(r.lease);
}

LockInfo LockClient::Inspect(std::string_view name) {
  return core_->Inspect(name);
}

ForceUnlockResult LockClient::ForceUnlock(std::string_view name,
                                          const ForceUnlockOptions& options) {
  return core_->ForceUnlock(name, options);
}

CountDownLatch LockClient::Latch(std::string_view name) {
  internal::ValidateName(name);
  return CountDownLatch(core_, std::string(name));
}

lockfleet::Semaphore LockClient::Semaphore(std::string_view name) {
  internal::ValidateName(name);
  return lockfleet::Semaphore(core_, std::string(name));
}

lockfleet::ReadWriteLock LockClient::ReadWriteLock(std::string_view name) {
  internal::ValidateName(name);
  return lockfleet::ReadWriteLock(core_, std::string(name));
}

void LockClient::DeliverUnlockEvent(const UnlockEvent& event) noexcept {
  core_->DeliverUnlockEvent(event);
}

void LockClient::SetUnlockInterest(std::shared_ptr<UnlockInterest> interest) {
  core_->SetUnlockInterest(std::move(interest));
}

std::string LockClient::DefaultOwner() const { return core_->DefaultOwner(); }
const std::string& LockClient::client_id() const {
  return core_->options().client_id;
}
LockStats LockClient::stats() const { return core_->Stats(); }
RedisClient& LockClient::redis() { return core_->redis(); }

void LockClient::SetAfterFailedAttemptHookForTesting(
    std::function<void(std::string_view name)> hook) {
  core_->SetHook(std::move(hook));
}

void LockClient::SetBeforeDirectGrantHookForTesting(
    std::function<void(std::string_view name)> hook) {
  core_->SetHook(std::move(hook), internal::LockCore::Hook::kBeforeDirectGrant);
}

const char* AcquireStatusName(AcquireStatus status) noexcept {
  switch (status) {
    case AcquireStatus::kAcquired:
      return "acquired";
    case AcquireStatus::kTimedOut:
      return "timed_out";
    case AcquireStatus::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

const char* WakeCauseName(WakeCause cause) noexcept {
  switch (cause) {
    case WakeCause::kLocal:
      return "local";
    case WakeCause::kEvent:
      return "event";
    case WakeCause::kBound:
      return "bound";
    case WakeCause::kSpin:
      return "spin";
  }
  return "unknown";
}

const char* UnlockCauseName(UnlockCause cause) noexcept {
  switch (cause) {
    case UnlockCause::kRelease:
      return "release";
    case UnlockCause::kForce:
      return "force";
    case UnlockCause::kOpened:
      return "opened";
    case UnlockCause::kPermits:
      return "permits";
  }
  return "release";
}

}  // namespace lockfleet
