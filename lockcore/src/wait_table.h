// WaitTable: where this process's waiting threads park, per lock name.
//
// Protocol (listen first): a waiter Register()s its slot *before* the
// acquisition attempt that may fail, then Park()s. A Wake between the failed
// attempt and the park is remembered in the slot, so Park returns at once:
// no wake-up is lost in that window. A slot that leaves with an unconsumed
// wake (it timed out or was cancelled instead of acquiring) passes the wake
// on to the next waiter, so a wake is never swallowed by a departing waiter.
//
// Direct grants: a release in this process may grant the lock outright to a
// fair waiter parked here (LocalWaiters tells the release script who they
// are); HandedOff then wakes that waiter with the grant (kGranted), and it
// holds the lock without another round trip. A departing slot never passes
// a grant on as a grant: the next waiter gets a plain wake (kLocal).
//
// Thread-safety: all methods are thread-safe. A Slot is owned by one thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <mutex>
#include <stop_token>
#include <string>
#include <unordered_map>
#include <vector>

namespace lockfleet::internal {

// kPromoted: not a wake to try again, only the news that the waiter has
// become the head of the lock's queue (see HandedOff). kChecked: the
// watchdog's presence check found that the waiter must make an attempt
// (LockCore's parked waiters): the safety net a bounded park is otherwise.
enum class WakeCause {
  kNone,
  kLocal,
  kEvent,
  kBound,
  kCancelled,
  kGranted,
  kPromoted,
  kChecked
};

// What a direct grant gives its waiter (see HandedOff).
struct DirectGrant {
  int64_t fence = 0;
  std::chrono::steady_clock::time_point sent;  // the release script's send
  // Any wake (Park): the waiter may have been handed the lock — a hand-off
  // named it as its grantee (HandedOff), or its watchdog found it off the
  // queue (WakeWaiter) — not a plain "try". A hint, as the wake is.
  bool handed = false;
};

class WaitTable {
 public:
  struct Slot {
    std::string waiter_id;  // fair mode: the id queued in Redis; may be empty
    // Fair mode, for direct grants: the call's hold id and lease (ms).
    std::string hold_id;
    int64_t lease_ms = 0;
    std::condition_variable_any cv;
    bool woken = false;  // guarded by WaitTable::mu_
    WakeCause cause = WakeCause::kNone;
    DirectGrant grant;  // with cause kGranted; guarded by WaitTable::mu_
    // Fair mode: the waiter's place in the Redis queue as its last refused
    // attempt saw it (1 = head), counted down by each hand-off seen since;
    // 0 = unknown. A hint only (see HandedOff). Guarded by WaitTable::mu_.
    int place = 0;
    // The fencing token of the latest grant `place` reflects: a hand-off
    // with a token no larger is already counted (or older). mu_.
    int64_t place_fence = 0;
    bool promoted = false;  // became the head since its last Park; mu_
    bool handed = false;    // DirectGrant::handed, for its next Park; mu_
  };

  // A fair waiter parked on a lock, as a release script needs it.
  struct LocalWaiter {
    std::string waiter_id;
    std::string hold_id;
    int64_t lease_ms = 0;
  };

  void Register(const std::string& name, Slot* slot);

  // Leaves the table. A wake the slot still holds goes to the next waiter,
  // and so does `unused` (kLocal or kEvent): a wake the departing waiter
  // took from Park but could not use (its attempt then failed). A direct
  // grant the slot still holds is passed on as a plain wake (kLocal), and
  // the call returns true: the leaving waiter must give it back unless it
  // holds the lock. After this, HandedOff cannot reach the slot.
  bool Unregister(const std::string& name, Slot* slot,
                  WakeCause unused = WakeCause::kNone);

  // Parks until woken, promoted, `timeout` elapses or `stop` is requested;
  // consumes the wake (and the promotion). Returns kLocal/kEvent/kGranted
  // (woken; a grant in *grant), kPromoted (only promoted), kBound or
  // kCancelled.
  WakeCause Park(Slot* slot, std::chrono::nanoseconds timeout,
                 const std::stop_token& stop, DirectGrant* grant = nullptr);

  // Wakes the longest-waiting slot on `name` that is not already woken.
  // Returns false if there was none.
  bool WakeOne(const std::string& name, WakeCause cause);

  // Records the place in the queue a refused attempt reported for `slot`,
  // behind the grant with fencing token `fence`.
  void SetPlace(Slot* slot, int place, int64_t fence);

  // A release (here or, through its unlock event, elsewhere) handed `name`
  // to the queued waiter `waiter_id`, i.e. took it off the head of the
  // queue: wakes it with `cause` if it waits here — with kGranted, the wake
  // carries `grant` and the waiter holds the lock; a grant it has not
  // consumed yet stays against a later plain wake — and moves
  // every other fair waiter on `name` with a known place one place up —
  // unless its place already reflects a grant with a token >= `fence` (the
  // new grant's; 0: unknown, always counted), so a duplicated, replayed or
  // late event counts once at most. One that reaches the head is woken with
  // kPromoted (it may start spinning) if `promote`. Places are hints: a
  // forged event moves them too far (the waiter spends a bounded spin
  // budget for nothing), waiters dropped as dead from the queue's head not
  // far enough (the real head does not spin). Returns whether `waiter_id`
  // waits here (any more: a slot leaves the table last).
  bool HandedOff(const std::string& name, const std::string& waiter_id,
                 WakeCause cause, const DirectGrant& grant = {},
                 int64_t fence = 0, bool promote = true);

  // Wakes the slot of the fair waiter `waiter_id` on `name` with `cause`,
  // and no other, unless it is woken already (it tries anyway). `handed`:
  // the waiter may have been handed the lock (DirectGrant::handed; kept
  // for a slot woken already). Returns whether it was woken here.
  bool WakeWaiter(const std::string& name, const std::string& waiter_id,
                  WakeCause cause, bool handed = false);

  // The fair waiters parked on `name`, longest-waiting first, at most `max`.
  std::vector<LocalWaiter> LocalWaiters(const std::string& name,
                                        size_t max) const;

  size_t waiters(const std::string& name) const;

 private:
  bool WakeOneLocked(const std::string& name, WakeCause cause);
  // Wakes `slot` with `cause` (and `grant`, for kGranted); a grant it has
  // not consumed yet stays against a plain wake. REQUIRES: mu_.
  void WakeSlotLocked(Slot* slot, WakeCause cause, const DirectGrant& grant);

  mutable std::mutex mu_;
  std::unordered_map<std::string, std::list<Slot*>> slots_;  // guarded by mu_
};

}  // namespace lockfleet::internal
