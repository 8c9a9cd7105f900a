#include "wait_table.h"

#include <algorithm>

namespace lockfleet::internal {

void WaitTable::Register(const std::string& name, Slot* slot) {
  std::lock_guard lock(mu_);
  slot->woken = false;
  slot->cause = WakeCause::kNone;
  slot->place = 0;
  slot->place_fence = 0;
  slot->promoted = false;
  slot->handed = false;
  slots_[name].push_back(slot);
}

bool WaitTable::Unregister(const std::string& name, Slot* slot,
                           WakeCause unused) {
  std::lock_guard lock(mu_);
  auto it = slots_.find(name);
  if (it == slots_.end()) return false;
  it->second.remove(slot);
  const bool granted = slot->woken && slot->cause == WakeCause::kGranted;
  // An unconsumed wake is passed on even by a waiter that acquired: it may
  // announce a later free (a force-unlock of the grant just taken). At worst
  // the next waiter makes one needless attempt. Not the watchdog's kChecked:
  // that was about this waiter's own place.
  bool pass_on = slot->woken && slot->cause != WakeCause::kChecked;
  // A grant is this waiter's alone: the next one is only told to try.
  WakeCause cause =
      slot->cause == WakeCause::kGranted ? WakeCause::kLocal : slot->cause;
  if (!pass_on &&
      (unused == WakeCause::kLocal || unused == WakeCause::kEvent)) {
    pass_on = true;
    cause = unused;
  }
  slot->woken = false;
  if (it->second.empty()) {
    slots_.erase(it);
  } else if (pass_on) {
    WakeOneLocked(name, cause);
  }
  return granted;
}

WakeCause WaitTable::Park(Slot* slot, std::chrono::nanoseconds timeout,
                          const std::stop_token& stop, DirectGrant* grant) {
  std::unique_lock lock(mu_);
  bool woken = slot->cv.wait_for(
      lock, stop, timeout, [slot] { return slot->woken || slot->promoted; });
  if (woken) {
    const bool promoted_only = !slot->woken;
    slot->promoted = false;
    if (promoted_only) return WakeCause::kPromoted;
    slot->woken = false;
    if (grant) {
      if (slot->cause == WakeCause::kGranted) *grant = slot->grant;
      grant->handed = slot->handed;
    }
    slot->handed = false;
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

void WaitTable::WakeSlotLocked(Slot* slot, WakeCause cause,
                               const DirectGrant& grant) {
  // A grant not yet consumed stays: a later hint must not replace it.
  if (cause != WakeCause::kGranted && slot->woken &&
      slot->cause == WakeCause::kGranted) {
    return;
  }
  slot->woken = true;
  slot->cause = cause;
  if (cause == WakeCause::kGranted) slot->grant = grant;
  slot->cv.notify_one();
}

void WaitTable::SetPlace(Slot* slot, int place, int64_t fence) {
  std::lock_guard lock(mu_);
  slot->place = place;
  slot->place_fence = fence;
}

bool WaitTable::HandedOff(const std::string& name, const std::string& waiter_id,
                          WakeCause cause, const DirectGrant& grant,
                          int64_t fence, bool promote) {
  std::lock_guard lock(mu_);
  auto it = slots_.find(name);
  if (it == slots_.end()) return false;
  bool found = false;
  for (Slot* slot : it->second) {
    if (slot->waiter_id == waiter_id) {  // the grantee (ids are unique)
      found = true;
      if (cause != WakeCause::kGranted) slot->handed = true;
      WakeSlotLocked(slot, cause, grant);
      continue;
    }
    if (slot->place <= 1) continue;
    if (fence != 0) {
      if (fence <= slot->place_fence) continue;  // counted already
      slot->place_fence = fence;
    }
    if (--slot->place == 1 && promote) {
      slot->promoted = true;
      slot->cv.notify_one();
    }
  }
  return found;
}

bool WaitTable::WakeWaiter(const std::string& name,
                           const std::string& waiter_id, WakeCause cause,
                           bool handed) {
  std::lock_guard lock(mu_);
  auto it = slots_.find(name);
  if (it == slots_.end()) return false;
  for (Slot* slot : it->second) {
    if (slot->waiter_id != waiter_id) continue;
    if (handed) slot->handed = true;
    if (slot->woken) return false;  // it will try anyway: keep its cause
    WakeSlotLocked(slot, cause, {});
    return true;
  }
  return false;
}

std::vector<WaitTable::LocalWaiter> WaitTable::LocalWaiters(
    const std::string& name, size_t max) const {
  std::vector<LocalWaiter> out;
  std::lock_guard lock(mu_);
  auto it = slots_.find(name);
  if (it == slots_.end()) return out;
  for (const Slot* slot : it->second) {
    if (out.size() >= max) break;
    if (slot->waiter_id.empty() || slot->hold_id.empty()) continue;
    out.push_back({slot->waiter_id, slot->hold_id, slot->lease_ms});
  }
  return out;
}

size_t WaitTable::waiters(const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = slots_.find(name);
  return it == slots_.end() ? 0 : it->second.size();
}

}  // namespace lockfleet::internal
