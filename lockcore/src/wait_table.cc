#include "wait_table.h"

#include <algorithm>

namespace lockfleet::internal {

void WaitTable::Register(const std::string& name, Slot* slot) {
  std::lock_guard lock(mu_);
  slot->woken = false;
  slot->cause = WakeCause::kNone;
  slots_[name].push_back(slot);
}

void WaitTable::Unregister(const std::string& name, Slot* slot,
                           WakeCause unused) {
  std::lock_guard lock(mu_);
  auto it = slots_.find(name);
  if (it == slots_.end()) return;
  it->second.remove(slot);
  // An unconsumed wake is passed on even by a waiter that acquired: it may
  // announce a later free (a force-unlock of the grant just taken). At worst
  // the next waiter makes one needless attempt.
  bool pass_on = slot->woken;
  WakeCause cause = slot->cause;
  if (!pass_on &&
      (unused == WakeCause::kLocal || unused == WakeCause::kEvent)) {
    pass_on = true;
    cause = unused;
  }
  slot->woken = false;
  if (it->second.empty()) {
    slots_.erase(it);
    return;
  }
  if (pass_on) WakeOneLocked(name, cause);
}

WakeCause WaitTable::Park(Slot* slot, std::chrono::nanoseconds timeout,
                          const std::stop_token& stop) {
  std::unique_lock lock(mu_);
  bool woken =
      slot->cv.wait_for(lock, stop, timeout, [slot] { return slot->woken; });
  if (woken) {
    slot->woken = false;
    return slot->cause;
  }
  return stop.stop_requested() ? WakeCause::kCancelled : WakeCause::kBound;
}

bool WaitTable::WakeOne(const std::string& name, WakeCause cause) {
  std::lock_guard lock(mu_);
  return WakeOneLocked(name, cause);
}

bool WaitTable::WakeOneLocked(const std::string& name, WakeCause cause) {
  auto it = slots_.find(name);
  if (it == slots_.end()) return false;
  auto slot_it = std::find_if(it->second.begin(), it->second.end(),
                              [](const Slot* s) { return !s->woken; });
  if (slot_it == it->second.end()) return false;
  Slot* slot = *slot_it;
  slot->woken = true;
  slot->cause = cause;
  slot->cv.notify_one();
  return true;
}

bool WaitTable::WakeWaiter(const std::string& name,
                           const std::string& waiter_id, WakeCause cause) {
  std::lock_guard lock(mu_);
  auto it = slots_.find(name);
  if (it == slots_.end()) return false;
  for (Slot* slot : it->second) {
    if (slot->waiter_id != waiter_id) continue;
    slot->woken = true;
    slot->cause = cause;
    slot->cv.notify_one();
    return true;
  }
  return false;
}

size_t WaitTable::waiters(const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = slots_.find(name);
  return it == slots_.end() ? 0 : it->second.size();
}

}  // namespace lockfleet::internal
