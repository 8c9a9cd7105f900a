// Semaphore: a counting semaphore in Redis whose permits expire with their
// holder, awaited across processes.
//
// "At most 3 concurrent exports against the partner API": the semaphore has
// N permits; a caller takes k of them (one permit set, with its own id and
// lease) and gives them back by that id. While a set is held, the client's
// watchdog renews its lease (lease/3, in the same batch as the locks'), so a
// holder that crashes or hangs gives its permits back when its lease runs
// out — the "permit-expirable semaphore" property is the only mode here,
// never an option. A permit set that is lost (its lease ran out) is told as
// a lock's is: lost(), the stop token, the on_lost callback.
//
//   LockClient locks(redis, {.publisher = kafka});
//   Semaphore api = locks.Semaphore("partner-api");
//   api.TrySetPermits(3);                                // once, anyone
//   PermitResult r = api.AcquireFor(1, std::chrono::seconds(30));
//   if (r) { call_partner(r.permits.stop_token()); }     // released at scope
//   end
//
// Fairness. Waiters queue in Redis in arrival order and are served in that
// order (strict FIFO: a waiter that needs 3 permits is not overtaken by
// later ones that need 1, so it is never starved). A release (or an
// expiry, or AddPermits) that frees permits hands them, in the same
// script, to the first queued waiters that fit — each gets its permit set
// at once, with the claim window as its lease — and publishes one event
// naming the grantees, so only those threads wake, in whatever process
// they are; the grantee claims its set with one script call that sets its
// own lease. A grant nobody claims within claim_window comes back. A try
// (TryAcquire, or a wait whose deadline has passed) never queues and gets
// permits only when no live waiter is queued ahead of it.
//
// Waking. As for the lock: the waiter's slot is registered before its
// first attempt (listen first), a release in this process wakes its
// grantees directly, other processes' grantees wake through the unlock
// event (cause kPermits), and every park is bounded by min(remaining wait,
// the earliest permit set's remaining lease, presence_window / 3,
// park_cap). An event is a hint: permits are granted only by the scripts,
// so a lost, late, duplicated or forged event costs latency, never a
// permit too many.
//
// Safety: the permits out (held, or handed to a grantee and not yet
// claimed or expired) never exceed the semaphore's permits, counted at the
// moment each set was granted: lowering the permits (AddPermits(-d)) does
// not take back sets already out — no new set is granted until enough of
// them are given back or expire.
//
// Keys (all in the Redis Cluster slot of the hash tag {NAME}, shared with
// the lock of the same name): "<prefix>:{NAME}:semaphore" (a hash: permits,
// used, and "p:<id>" = k per permit set out; it does not expire),
// ":semaphore:expiry" (a sorted set: permit id -> lease end, server ms),
// ":semaphore:queue" and ":semaphore:waiters" (the fair queue), and reply
// latches ":latch:<request id>". Every change is one Lua script (scripts.h).
//
// Replica acknowledgement (LockClientOptions::min_replicas) works as for the
// lock: a grant the replicas did not acknowledge is given back and the call
// throws Error(kRedisReplicas).
//
// Thread-safety: all methods are thread-safe. A Semaphore shares its
// LockClient's state; a Permits object is used by one thread at a time,
// except lost(), valid_until() and the accessors.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

#include "lockfleet/lockcore/clock.h"
#include "lockfleet/lockcore/lease.h"
#include "lockfleet/lockcore/lock_client.h"

namespace lockfleet {

namespace internal {
class LockCore;
struct HeldLock;
}  // namespace internal

// The most permits a semaphore may have, and a call may take.
inline constexpr int64_t kMaxSemaphorePermits = 1'000'000'000;

// Called once when a held permit set is lost, on the watchdog thread, with
// the semaphore's name and the set's permit count. Keep it short; it must
// not throw.
using PermitsLostCallback =
    std::function<void(const std::string& name, int64_t permits)>;

struct PermitOptions {
  // Explicit lease: the permits come back after this unless released, and
  // are not renewed. Default: none — the watchdog renews default_lease
  // until release.
  std::optional<std::chrono::milliseconds> lease;
  std::stop_token stop;         // Default: never stops. Cancels waiting.
  PermitsLostCallback on_lost;  // Default: none
};

// One permit set: k permits of one semaphore, and the RAII guard that gives
// them back. Move-only; a default-constructed or moved-from Permits holds
// nothing.
class Permits {
 public:
  Permits() noexcept;
  ~Permits();  // releases best effort (never throws; failures are counted)
  Permits(Permits&& other) noexcept;
  Permits& operator=(Permits&& other) noexcept;  // releases the current first
  Permits(const Permits&) = delete;
  Permits& operator=(const Permits&) = delete;

  bool held() const noexcept { return held_ != nullptr; }
  explicit operator bool() const noexcept { return held(); }

  // REQUIRES: held(). The semaphore's name, this set's id (what
  // Semaphore::Release takes) and how many permits it has.
  const std::string& name() const;
  const std::string& id() const;
  int64_t count() const;

  // As Lease's: true once the set is known or presumed lost (its lease ran
  // out, or Redis said it is gone).
  bool lost() const noexcept;
  std::stop_token stop_token() const;
  Clock::TimePoint valid_until() const;  // REQUIRES: held()

  // Gives the permits back: kReleased, or kNotHeld (the set had expired or
  // was released by id already). Idempotent under retry (a reply latch).
  // Throws Error on a Redis failure; the set is then dropped locally (no
  // more renewals) and its permits come back when its lease runs out.
  // REQUIRES: held().
  ReleaseStatus Release();

 private:
  friend class internal::LockCore;
  Permits(std::shared_ptr<internal::LockCore> core,
          std::shared_ptr<internal::HeldLock> held) noexcept;

  std::shared_ptr<internal::LockCore> core_;
  std::shared_ptr<internal::HeldLock> held_;
};

struct PermitResult {
  AcquireStatus status = AcquireStatus::kTimedOut;
  Permits permits;  // held() iff status == kAcquired
  // When not acquired: the permits free as the last attempt saw them.
  int64_t available = 0;
  int attempts = 0;  // acquire scripts run
  // The last Redis error the call rode out (empty if none).
  std::string last_error;
  explicit operator bool() const { return status == AcquireStatus::kAcquired; }
};

struct SemaphoreInfo {
  bool exists = false;    // TrySetPermits / AddPermits made it
  int64_t permits = 0;    // the semaphore's permits
  int64_t used = 0;       // out: held, or handed to a grantee (may exceed
                          // permits after they were lowered)
  int64_t available = 0;  // max(0, permits - used)
  int64_t holders = 0;    // permit sets out
  int64_t waiters = 0;    // queued waiters (live or not yet skipped)
};

class Semaphore {
 public:
  const std::string& name() const { return name_; }

  // Sets the permits if the semaphore does not exist. True if this call set
  // them (also when a retry of it finds its own setting); false if it
  // exists. Throws Error(kInvalidArgument) for permits outside
  // 0..kMaxSemaphorePermits; Error for Redis failures (kRedisReplicas: set,
  // not acknowledged by the replicas).
  bool TrySetPermits(int64_t permits);

  // Adds `delta` permits (negative: removes them; a semaphore that does not
  // exist is made with `delta`) and returns the new number. Permits freed
  // by it go to the queue at once. Throws Error(kInvalidArgument) if the
  // result would be below 0 or above kMaxSemaphorePermits (nothing
  // changed); Error for Redis failures — retry-safe: a retry after a lost
  // reply returns the first reply instead of adding again.
  int64_t AddPermits(int64_t delta);

  // Sets the semaphore's permits to `permits` (making it if it does not
  // exist): as AddPermits with the difference, but idempotent — every
  // process of a fleet may set the number its config says. Throws
  // Error(kInvalidArgument) outside 0..kMaxSemaphorePermits.
  void SetPermits(int64_t permits);

  // A snapshot (one script, read-only).
  SemaphoreInfo Inspect();

  // Takes `permits` permits: one try, never queues.
  PermitResult TryAcquire(int64_t permits = 1,
                          const PermitOptions& options = {});
  // Waits up to `timeout` / `deadline` (on the client's clock); a zero
  // timeout or a deadline already past is one try.
  PermitResult AcquireFor(int64_t permits, Clock::Duration timeout,
                          const PermitOptions& options = {});
  PermitResult AcquireUntil(int64_t permits, Clock::TimePoint deadline,
                            const PermitOptions& options = {});
  // Waits without a time limit. Throws Error(kCancelled) if options.stop is
  // triggered first.
  Permits Acquire(int64_t permits = 1, const PermitOptions& options = {});
  // Every acquisition throws Error(kInvalidArgument) for permits outside
  // 1..kMaxSemaphorePermits, more permits than the semaphore has (also
  // when they are lowered below it while the call waits: the call leaves
  // the queue) and a non-positive lease, and Error(kInvalidArgument) naming
  // the semaphore when it does not exist (TrySetPermits first). Redis
  // outages are ridden out as a lock wait does (outage_grace).

  // Gives back the permit set `permit_id` (a Permits::id(), e.g. recorded
  // by a holder that is gone): kReleased, or kNotHeld. If this client holds
  // that set, its Permits count as released from now on.
  ReleaseStatus Release(std::string_view permit_id);

 private:
  friend class LockClient;
  Semaphore(std::shared_ptr<internal::LockCore> core, std::string name);

  std::shared_ptr<internal::LockCore> core_;
  std::string name_;
};

}  // namespace lockfleet
