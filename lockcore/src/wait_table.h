// WaitTable: where this process's waiting threads park, per lock name.
//
// Protocol (listen first): a waiter Register()s its slot *before* the
// acquisition attempt that may fail, then Park()s. A Wake between the failed
// attempt and the park is remembered in the slot, so Park returns at once:
// no wake-up is lost in that window. A slot that leaves with an unconsumed
// wake (it timed out or was cancelled instead of acquiring) passes the wake
// on to the next waiter, so a wake is never swallowed by a departing waiter.
//
// Thread-safety: all methods are thread-safe. A Slot is owned by one thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <list>
#include <mutex>
#include <stop_token>
#include <string>
#include <unordered_map>

namespace lockfleet::internal {

enum class WakeCause { kNone, kLocal, kEvent, kBound, kCancelled };

class WaitTable {
 public:
  struct Slot {
    std::string waiter_id;  // fair mode: the id queued in Redis; may be empty
    std::condition_variable_any cv;
    bool woken = false;  // guarded by WaitTable::mu_
    WakeCause cause = WakeCause::kNone;
  };

  void Register(const std::string& name, Slot* slot);

  // Leaves the table. A wake the slot still holds goes to the next waiter,
  // and so does `unused` (kLocal or kEvent): a wake the departing waiter
  // took from Park but could not use (its attempt then failed).
  void Unregister(const std::string& name, Slot* slot,
                  WakeCause unused = WakeCause::kNone);

  // Parks until woken, `timeout` elapses or `stop` is requested; consumes
  // the wake. Returns kLocal/kEvent (woken), kBound or kCancelled.
  WakeCause Park(Slot* slot, std::chrono::nanoseconds timeout,
                 const std::stop_token& stop);

  // Wakes the longest-waiting slot on `name` that is not already woken.
  // Returns false if there was none.
  bool WakeOne(const std::string& name, WakeCause cause);

  // Wakes the slot on `name` whose waiter_id is `waiter_id` (a fair grantee).
  // Returns false if it is not waiting here.
  bool WakeWaiter(const std::string& name, const std::string& waiter_id,
                  WakeCause cause);

  size_t waiters(const std::string& name) const;

 private:
  bool WakeOneLocked(const std::string& name, WakeCause cause);

  mutable std::mutex mu_;
  std::unordered_map<std::string, std::list<Slot*>> slots_;  // guarded by mu_
};

}  // namespace lockfleet::internal
