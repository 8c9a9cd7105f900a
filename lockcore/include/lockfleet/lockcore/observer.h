// LockObserver: how a metrics system sees the lock as it works.
//
// LockClient calls the observer (LockClientOptions::observer) on the thread
// where each event happens: the acquiring thread, the releasing thread, the
// watchdog. Implementations must be cheap, thread-safe, must not throw and
// must not call back into the LockClient. Lock names are passed raw; a
// metrics implementation must map them to a bounded label set (a lock class
// or name prefix), never use them as label values directly.
//
// Every method has an empty default, so an observer overrides what it needs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "lockfleet/lockcore/clock.h"
#include "lockfleet/lockcore/error.h"

namespace lockfleet {

enum class RwMode;           // rwlock.h
enum class AwaitStatus;      // latch.h
enum class CountDownStatus;  // latch.h

enum class AcquireStatus;
enum class ReleaseStatus;

// Why a parked waiter woke up.
enum class WakeCause {
  kLocal,  // a holder in this process released (or force-unlocked)
  kEvent,  // an unlock event from another process (the transport)
  kBound,  // its park bound expired: TTL, park cap or presence refresh
  kSpin,   // the queue head's own check found its grant (see lock_client.h)
};

// "local", "event", "bound", "spin"
const char* WakeCauseName(WakeCause cause) noexcept;

class LockObserver {
 public:
  virtual ~LockObserver() = default;

  // An acquisition call ended: acquired, timed out or cancelled, after
  // `waited` (0 for an immediate answer) and `attempts` acquire scripts.
  // `contended` says whether any attempt found another holder.
  virtual void OnAcquire(std::string_view /*name*/, AcquireStatus /*status*/,
                         Clock::Duration /*waited*/, int /*attempts*/,
                         bool /*contended*/) noexcept {}

  // A hold was given back after being held for `held`.
  virtual void OnRelease(std::string_view /*name*/, ReleaseStatus /*status*/,
                         Clock::Duration /*held*/) noexcept {}

  // A parked waiter woke up.
  virtual void OnWakeup(std::string_view /*name*/,
                        WakeCause /*cause*/) noexcept {}

  // The head of `name`'s queue sent a spin check (found its grant or not).
  virtual void OnSpin(std::string_view /*name*/) noexcept {}

  // The number of threads waiting in this client changed by `delta`.
  virtual void OnWaiting(int /*delta*/) noexcept {}

  // A watchdog round trip renewed `renewed` leases, or failed (`failed`).
  virtual void OnRenewal(uint64_t /*renewed*/, bool /*failed*/) noexcept {}

  // A held lock was lost (see lease.h).
  virtual void OnLeaseLost(std::string_view /*name*/) noexcept {}

  // A lock operation failed with `code` (it is also thrown to the caller,
  // except for the watchdog's and destructors' own failures).
  virtual void OnError(ErrorCode /*code*/) noexcept {}

  // Semaphores (semaphore.h). A permit acquisition of semaphore `name`
  // ended, after `waited`.
  virtual void OnPermitsAcquire(std::string_view /*name*/,
                                AcquireStatus /*status*/,
                                Clock::Duration /*waited*/) noexcept {}
  // A permit set this client held was given back (kReleased) or found gone
  // (kNotHeld) after being held for `held`.
  virtual void OnPermitsRelease(std::string_view /*name*/,
                                ReleaseStatus /*status*/,
                                Clock::Duration /*held*/) noexcept {}
  // A permit set this client held was lost (its lease ran out, or Redis
  // said it is gone).
  virtual void OnPermitsLost(std::string_view /*name*/) noexcept {}
  // The permits of `name` this client holds changed by `delta` (granted,
  // given back, or lost).
  virtual void OnPermitsHeld(std::string_view /*name*/,
                             int64_t /*delta*/) noexcept {}

  // Read-write locks (rwlock.h), per mode: as the semaphore's, for holds.
  virtual void OnRwAcquire(std::string_view /*name*/, RwMode /*mode*/,
                           AcquireStatus /*status*/,
                           Clock::Duration /*waited*/) noexcept {}
  virtual void OnRwRelease(std::string_view /*name*/, RwMode /*mode*/,
                           ReleaseStatus /*status*/,
                           Clock::Duration /*held*/) noexcept {}
  virtual void OnRwLost(std::string_view /*name*/, RwMode /*mode*/) noexcept {}
  // The holds of `name` in `mode` this client has changed by `delta`.
  virtual void OnRwHeld(std::string_view /*name*/, RwMode /*mode*/,
                        int64_t /*delta*/) noexcept {}

  // Countdown latches (latch.h). An Await of latch `name` ended: opened,
  // timed out or cancelled, after `waited`.
  virtual void OnLatchAwait(std::string_view /*name*/, AwaitStatus /*status*/,
                            Clock::Duration /*waited*/) noexcept {}
  // A count-down of latch `name` was answered with `status` by Redis (also
  // when it then throws kRedisReplicas; not when Redis failed).
  virtual void OnLatchCountDown(std::string_view /*name*/,
                                CountDownStatus /*status*/) noexcept {}

  // Multi-locks (multi_lock.h), as a whole; `first` is the first of the
  // names in canonical (sorted) order, `names` how many there are. Each of
  // its locks is also reported as a lock (OnAcquire, OnRelease, ...).
  // A multi-lock acquisition call ended, after `waited`.
  virtual void OnMultiAcquire(std::string_view /*first*/, size_t /*names*/,
                              AcquireStatus /*status*/,
                              Clock::Duration /*waited*/) noexcept {}
  // A multi-lease was released after being held for `held`, with the status
  // MultiLease::Release returned (not when a release threw).
  virtual void OnMultiRelease(std::string_view /*first*/,
                              ReleaseStatus /*status*/,
                              Clock::Duration /*held*/) noexcept {}
};

}  // namespace lockfleet
