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
// are); GrantWaiter then wakes that waiter with the grant (kGranted), and it
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

enum class WakeCause { kNone, kLocal, kEvent, kBound, kCancelled, kGranted };

// What a direct grant gives its waiter (see GrantWaiter).
struct DirectGrant {
  int64_t fence = 0;
  std::chrono::steady_clock::time_point sent;  // the release script's send
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
  // holds the lock. After this, GrantWaiter cannot reach the slot.
  bool Unregister(const std::string& name, Slot* slot,
                  WakeCause unused = WakeCause::kNone);

  // Parks until woken, `timeout` elapses or `stop` is requested; consumes
  // the wake. Returns kLocal/kEvent/kGranted (woken; a grant in *grant),
  // kBound or kCancelled.
  WakeCause Park(Slot* slot, std::chrono::nanoseconds timeout,
                 const std::stop_token& stop, DirectGrant* grant = nullptr);

  // Wakes the longest-waiting slot on `name` that is not already woken.
  // Returns false if there was none.
  bool WakeOne(const std::string& name, WakeCause cause);

  // Wakes the slot on `name` whose waiter_id is `waiter_id` (a fair grantee).
  // Returns false if it is not waiting here.
  bool WakeWaiter(const std::string& name, const std::string& waiter_id,
                  WakeCause cause);

  // Wakes the waiter `waiter_id` on `name` with the lock granted to it
  // (kGranted). False if it is not waiting here (any more).
  bool GrantWaiter(const std::string& name, const std::string& waiter_id,
                   const DirectGrant& grant);

  // The fair waiters parked on `name`, longest-waiting first, at most `max`.
  std::vector<LocalWaiter> LocalWaiters(const std::string& name,
                                        size_t max) const;

  size_t waiters(const std::string& name) const;

 private:
  bool WakeOneLocked(const std::string& name, WakeCause cause);
  // Wakes the slot queued as `waiter_id` with `cause` (and `grant`, for
  // kGranted); a grant it has not consumed yet stays against a plain wake.
  // False if none. REQUIRES: mu_.
  bool WakeWaiterLocked(const std::string& name, const std::string& waiter_id,
                        WakeCause cause, const DirectGrant& grant = {});
  // The slot on `name` queued as `waiter_id`, or null. REQUIRES: mu_.
  Slot* FindWaiterLocked(const std::string& name, const std::string& waiter_id);

  mutable std::mutex mu_;
  std::unordered_map<std::string, std::list<Slot*>> slots_;  // guarded by mu_
};

}  // namespace lockfleet::internal
