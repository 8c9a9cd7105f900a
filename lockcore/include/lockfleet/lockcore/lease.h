// Lease: one hold on a lock, and the RAII guard that gives it back.
//
// A Lease is what a successful acquisition returns. It is move-only, like
// std::unique_lock; a default-constructed or moved-from Lease holds nothing.
// Reentrant acquisitions (same lock name, same owner token) return further
// Lease objects for the same grant: they share the fencing token, and the
// lock is freed in Redis when the last of them is released.
//
// Validity. While a Lease is held, either the caller gave an explicit lease
// time (the lock then expires after it unless released), or the client's
// watchdog renews the lease every lease/3. The lock counts as *lost* when a
// renewal finds that the lock is no longer ours, when the lease ran out
// without a successful renewal (Redis unreachable, process paused), or when
// an explicit lease expired. lost() is cheap and may be polled from any
// thread; the on_lost callback of AcquireOptions fires once per grant, on
// the watchdog thread, and stop_token() is requested (before on_lost runs):
// compose it with other cancellation as etcd's Session.Done() is used. After
// a pause (SIGSTOP, a VM freeze) lost() is true
// the moment the process runs again — the steady clock kept counting — but
// on_lost may come a moment later, after the holder's own thread has acted:
// check lost() (or fence the write), not only the callback.
// Validity is measured from *before* the acquire (or renew) command was sent,
// so a Lease never believes in more time than Redis granted.
//
// Only Redis ends a hold: a renewal answered "not ours", or validity running
// out. An unlock event (even a `force` one naming this grant) is a hint that
// makes the client check the grant with Redis at once; it never marks a
// lease lost by itself. The one exception is local: destroying the
// LockClient stops its watchdog, so the leases still held count as lost
// from then on (nothing renews them or would tell them when they end), and
// their stop tokens are requested on the destroying thread; their on_lost
// callbacks do not run.
//
// Re-entry keeps the grant's mode: a grant taken with an explicit lease is
// not turned into a watchdog-renewed one by a later reentrant acquisition
// without a lease (that acquisition's Lease shares the explicit lease's
// validity, extended to default_lease once by the acquire script).
//
// Destruction releases best effort: it never throws; a failed release is
// counted (LockStats::release_failures) and the lock then frees when its
// lease runs out.
//
// Thread-safety: a Lease object is used by one thread at a time, except
// lost(), valid_until() and the accessors, which any thread may call.
#pragma once

#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>

#include "lockfleet/lockcore/clock.h"

namespace lockfleet {

namespace internal {
class LockCore;
struct HeldLock;
}  // namespace internal

enum class ReleaseStatus {
  kReleased,   // our hold is given back; the lock is free if it was the last
  kStillHeld,  // reentrant: our hold is given back, other holds remain
  kNotHeld,    // the lock had already expired or been force-unlocked
  kNotOwner,   // someone else holds the lock now: refused, nothing touched
};

const char* ReleaseStatusName(ReleaseStatus status) noexcept;

class Lease {
 public:
  Lease() noexcept;
  ~Lease();
  Lease(Lease&& other) noexcept;
  Lease& operator=(Lease&& other) noexcept;  // releases the current hold first
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;

  // True until Release() (or a move away). Says nothing about validity.
  bool held() const noexcept { return held_lock_ != nullptr; }
  explicit operator bool() const noexcept { return held(); }

  // REQUIRES: held(). The lock name, owner token and fencing token of the
  // grant. Fencing tokens strictly increase per lock name across all grants.
  const std::string& name() const;
  const std::string& owner() const;
  int64_t fence() const;

  // True once the lock is known or presumed lost (see above). A lost lease
  // must not be used to touch the protected resource; fencing rejects it.
  bool lost() const noexcept;

  // Requested once when the grant is lost (see above), on the watchdog thread
  // before the on_lost callbacks run (or on the thread destroying the
  // LockClient); never by Release(). The token stays
  // usable after the Lease is released or destroyed. Pass it to work done
  // under the lock (std::stop_callback, std::jthread, a handler's
  // cancellation) so that the work stops when the lock is gone. On a Lease
  // that holds nothing it is already requested.
  std::stop_token stop_token() const;

  // The steady-clock instant until which the lock is ours for sure, absent a
  // renewal. REQUIRES: held().
  Clock::TimePoint valid_until() const;

  // Gives the hold back. Idempotent on the Redis side: a retry after a lost
  // reply never frees a lock twice nor someone else's lock. Throws Error on a
  // Redis failure; the hold is then dropped locally (no more renewals) and
  // the lock frees when its lease runs out. REQUIRES: held().
  ReleaseStatus Release();

 private:
  friend class internal::LockCore;
  Lease(std::shared_ptr<internal::LockCore> core,
        std::shared_ptr<internal::HeldLock> held_lock, std::string hold_id,
        Clock::TimePoint acquired_at) noexcept;

  std::shared_ptr<internal::LockCore> core_;
  std::shared_ptr<internal::HeldLock> held_lock_;
  std::string hold_id_;  // this hold's own field in the lock hash
  Clock::TimePoint acquired_at_;
};

}  // namespace lockfleet
