// SpinAdvisor: when the head of a lock's fair queue should look for its
// grant itself instead of waiting for the unlock event (adaptive spinning).
//
// The next release of a fair lock grants it to the head of the queue, so the
// head — and only the head — may spend a few cheap checks around the moment
// the holder is expected to release; every other waiter parks at once, and
// so does the head once its checks are spent (issue 16, item 1; HotSpot's
// adaptive spinning). A check only claims a grant Redis already made to the
// checking waiter (see SpinClaimScript): spinning changes who learns of a
// grant first, never who gets it.
//
// The estimate of the release, per lock name:
//   release ≈ anchor + hold + lag[kind of anchor]
//   - anchor, one of four kinds, the first two from Redis when the head
//     learns its place from a refused attempt (the reply carries the
//     current grant's age: since its fencing token, which is the server's
//     clock in µs when it was issued): kClaimed — a grant whose hold began
//     then (a new grant, or a direct one); kHandedOff — a hand-off claimed
//     since, whose hold began later by the claim's delay (the event's trip,
//     or the grantee's spin check); kPending — "now", when that attempt
//     found a hand-off not yet claimed; kPromoted — the moment the head was
//     promoted by a hand-off it saw (its own release, or another process's
//     unlock event). Each kind keeps its own lag: they differ by the
//     claim's delay and the event's.
//   - hold: an EWMA of this process's own holds of the lock (from grant to
//     release). A process that never held the lock does not spin on it.
//   - lag: an EWMA, learnt from each episode, of where the release really
//     fell against anchor + hold (the grantee's delay in claiming, clock and
//     round-trip offsets): a check that wins pulls it a little earlier, one
//     that misses pushes it later, a wake that comes first sets it to when
//     the wake came. A plan made after its expected release (its first check
//     at once) teaches nothing about the lag.
// Nothing is spun on a lock whose hold is unknown or longer than max_hold,
// or whose current grant is already far past the expected release (the
// pattern broke): a waiter on a lock held for 200 ms parks for its event
// with no extra command. An episode whose checks all miss makes the next
// 1, 3, 7 ... 63 episodes on that lock skip spinning; a win resets it.
// At most kMaxLocks names are remembered (the least recent forgotten).
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

#include "lockfleet/lockcore/clock.h"

namespace lockfleet::internal {

class SpinAdvisor {
 public:
  static constexpr size_t kMaxLocks = 4096;
  // Checks per spin episode, the first included.
  static constexpr int kMaxChecks = 3;

  // max_hold <= 0: never spin.
  explicit SpinAdvisor(Clock::Duration max_hold) : max_hold_(max_hold) {}

  // Whether anything is ever spun on (max_hold > 0).
  bool enabled() const { return max_hold_ > Clock::Duration::zero(); }

  // This process held `name` for `held` (from its grant to its release).
  // A hold longer than max_hold of a lock not remembered yet is not
  // recorded: it would not be spun on, and a process holding many locks
  // for long would only churn the table.
  void OnHold(const std::string& name, Clock::Duration held);

  enum class Anchor {
    kClaimed = 0,
    kPending = 1,
    kPromoted = 2,
    kHandedOff = 3
  };
  static constexpr size_t kAnchors = 4;

  struct Plan {
    bool spin = false;
    bool late = false;  // planned after the expected release: check at once
    Clock::TimePoint first_check;  // when the first check is due
    Clock::Duration interval{0};   // between later checks
    int checks = 0;                // checks allowed, the first included
    // What the plan was made from (for OnOutcome).
    Clock::TimePoint anchor;
    Anchor kind = Anchor::kClaimed;
    Clock::Duration hold{0};
  };
  // For a waiter that is (or just became) the head of `name`'s queue at
  // `now`, behind a grant made at `anchor`: spin or not, and when. A
  // planned episode should be ended with OnOutcome.
  Plan PlanFor(const std::string& name, Clock::TimePoint anchor, Anchor kind,
               Clock::TimePoint now);

  // The end of a planned episode. `checks_sent` checks went out, the last
  // at `last_sent`; `won_at` is the 1-based check that found the grant, 0 if
  // none did; `woken_at` when a wake (the event, a local release) ended it
  // before a check won (or never: time_point::max()). An episode that ended
  // otherwise (timeout, cancel, a Redis error, a free lock) is not reported:
  // it says nothing about the timing.
  void OnOutcome(const std::string& name, const Plan& plan, int checks_sent,
                 Clock::TimePoint last_sent, int won_at,
                 Clock::TimePoint woken_at);

  // For tests.
  Clock::Duration HoldForTesting(const std::string& name) const;
  Clock::Duration LagForTesting(const std::string& name,
                                Anchor kind = Anchor::kClaimed) const;

 private:
  struct Entry {
    Clock::Duration hold{0};          // EWMA, 0 = unknown
    Clock::Duration lag[kAnchors]{};  // EWMA, per kind of anchor
    int failures = 0;                 // episodes in a row that won nothing
    int skip = 0;                     // episodes still to skip
    std::list<std::string>::iterator age;
  };
  Entry& EntryLocked(const std::string& name);  // REQUIRES: mu_

  const Clock::Duration max_hold_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;  // mu_
  std::list<std::string> ages_;                     // mu_, most recent last
};

}  // namespace lockfleet::internal
