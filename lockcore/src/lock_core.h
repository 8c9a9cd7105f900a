// LockCore: the shared state behind LockClient and its Leases.
//
// Leases keep the core alive (shared_ptr), so a Lease may outlive its
// LockClient; the client's destructor stops the watchdog thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "latch_board.h"
#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/latch.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/rwlock.h"
#include "lockfleet/lockcore/semaphore.h"
#include "spin_advisor.h"
#include "wait_table.h"

namespace lockfleet::internal {

inline int64_t ToNs(Clock::TimePoint t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             t.time_since_epoch())
      .count();
}

inline Clock::TimePoint FromNs(int64_t ns) {
  return Clock::TimePoint(std::chrono::nanoseconds(ns));
}

// `now + timeout`, without overflow (time_point::max() for a timeout that
// long); a negative timeout counts as zero.
inline Clock::TimePoint DeadlineAfter(Clock::TimePoint now,
                                      Clock::Duration timeout) {
  return timeout >= Clock::TimePoint::max() - now
             ? Clock::TimePoint::max()
             : now + std::max(timeout, Clock::Duration::zero());
}

// Until when a lease granted or renewed by a command sent at `sent` is ours
// for sure: measured from before the send, less the usual clock-drift
// allowance (Redlock: lease/100 + 2 ms).
inline int64_t ValidUntilNs(Clock::TimePoint sent,
                            std::chrono::milliseconds lease) {
  return ToNs(sent + lease - (lease / 100 + std::chrono::milliseconds(2)));
}

// The most waiter ids one kPermits event names (one release handing a
// read-write lock to many readers publishes one event per this many): ids
// are about 40 bytes, so an event stays far below the transport's limits.
inline constexpr int kMaxGranteesPerEvent = 100;

// What a HeldLock is: a lock's grant, or a set (expiry_key non-empty): a
// semaphore's permit set, or a read-write lock's read or write set.
enum class SetKind : uint8_t { kNone, kPermits, kRead, kWrite };

// A read-write lock set's mode. REQUIRES: kind is kRead or kWrite.
inline RwMode RwModeOf(SetKind kind) {
  return kind == SetKind::kWrite ? RwMode::kWrite : RwMode::kRead;
}

// What a set acquisition asks (semaphore.cc, rwlock.cc).
struct SetAsk {
  SetKind kind = SetKind::kPermits;
  int64_t k = 1;       // permits (kRwPermits for a write set)
  std::string owner;   // a read-write lock set's owner token
  bool fresh = false;  // ... a private token this client holds no set under
  bool fair = true;    // queue (false: a read-write lock waiter barges)
};

// One grant held by this process: (name, owner, fence). Reentrant Leases of
// the same grant share it.
struct HeldLock {
  std::string name;
  std::string key;  // the lock hash's Redis key
  std::string owner;
  int64_t fence = 0;
  // A set instead of a lock's grant (semaphore.cc): owner is the set's id,
  // key the semaphore's (or read-write lock's) hash, and this its expiry
  // set; fence is a permit set's count, or a read-write lock set's token.
  std::string expiry_key;
  SetKind set_kind = SetKind::kNone;
  std::string set_owner;  // a read-write lock set's owner token
  // A permit set whose acquisition may have a try still to run late (a lost
  // reply): its release leaves a tombstone this long (scripts.h).
  int64_t gone_ms = 0;
  Clock::TimePoint acquired_at;  // a permit set: when it was granted
  std::chrono::milliseconds lease{0};
  bool renew = false;  // watchdog-renewed (no explicit lease)

  // steady-clock ns of the validity deadline; read lock-free by lost().
  std::atomic<int64_t> valid_until_ns{0};
  std::atomic<bool> lost{false};
  std::stop_source lost_source;  // requested on the watchdog thread when lost

  // Guarded by LockCore::mu_.
  int local_holds = 0;
  bool released = false;        // last local hold given back: never renew again
  bool renewing = false;        // queued for, or in, a renewal round trip
  Clock::TimePoint next_check;  // next renewal (renew mode)
  // A force event named this grant: check it with Redis at the next chance
  // (not before no_check_before, so a flood of events costs one round trip
  // per hold per kForcedCheckInterval at most).
  bool check_now = false;
  Clock::TimePoint no_check_before;
  // Where it is filed in LockCore::schedule_, if it is (see
  // LockCore::Schedule).
  std::optional<Clock::TimePoint> scheduled_at;
  // Appended under mu_ only while !lost; read by the watchdog thread after
  // the grant was marked lost (so no longer written).
  std::vector<LostCallback> on_lost;
};

// What a Lease or a Permits (`held`, null when it holds nothing) shows:
// its grant's stop token (one already requested when nothing is held) and
// validity (min() when nothing is held).
inline std::stop_token StopTokenOf(const HeldLock* held) {
  if (held != nullptr) return held->lost_source.get_token();
  std::stop_source stopped;
  stopped.request_stop();
  return stopped.get_token();
}
inline Clock::TimePoint ValidUntilOf(const HeldLock* held) {
  return held != nullptr ? FromNs(held->valid_until_ns.load())
                         : Clock::TimePoint::min();
}

// Throws Error(kInvalidArgument) for a name that cannot be a lock's (or a
// latch's): empty, starting with '}', longer than kMaxLockNameBytes.
void ValidateName(std::string_view name);

// Throws Error(kInvalidArgument) unless low <= permits <=
// kMaxSemaphorePermits; `what` names the value.
void CheckPermits(int64_t permits, int64_t low, const char* what);

// Element `i` of a script's array reply (IntElement: an integer one);
// throws Error(kRedisProtocol) naming `what` when the reply has no such
// element.
const Reply& Element(const Reply& r, size_t i, const char* what);
long long IntElement(const Reply& r, size_t i, const char* what);

// The whole of `text` as a decimal integer (a number a script wrote as a
// string: Lua numbers are doubles), or nullopt.
std::optional<long long> ParseInteger(std::string_view text);

// Redis failures a waiting call rides out (see lock_client.h, outage_grace).
bool IsOutage(ErrorCode code);

class LockCore : public std::enable_shared_from_this<LockCore> {
 public:
  // Grants marked lost whose stop token and callbacks are still to run.
  using LostCalls = std::vector<std::shared_ptr<HeldLock>>;

  LockCore(std::shared_ptr<RedisClient> redis, LockClientOptions options);
  ~LockCore();

  void StartWatchdog();
  void StopWatchdog();

  AcquireResult AcquireUntil(std::string_view name, Clock::TimePoint deadline,
                             bool wait, const AcquireOptions& options);
  ReleaseStatus Release(const std::shared_ptr<HeldLock>& held,
                        const std::string& hold_id,
                        Clock::TimePoint acquired_at);
  LockObserver* observer() const { return options_.observer.get(); }
  LockInfo Inspect(std::string_view name);
  ForceUnlockResult ForceUnlock(std::string_view name,
                                const ForceUnlockOptions& options);
  void DeliverUnlockEvent(const UnlockEvent& event) noexcept;
  bool Lost(const HeldLock& held) const noexcept;
  void SetUnlockInterest(std::shared_ptr<UnlockInterest> interest);

  // One waiting call's interest in `name` (UnlockInterest): from Begin,
  // called before the call's first park (a call that gets the lock at once
  // costs the transport nothing), to its destruction, after the call's slot
  // left the wait table. Told to the interest set at Begin (the same one
  // hears its end).
  class Watching {
   public:
    Watching(LockCore* core, const std::string& name)
        : core_(core), name_(name) {}
    ~Watching();
    Watching(const Watching&) = delete;
    Watching& operator=(const Watching&) = delete;
    void Begin();  // the first call only

   private:
    LockCore* core_;
    const std::string& name_;
    bool begun_ = false;
    std::shared_ptr<UnlockInterest> interest_;
  };

  // A multi-lock's locks (`sorted`: canonical order, checked) tried in one
  // script, all or none (MultiAcquireScript; multi_lock.cc). Never queues,
  // never waits. nullopt when they cannot share a script: on a Redis
  // Cluster, names whose keys are in different slots. A refusal leaves
  // none of the call's holds (given back if a lost reply may have granted
  // them within kGiveUpBudget). `options` as the caller gave them (owner ""
  // = this thread's); `deadline` bounds the script's tries, as
  // EvalRetryOnce's (max(): a try, the command timeout).
  struct AllAtOnce {
    bool granted = false;
    std::vector<Lease> leases;  // granted: one per name, in `sorted` order
    size_t refused = 0;         // not granted: the index of the lock refused
    int64_t ttl_ms = 0;         // ... its holder's remaining TTL
    std::string holder;         // ... and owner token ("" = its queue)
  };
  std::optional<AllAtOnce> TryAllAtOnce(const std::vector<std::string>& sorted,
                                        const AcquireOptions& options,
                                        Clock::TimePoint deadline);
  // Whether a command of this client has reached Redis once (a waiting call
  // rides an outage out only then; see AcquireUntil).
  bool reached() const noexcept {
    return reached_.load(std::memory_order_relaxed);
  }

  std::string DefaultOwner() const;
  LockStats Stats() const;
  // Test hooks (LockClient::Set...HookForTesting).
  enum class Hook { kAfterFailedAttempt = 0, kBeforeDirectGrant = 1 };
  static constexpr size_t kHooks = 2;
  void SetHook(std::function<void(std::string_view)> hook,
               Hook which = Hook::kAfterFailedAttempt);

  // Countdown latches (latch.cc; the contracts are CountDownLatch's).
  bool LatchTrySet(const std::string& name, int64_t count,
                   const LatchOptions& options);
  CountDownResult LatchCountDown(const std::string& name, std::string_view id);
  int64_t LatchCount(const std::string& name);
  AwaitStatus LatchAwait(const std::string& name, Clock::TimePoint deadline,
                         const std::stop_token& stop);

  // Semaphores (semaphore.cc; the contracts are Semaphore's).
  bool SemTrySet(const std::string& name, int64_t permits);
  // AddPermits (`add`) or SetPermits: the permits after.
  int64_t SemChange(const std::string& name, int64_t n, bool add);
  SemaphoreInfo SemInspect(const std::string& name);
  // A semaphore's permit set, or a read-write lock's set (`ask`).
  PermitResult SemAcquireUntil(const std::string& name, const SetAsk& ask,
                               Clock::TimePoint deadline, bool wait,
                               const PermitOptions& options);
  // Gives back the set `permit_id` (held here as `held`, or null).
  ReleaseStatus SemRelease(const std::string& name,
                           const std::string& permit_id,
                           const std::shared_ptr<HeldLock>& held);
  // Read-write locks (rwlock.cc; the contracts are ReadWriteLock's).
  RwResult RwAcquireUntil(const std::string& name, RwMode mode,
                          Clock::TimePoint deadline, bool wait,
                          const RwOptions& options);
  RwInfo RwInspect(const std::string& name, size_t max_holders);

  const LockClientOptions& options() const { return options_; }
  RedisClient& redis() { return *redis_; }
  void CountReleaseFailure() {
    release_failures_.fetch_add(1, std::memory_order_relaxed);
  }

 private:
  // LatchAwait's loop, without the observer's report.
  AwaitStatus LatchAwaitLoop(const std::string& name, Clock::TimePoint deadline,
                             const std::stop_token& stop);

  struct Attempt {
    bool granted = false;
    Lease lease;
    int64_t ttl_ms = 0;
    std::string holder;
    int place = 0;  // a fair refusal that queued: our place (1 = head)
    // ... the current hold's age (-2: a hand-off not claimed; -1: unknown)
    // and the current grant's fence.
    int64_t age_us = -1;
    int64_t place_fence = 0;
    bool handed_off = false;  // the grant is a claimed hand-off
    bool queued = false;      // a fair refusal that queued (or refreshed) us
  };
  // One acquire script, each try bounded by `deadline` (see EvalRetryOnce).
  // `waiter_id` empty: barging; else fair, queueing up when refused if
  // `enqueue`. `hold_id` is the acquisition call's: every try of one call
  // sends the same, so a try that ran with its reply lost and a later try
  // are one hold, not two (the script adds a hold id once). When it throws,
  // `*may_hold` tells whether a try may have granted `hold_id` unseen.
  // `fresh`: the acquire scripts' flag (scripts.h), decided once per call.
  // `spin_check` (fair only): the queue head's spin check instead, which
  // only claims a grant pending to `waiter_id` (SpinClaimScript; for a "g:"
  // waiter the caller uses ConfirmHandOff).
  Attempt TryOnce(const std::string& name, const std::string& owner,
                  std::chrono::milliseconds lease, bool renew,
                  const AcquireOptions& options, const std::string& waiter_id,
                  const std::string& hold_id, bool fresh, bool enqueue,
                  Clock::TimePoint deadline, bool* may_hold,
                  bool spin_check = false);
  // Redis granted `hold_id` of `owner` with `fence`, by a command sent at
  // `sent` (an acquire script of ours, or a same-process release's direct
  // grant): files the grant (held_, the watchdog's timetable) and returns
  // the Lease. Not granted (ttl 0: try again at once) if another call that
  // shares the owner token holds a newer grant, which this one then is part
  // of no longer.
  // `valid_for` (a hand-off in full): the grant is valid for this long
  // from `sent` (not `lease`); the watchdog renews it well before.
  Attempt Granted(const std::string& name, const std::string& owner,
                  std::chrono::milliseconds lease, bool renew,
                  const AcquireOptions& options, const std::string& hold_id,
                  int64_t fence, Clock::TimePoint sent,
                  std::optional<std::chrono::milliseconds> valid_for = {});
  // A fair waiter handed the lock in full ("g:" waiter ids, see
  // ReleaseScript in scripts.h) confirms the grant with one HMGET: granted
  // if the lock is under `owner` and carries `hold_id`. `checked`: the
  // latest send time of a command that found this waiter still queued (its
  // refused attempt, or a presence check that answered {1}); the grant came
  // after it, with the claim window as its lease, so it is valid at least
  // until checked + min(claim window, lease). Not granted: holder "" (free)
  // or `owner` (ours but not so: a hand-off to claim, or too little
  // validity left) — the caller's full attempt decides — or another holder.
  // With a `deadline`, the read is bounded as a script call's try is (see
  // EvalRetryOnce). Counted as TryOnce counts (CountTry).
  Attempt ConfirmHandOff(const std::string& name, const std::string& owner,
                         std::chrono::milliseconds lease, bool renew,
                         const AcquireOptions& options,
                         const std::string& hold_id, Clock::TimePoint checked,
                         Clock::TimePoint deadline, bool spin_check);
  // One answered try of TryOnce or ConfirmHandOff: a spin check (spins and
  // OnSpin) or an attempt.
  void CountTry(const std::string& name, bool spin_check);
  // Spinning (spin_advisor.h): the plan of a waiter whose fair attempt was
  // refused with `refused` (none unless it is the head, behind another
  // process's grant).
  SpinAdvisor::Plan PlanAfterRefusal(const std::string& name,
                                     const Attempt& refused);
  // Parks `slot` for at most `bound`, as AcquireUntil's park, and spins as
  // `plan` says: wakes for each planned check and runs `check()` (one spin
  // check, the call's TryOnce), at most plan.checks of them; a promotion
  // (kPromoted) plans anew. Returns the wake that ended the park, or kNone
  // when a check ended it: *won granted (it claimed the grant), or the lock
  // found free or ours, or Redis out (a full attempt follows at once).
  template <typename Check>
  WakeCause ParkSpinning(const std::string& name, WaitTable::Slot* slot,
                         Clock::Duration bound, const std::stop_token& stop,
                         DirectGrant* grant, SpinAdvisor::Plan plan,
                         const std::string& owner, Check&& check, Attempt* won);
  // A fair waiter leaves without the lock: dequeue, pass on a pending grant,
  // give back its hold `hold_id` if a grant carries it (a direct grant that
  // raced the leaving). Bounded by kGiveUpBudget: if Redis does not answer,
  // the queue entry lapses after presence_window, a pending grant after
  // claim_window, and the hold is remembered (orphans_) or runs out with
  // its lease.
  // False if Redis did not answer (a direct grant may then still carry the
  // hold).
  bool Abandon(const std::string& name, const std::string& waiter_id,
               const std::string& hold_id) noexcept;
  // A call ends without the lock after a try of it may have granted
  // `hold_id` unseen: gives it back within kGiveUpBudget, and remembers it
  // in orphans_ either way (a try still queued on a stalled server may
  // grant it after the give-back) for the owner's next grant of the lock.
  void GiveBackLostHolds(const std::string& name, const std::string& owner,
                         const std::string& hold_id) noexcept;
  // The four keys of a lock: hash, the slot's fence counter, queue, waiters.
  std::vector<std::string> Keys(std::string_view name) const;
  // The four, plus the reply latch of `request_id` (see scripts.h).
  std::vector<std::string> KeysWithLatch(std::string_view name,
                                         const std::string& request_id) const;
  // A try's time budget for a call with `deadline` (max: none): the time
  // left, at least kMinAttemptBudget; 0 (the command timeout) without one.
  std::chrono::milliseconds AttemptBudget(Clock::TimePoint deadline) const;
  // Runs `script`, and once more on a fresh connection if the first try
  // failed on the connection (the first may have run: every script sent
  // through here is retry-safe, see scripts.h). With a `deadline` (on
  // options_.clock) each try is bounded by the time left (at least
  // kMinAttemptBudget) and no retry starts past it. Errors are counted.
  // When it throws, `*may_have_run` (if given) tells whether a try may have
  // run on the server with its reply lost — also when the error thrown is
  // a later try's (a retry refused with LOADING or OOM says nothing about
  // the first try). With `shortfall` and min_replicas > 0, each try is
  // followed by WAIT; a reply fewer replicas acknowledged is still returned,
  // the shortfall counted (Acknowledged) and described in *shortfall (""
  // when acknowledged). Without it, no WAIT: reads, and the bounded
  // clean-ups of a call that gives up (abandon, give-backs), whose
  // kGiveUpBudget a lagging replica must not stretch.
  Reply EvalRetryOnce(const Script& script,
                      const std::vector<std::string>& keys,
                      const std::vector<std::string>& args,
                      Clock::TimePoint deadline = Clock::TimePoint::max(),
                      bool* may_have_run = nullptr,
                      std::string* shortfall = nullptr);
  // The WAIT to send after a change of a lock: none when min_replicas is 0.
  std::optional<ReplicaWait> ReplicaWanted() const;
  // Counts a change `wait` says too few replicas acknowledged (a statistic
  // and OnError(kRedisReplicas)). False then; true when acknowledged or no
  // WAIT was wanted.
  bool Acknowledged(const std::optional<ReplicaWait>& wait);
  // The release script for one hold (fence 0: whichever grant carries it).
  // `again`: a remembered hold released after a fault (a request of its own,
  // see lock_client.cc).
  // `locals` (a regular release only): this client's fair waiters on the
  // lock, for a direct grant; `*acknowledged` (if given) whether the replicas
  // acknowledged the release (always, with min_replicas 0).
  Reply ReleaseHold(const std::string& name, const std::string& owner,
                    int64_t fence, const std::string& hold_id,
                    Clock::TimePoint deadline = Clock::TimePoint::max(),
                    bool again = false,
                    const std::vector<WaitTable::LocalWaiter>& locals = {},
                    bool* acknowledged = nullptr);
  // A release granted the lock directly to a waiter of this client (reply
  // {4, waiter id, owner, fence, hold id}, script sent at `sent`): hands the
  // grant to the waiter, or — if the replicas did not acknowledge it — only
  // wakes it (its next try re-enters the grant and waits for them). If the
  // waiter's call has returned without it, gives its hold back (see
  // lock_client.cc).
  void DeliverDirectGrant(const std::string& name, const Reply& reply,
                          Clock::TimePoint sent, bool acknowledged);
  // The most local waiters a release offers its script for a direct grant.
  static constexpr size_t kMostLocalWaiters = 16;
  // Runs the test hook, if one is set (cheap when none is).
  void RunHook(std::string_view name, Hook which = Hook::kAfterFailedAttempt);
  ReleaseStatus ReleaseImpl(const std::shared_ptr<HeldLock>& held,
                            const std::string& hold_id);
  std::string LockKey(std::string_view name) const;
  std::string LatchKey(std::string_view name) const;
  std::string FenceKey(std::string_view name) const;
  std::string NextRequestId();
  // A hand-off of `name` to the queued waiter `waiter_id` was seen (our own
  // release or an unlock event): wakes the grantee, if it waits here, with
  // `cause`; moves our other waiters' places up (WaitTable::HandedOff).
  // Returns whether the grantee waits here.
  // `fence` and `next_owner`: the new grant's (0 / "" unknown); a head is
  // not promoted behind a grant to this process (its release grants the
  // head directly).
  bool SawHandOff(const std::string& name, const std::string& waiter_id,
                  WakeCause cause, const DirectGrant& grant, int64_t fence,
                  const std::string& next_owner);
  // Whether `owner` is one of this client's default owner tokens.
  bool OwnedHere(const std::string& owner) const;
  // Whether this client holds `name` as `owner` now (a live local hold).
  bool HoldsHere(const std::string& name, const std::string& owner);
  // The lock was freed (`reply` from release/abandon/force-unlock: {1} or
  // {3, waiter, owner, fence} when handed on): wake and publish.
  void Freed(const std::string& name, const std::string& owner, int64_t fence,
             UnlockCause cause, const Reply& handoff, size_t handoff_at);
  // Hands `event` to the publisher, if any, as this client's, stamped with
  // the time now (client_id, released_at_ns), and counts it.
  void Publish(UnlockEvent& event);
  // REQUIRES: mu_ held. Marks `held` lost (once) and queues its callbacks.
  void MarkLostLocked(const std::shared_ptr<HeldLock>& held, LostCalls* calls);
  // Hands callbacks to the watchdog thread: they never run on a caller's
  // thread (which may hold its own locks) and never in the middle of ours.
  void DeferCallbacks(LostCalls calls);
  void Forget(const std::shared_ptr<HeldLock>& held);  // REQUIRES: mu_ held
  // Tells the observer (REQUIRES: one) that a set of `held`'s kind is held
  // (`sign` 1) or no longer (-1); a lock's grant: nothing.
  void ObserveHeld(const HeldLock& held, int sign);
  // Tells the observer that `held` was lost (its kind's hook, and the held
  // gauge).
  void ObserveLost(const HeldLock& held);
  // Semaphores: the keys (semaphore hash, expiry, queue, waiters), then the
  // reply latch of `request_id` and the tombstone of the call `gone_id`,
  // each if given (scripts.h).
  // A read-write lock's (`kind` kRead or kWrite) are the same under
  // ":rwlock".
  std::vector<std::string> SemKeys(std::string_view name,
                                   const std::string& request_id = "",
                                   const std::string& gone_id = "",
                                   SetKind kind = SetKind::kPermits) const;
  // A script handed permits to the waiters `handed` (a script's reply
  // element): wakes those waiting here (but `self`, the call that ran it),
  // publishes a kPermits event for each of the others.
  // One event names every remote grantee (waiter ids joined by '\n', in
  // events of at most kMaxGranteesPerEvent). `freed`: a read-write lock's
  // release that handed nothing wakes one local waiter and publishes an
  // event naming none, for waiters that barge.
  void SemHanded(const std::string& name, const Reply& handed,
                 const std::string& self = "", SetKind kind = SetKind::kPermits,
                 bool freed = false);
  // `shortfall` (EvalRetryOnce's) of a semaphore change, or, if the change
  // was `retried` and replicas are wanted, why it is not known to be
  // acknowledged.
  std::string SemShortfall(const std::string& shortfall, bool retried) const;
  // A waiter leaves without permits (bounded by kGiveUpBudget): out of the
  // queue, a set under its id given back, a tombstone for `gone_ms` (0:
  // none). False if Redis did not answer.
  bool SemAbandon(const std::string& name, const std::string& id,
                  int64_t gone_ms, SetKind kind) noexcept;
  // If this process holds `name` as `owner` with `fence`, marks it lost now
  // (our own force-unlock script deleted it): callbacks go to the watchdog
  // thread.
  void MarkLostIfHeld(const std::string& name, const std::string& owner,
                      int64_t fence);
  // If this process holds `name` as `owner` with `fence`, checks the grant
  // with Redis now (a force event said it was removed; only Redis decides).
  void CheckIfHeld(const std::string& name, const std::string& owner,
                   int64_t fence);

  // Watchdog (watchdog.cc). The watchdog thread only decides: it watches
  // validity deadlines and queues due renewals; the renewer thread does the
  // round trips. So a stalled Redis delays renewals, never the news that a
  // lease ran out. It looks only at the grants whose time has come, in the
  // order of schedule_: a grant, a release or a renewal costs O(log n) in
  // the number n of held grants, never a scan of them all.
  void WatchdogLoop();
  // REQUIRES: mu_ held. Files `held` (again) in schedule_ at the next
  // instant the watchdog must look at it: its validity deadline, and before
  // that its next renewal or a forced check, unless a renewal is under way.
  // Wakes the watchdog if that is before the instant it sleeps until. Call
  // after every change of those times; Forget takes it out.
  void Schedule(const std::shared_ptr<HeldLock>& held);
  void Unschedule(const std::shared_ptr<HeldLock>& held);  // REQUIRES: mu_
  void RenewerLoop();
  void RenewDue(std::vector<std::shared_ptr<HeldLock>> due);
  // At most one forced check per hold per this interval (see CheckIfHeld).
  static constexpr Clock::Duration kForcedCheckInterval =
      std::chrono::milliseconds(100);

  const std::shared_ptr<RedisClient> redis_;
  const LockClientOptions options_;
  const std::string instance_;  // random, per LockCore: see NextRequestId
  WaitTable waits_;
  WaitTable sem_waits_;  // semaphore waiters, by semaphore name
  WaitTable rw_waits_;   // read-write lock waiters, by lock name
  WaitTable& WaitsOf(SetKind kind) {
    return kind == SetKind::kPermits ? sem_waits_ : rw_waits_;
  }
  LatchBoard latches_;
  SpinAdvisor spin_;
  std::mutex interest_mu_;
  std::shared_ptr<UnlockInterest> interest_;  // guarded by interest_mu_

  mutable std::mutex mu_;
  std::condition_variable watchdog_cv_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<HeldLock>>
      held_;  // mu_
  // The permit sets held, by id (ids are unique). mu_.
  std::map<std::string, std::shared_ptr<HeldLock>> permits_;
  // Read-write lock sets held, per (name, owner token): whether an acquire
  // under a private token is `fresh` (SetAsk). Guarded by mu_.
  std::map<std::pair<std::string, std::string>, int> rw_owned_;
  // The watchdog's timetable: every grant of held_ once, by the instant it
  // is due (Schedule). mu_.
  std::set<std::pair<Clock::TimePoint, std::shared_ptr<HeldLock>>> schedule_;
  // When the sleeping watchdog wakes by itself; min() while it is awake
  // (it looks at schedule_ again before it sleeps). mu_.
  Clock::TimePoint watchdog_wakes_at_ = Clock::TimePoint::min();
  bool stopping_ = false;  // mu_
  std::thread watchdog_;
  std::thread renewer_;
  std::condition_variable renewer_cv_;
  std::deque<std::vector<std::shared_ptr<HeldLock>>> renew_queue_;  // mu_

  // Presence: the fair waiters of this client parked in a lock's queue, by
  // waiter id. The watchdog refreshes their queue entries (PresenceScript)
  // twice per PresenceInterval(), all that are due in one pipelined batch,
  // and wakes (kChecked) the one that must try again; a waiter whose park
  // ends finds the watchdog's check recent and parks on without a round
  // trip of its own. mu_.
  struct Parked {
    std::string name;
    std::string owner;
    Clock::TimePoint due;      // its next refresh
    Clock::TimePoint checked;  // sent: the last check Redis answered (the
                               // watchdog's confirmed, or the waiter's own)
    uint64_t confirmed = 0;    // the watchdog's checks Redis confirmed
    Clock::TimePoint seen;     // the waiter's thread was last alive then
    bool refreshing = false;   // in a batch now
  };
  std::map<std::string, Parked> parked_;                           // mu_
  std::set<std::pair<Clock::TimePoint, std::string>> parked_due_;  // mu_
  std::deque<std::vector<std::string>> presence_queue_;  // waiter ids; mu_
  // A queued fair waiter's longest park between checks: min(park_cap,
  // presence_window / 3).
  Clock::Duration PresenceInterval() const;
  // A refused attempt sent at `sent` queued `waiter_id`: from now on the
  // watchdog keeps its entry. False if it will not (stopping).
  bool KeepPresence(const std::string& name, const std::string& owner,
                    const std::string& waiter_id, Clock::TimePoint sent);
  void DropPresence(const std::string& waiter_id);
  // The waiter's thread, alive at `now`, asks when its entry was last
  // checked and how many of the watchdog's checks were confirmed.
  std::pair<Clock::TimePoint, uint64_t> PresenceChecked(
      const std::string& waiter_id, Clock::TimePoint now);
  void ParkedDueLocked(const std::string& waiter_id, Parked& parked,
                       Clock::TimePoint due);  // REQUIRES: mu_
  void RefreshPresence(const std::vector<std::string>& waiter_ids);
  LostCalls deferred_calls_;  // mu_
  // Holds whose release threw, or whose acquisition call ended without the
  // lock after a try may have run (Redis down, timed out) and could not give
  // them back: the lock may still carry them. If the
  // same owner is granted the same grant again (reentrant), the acquire script
  // keeps such a stale hold — and, each time, the lock's TTL — alive, so an
  // owner that keeps coming back would keep the lock from everyone else for
  // ever. TryOnce gives them back on that re-grant, and a call that gives
  // up after a fault gives back its own lost acquire (GiveBackLostHolds).
  // Keyed like held_; bounded (RememberOrphan: 4096 keys, 64 holds each,
  // lost acquires evicted before failed releases).
  struct OrphanHold {
    int64_t fence = 0;  // of the grant; 0: unknown (a failed acquire)
    std::string hold_id;
  };
  std::map<std::pair<std::string, std::string>, std::vector<OrphanHold>>
      orphans_;  // mu_
  void RememberOrphan(const std::string& name, const std::string& owner,
                      int64_t fence, const std::string& hold_id);
  // Gives back `hold_ids` of `owner` (see ReleaseOrphans in lock_client.cc);
  // what Redis did not answer for, or what the deadline left, is kept.
  void ReleaseOrphans(
      const std::string& name, const std::string& owner, int64_t fence,
      std::vector<std::string> hold_ids,
      Clock::TimePoint deadline = Clock::TimePoint::max()) noexcept;

  std::atomic<bool> has_hook_[kHooks] = {};  // fast path: no lock
  std::mutex hook_mu_;
  std::function<void(std::string_view)> hooks_[kHooks];  // hook_mu_

  std::atomic<uint64_t> next_request_{0};
  std::atomic<uint64_t> attempts_{0}, contended_{0}, acquisitions_{0},
      timeouts_{0}, cancellations_{0}, releases_{0}, releases_not_held_{0},
      releases_not_owner_{0}, release_failures_{0}, wake_local_{0},
      wake_event_{0}, wake_bound_{0}, renewals_{0}, renewal_failures_{0},
      leases_lost_{0}, events_published_{0}, events_received_{0},
      latch_parks_{0}, latches_opened_{0}, sem_acquisitions_{0},
      sem_releases_{0}, rw_acquisitions_{0}, rw_releases_{0}, sem_parks_{0},
      force_unlocks_{0}, forced_checks_{0}, outage_waits_{0},
      replica_shortfalls_{0}, direct_grants_{0}, spins_{0}, wake_spin_{0},
      presence_refreshes_{0}, presence_wakes_{0};
  // Set by the first script reply: a waiting acquisition rides out Redis
  // failures only once the client has reached Redis (a wrong address is
  // reported at once, not waited on).
  std::atomic<bool> reached_{false};
  std::atomic<int64_t> waiting_{0};
  std::atomic<int64_t> latch_waiting_{0};
  std::atomic<int64_t> sem_waiting_{0};
};

}  // namespace lockfleet::internal
