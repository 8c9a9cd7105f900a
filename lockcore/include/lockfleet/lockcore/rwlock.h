// ReadWriteLock: any number of readers or one writer, in Redis, awaited
// across processes.
//
// "Many readers of a catalogue, one writer of it":
//
//   LockClient locks(redis, {.publisher = kafka});
//   ReadWriteLock catalogue = locks.ReadWriteLock("catalogue");
//   RwResult r = catalogue.AcquireFor(RwMode::kRead, std::chrono::seconds(5));
//   if (r) { read_catalogue(r.lease.stop_token()); }   // released at scope end
//   RwLease w = catalogue.Acquire(RwMode::kWrite);
//   write_catalogue(w.token());                        // fenced writes
//
// Built on the semaphore's machinery (semaphore.h), not beside it: the lock
// is a semaphore of kRwPermits permits whose permit sets have owners; a read
// takes 1 permit, a write all of them. Each acquisition is one set with its
// own id and lease, renewed by the client's watchdog (lease/3, in the same
// batch as the locks') until released, or with an explicit lease; a holder
// that crashes or hangs gives its set back when its lease runs out, and a
// set that is lost is told as a lock's is: lost(), the stop token, on_lost.
//
// Fairness (the default). Waiters queue in Redis in arrival order and are
// served in that order: a writer waits for the readers before it, readers
// that arrive behind a queued writer wait for it (a stream of readers never
// starves a writer), and a release that frees the lock hands it, in the
// same script, to the first queued waiters that fit — one writer, or every
// reader at the head up to the next writer — and publishes one unlock event
// naming all of them (cause kPermits), so only those threads wake, in
// whatever process they are. A grant nobody claims within claim_window
// passes on. A reader joining other readers with no writer queued costs one
// script call. Barging (RwOptions::fair = false, or LockClientOptions::fair)
// ignores the queue: a barging waiter is woken by releases that hand the
// lock to nobody (a local release, or an event naming nobody) and by its
// park bound.
//
// Reentrancy, per owner token (as the lock's: by default per client and
// thread). An owner that holds the lock gets another set at once, past the
// queue: a read beside its read (so a reader re-entering never waits behind
// a writer that waits for it), a read or a write beside its write. A writer
// that takes the read lock and then releases the write lock keeps reading:
// a downgrade, with no moment unlocked between. An owner holding only read
// sets asking to write (an upgrade) is refused with Error(kInvalidArgument):
// it would wait for itself — counting every set under the owner token,
// also another process's sharing an explicit token (a write waiter is then
// refused when such a read is granted). While this client holds no set of
// the lock under the calling thread's default token, sets Redis has under
// that token (revived by a failover, or given up on) do not count as the
// caller's: it waits until their lease ends. (Once it holds one, they do.)
//
// Tokens. A write set gets a fencing token (strictly increasing per lock
// name, never below the server's clock in microseconds, as the lock's); a
// reentrant write set, and a read set taken beside a write set, get the
// token of that write grant. A read set gets the token of the last write
// grant (0: never written), so a resource can tell what state a read saw.
//
// Waking and bounds: as for the semaphore — listen first, every park bounded
// by min(remaining wait, the earliest set's lease end, presence_window / 3,
// park_cap); an event is a hint, sets are granted only by the scripts.
//
// Safety: never a writer together with a reader or another writer of
// another owner; the sets out never exceed the lock's permits but for one
// owner's reentrant sets beside its write set.
//
// Keys (all in the Redis Cluster slot of the hash tag {NAME}):
// "<prefix>:{NAME}:rwlock" (a hash: the sets, their owners and tokens, the
// last writer token; it does not expire), ":rwlock:expiry",
// ":rwlock:queue", ":rwlock:waiters", reply latches and the tombstones
// ":rwlock:gone:<id>" (scripts.h).
//
// Thread-safety: all methods are thread-safe; an RwLease is used by one
// thread at a time, except lost(), valid_until() and the accessors.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "lockfleet/lockcore/clock.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/semaphore.h"

namespace lockfleet {

enum class RwMode { kRead, kWrite };  // declared in observer.h

// "read" / "write".
const char* RwModeName(RwMode mode) noexcept;

// A read-write lock's permits: a write set takes all of them.
inline constexpr int64_t kRwPermits = int64_t{1} << 30;

struct RwOptions {
  // Explicit lease: the set comes back after this unless released, and is
  // not renewed. Default: none — the watchdog renews default_lease.
  std::optional<std::chrono::milliseconds> lease;
  std::string owner;     // Default: empty — the calling thread's owner token
  std::stop_token stop;  // Default: never stops. Cancels waiting.
  // Called once, on the watchdog thread, when the held set is lost, with
  // the lock's name and the set's token. Keep it short; it must not throw.
  LostCallback on_lost;
  // Queue fairly (true) or barge (false). Default: LockClientOptions::fair.
  std::optional<bool> fair;
};

// One hold of a read-write lock, in one mode, and the RAII guard that gives
// it back. Move-only; a default-constructed or moved-from RwLease holds
// nothing.
class RwLease {
 public:
  RwLease() noexcept = default;
  ~RwLease() = default;  // releases best effort (never throws)
  RwLease(RwLease&& other) noexcept = default;
  RwLease& operator=(RwLease&& other) noexcept = default;

  bool held() const noexcept { return set_.held(); }
  explicit operator bool() const noexcept { return held(); }

  // REQUIRES: held(). The lock's name, this hold's set id, its mode.
  const std::string& name() const { return set_.name(); }
  const std::string& id() const { return set_.id(); }
  RwMode mode() const { return mode_; }
  // A write hold's fencing token; a read hold's: the last write grant's
  // token when it was granted (0: never written). See "Tokens".
  int64_t token() const { return set_.count(); }

  bool lost() const noexcept { return set_.lost(); }
  std::stop_token stop_token() const { return set_.stop_token(); }
  Clock::TimePoint valid_until() const { return set_.valid_until(); }

  // kReleased, or kNotHeld (its lease had ended). Idempotent under retry.
  // Throws Error on a Redis failure; the hold then ends when its lease runs
  // out. REQUIRES: held().
  ReleaseStatus Release() { return set_.Release(); }

 private:
  friend class internal::LockCore;
  RwLease(Permits set, RwMode mode) noexcept
      : set_(std::move(set)), mode_(mode) {}

  Permits set_;
  RwMode mode_ = RwMode::kRead;
};

struct RwResult {
  AcquireStatus status = AcquireStatus::kTimedOut;
  RwLease lease;     // held() iff status == kAcquired
  int attempts = 0;  // acquire scripts run
  // The last Redis error the call rode out (empty if none).
  std::string last_error;
  explicit operator bool() const { return status == AcquireStatus::kAcquired; }
};

struct RwHolder {
  std::string id;  // the set's id
  RwMode mode = RwMode::kRead;
  std::string owner;  // its owner token
  int64_t token = 0;
  std::chrono::milliseconds ttl{0};  // lease left
};

struct RwInfo {
  int64_t last_token = 0;  // the last write grant's token (0: none)
  int64_t waiters = 0;     // queued waiters (live or not yet skipped)
  // The sets out (held, or handed to a waiter that has not claimed them
  // yet), earliest lease end first; at most the number asked for.
  std::vector<RwHolder> holders;
  bool write_locked() const {
    for (const RwHolder& h : holders)
      if (h.mode == RwMode::kWrite) return true;
    return false;
  }
};

class ReadWriteLock {
 public:
  const std::string& name() const { return name_; }

  // One try: never queues (and, fair, gets the lock only when no live
  // waiter is queued ahead, or its owner holds it).
  RwResult TryAcquire(RwMode mode, const RwOptions& options = {});
  // Waits up to `timeout` / `deadline` (on the client's clock); a zero
  // timeout or a deadline already past is one try.
  RwResult AcquireFor(RwMode mode, Clock::Duration timeout,
                      const RwOptions& options = {});
  RwResult AcquireUntil(RwMode mode, Clock::TimePoint deadline,
                        const RwOptions& options = {});
  // Waits without a time limit. Throws Error(kCancelled) if options.stop is
  // triggered first.
  RwLease Acquire(RwMode mode, const RwOptions& options = {});
  // Every acquisition throws Error(kInvalidArgument) for an upgrade (a write
  // asked by an owner holding only read sets) and a non-positive lease. Redis
  // outages are ridden out as a lock wait does (outage_grace).

  // A snapshot (one read-only script), listing at most `max_holders` sets.
  RwInfo Inspect(size_t max_holders = 1000);

 private:
  friend class LockClient;
  ReadWriteLock(std::shared_ptr<internal::LockCore> core, std::string name)
      : core_(std::move(core)), name_(std::move(name)) {}

  std::shared_ptr<internal::LockCore> core_;
  std::string name_;
};

}  // namespace lockfleet
