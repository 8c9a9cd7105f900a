// LatchBoard: where this process's latch awaiters park, per latch name.
//
// Unlike a lock's WaitTable, which wakes one waiter at a time, an opened
// latch wakes every awaiter of its name at once. Protocol (listen first, as
// for locks): an awaiter Listen()s before it asks Redis for the count, then
// Parks with the generation Listen gave it. A Wake between the two bumps the
// generation, so the Park returns at once: no wake-up is lost in that
// window. Names nobody listens on are not remembered: a flood of (forged)
// events for other names costs no memory.
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <stop_token>
#include <string>
#include <unordered_map>

#include "wait_table.h"

namespace lockfleet::internal {

class LatchBoard {
 public:
  // Starts listening on `name`; returns the generation to Park with.
  uint64_t Listen(const std::string& name) {
    std::lock_guard lock(mu_);
    Entry& e = entries_[name];
    ++e.listeners;
    return e.generation;
  }

  // Stops listening (once per Listen).
  void Unlisten(const std::string& name) {
    std::lock_guard lock(mu_);
    auto it = entries_.find(name);
    if (it != entries_.end() && --it->second.listeners == 0) entries_.erase(it);
  }

  // Waits until `name` is woken past generation *seen, for at most `wait`,
  // or until `stop`. Returns the wake's cause (and moves *seen on to the
  // current generation), kBound or kCancelled. REQUIRES: Listen(name).
  WakeCause Park(const std::string& name, uint64_t* seen,
                 std::chrono::steady_clock::duration wait,
                 const std::stop_token& stop) {
    std::unique_lock lock(mu_);
    const auto it = entries_.find(name);
    if (it == entries_.end()) return WakeCause::kBound;  // not listening
    // Listen keeps the entry (and so this reference) until Unlisten.
    Entry& e = it->second;
    const bool woken =
        cv_.wait_for(lock, stop, wait, [&] { return e.generation != *seen; });
    if (woken) {
      *seen = e.generation;
      return e.cause;
    }
    return stop.stop_requested() ? WakeCause::kCancelled : WakeCause::kBound;
  }

  // Wakes every awaiter of `name` (none listening: nothing to do). Returns
  // whether any listened.
  bool WakeAll(const std::string& name, WakeCause cause) {
    {
      std::lock_guard lock(mu_);
      auto it = entries_.find(name);
      if (it == entries_.end()) return false;
      ++it->second.generation;
      it->second.cause = cause;
    }
    cv_.notify_all();
    return true;
  }

  size_t NamesForTesting() const {
    std::lock_guard lock(mu_);
    return entries_.size();
  }

 private:
  struct Entry {
    uint64_t generation = 0;
    int listeners = 0;
    WakeCause cause = WakeCause::kNone;
  };
  mutable std::mutex mu_;
  // One for all names: latch awaiters are few, and a wake is rare (once per
  // opening), so a spurious wake-up of another name's awaiter is cheap.
  std::condition_variable_any cv_;
  std::unordered_map<std::string, Entry> entries_;  // mu_
};

}  // namespace lockfleet::internal
