// Multi-lock: several locks taken all-or-nothing and released together
// (LockClient::TryAcquireAll / AcquireAllFor / AcquireAllUntil).
//
// "Move stock from product A to product B" needs both locks; two jobs doing
// A->B and B->A must not deadlock. The locks are taken one by one in one
// canonical order — the names sorted by their bytes — whatever order the
// caller gives, so two multi-locks over overlapping names never wait on
// each other in a cycle. Each lock is an ordinary lock of the same name
// (same keys, fair queue, fencing token, watchdog, unlock events): a single
// `LockClient::Acquire("A")` elsewhere excludes a multi-lock over A and the
// other way round. One deadline covers the whole call: when a lock is not
// granted in time (or the stop token is triggered), the locks already taken
// are released, in reverse order, before the call returns — it never
// returns holding a strict subset.
//
//   AcquireAllResult r = locks.AcquireAllFor({"stock:B", "stock:A"}, 5s);
//   if (!r) return;                      // r.blocked_on says which one
//   r.lease.lease("stock:A").fence()     // each lock's own fencing token
//   ...                                  // both released when r.lease ends
//
// Where the names can share one Lua script — one Redis server (standalone,
// Sentinel), or on a Redis Cluster names whose keys share a hash slot —
// the call first tries all of them in one script, all or none: a free
// multi-lock costs one round trip, and a try (TryAcquireAll) that is
// refused has held none of them, not even for a moment (but for a lost
// reply whose retry is refused: the first try's grants are given back
// before the call returns). A lock counts as
// free as for a single acquisition: fair mode (the default) does not take a
// free lock past a live waiter queued on it, a lock this client holds under
// the caller's owner token is re-entered, and a grant under the thread's
// own token that this client does not hold (revived by a rollback, given
// up on) is replaced by a new one, in the one-script try and in the waits
// below alike. Refused, a call that may wait takes the locks
// one by one in the canonical order, queueing as any acquisition does.
// While it waits for the i-th lock it holds the ones before it, as any
// lock-ordering scheme does: waiters on those wait behind it.
//
// Thread-safety: a MultiLease is used by one thread at a time, like Lease.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lockfleet/lockcore/lease.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/observer.h"

namespace lockfleet {

// The most names one multi-lock takes.
inline constexpr size_t kMaxMultiLockNames = 256;

// What MultiLease::Release did with one of its leases.
struct LeaseRelease {
  std::string name;
  int64_t fence = 0;
  // Its release status; nullopt when its release threw (`error` says why:
  // that lock frees when its lease runs out).
  std::optional<ReleaseStatus> status;
  std::string error;
};

// The leases of one multi-lock, in canonical (sorted) order. Releases them
// all, in reverse order, on destruction or Release().
class MultiLease {
 public:
  MultiLease() noexcept = default;
  explicit MultiLease(std::vector<Lease> leases) noexcept
      : leases_(std::move(leases)) {}
  MultiLease(MultiLease&&) noexcept = default;
  MultiLease& operator=(MultiLease&& other) noexcept;
  MultiLease(const MultiLease&) = delete;
  MultiLease& operator=(const MultiLease&) = delete;
  ~MultiLease();

  // Whether it holds its locks (all of them: never a subset).
  bool held() const noexcept { return !leases_.empty(); }
  explicit operator bool() const noexcept { return held(); }

  const std::vector<Lease>& leases() const noexcept { return leases_; }
  // The lease of `name`. Throws Error(kInvalidArgument) if it is not one of
  // them.
  const Lease& lease(std::string_view name) const;

  // Whether any of its leases was lost (see Lease::lost): the set is no
  // longer held as a whole. Unlike Lease::lost, not for another thread
  // while this one may Release or move it.
  bool lost() const noexcept;

  // Releases every lease, in reverse order — each one even when an earlier
  // release threw. Returns the first status that was not kReleased
  // (kStillHeld, kNotHeld ...), else kReleased; kNotHeld when it held
  // nothing. Then throws the first Error a release threw, if any (that
  // lease frees when its lease runs out; see Lease::Release).
  ReleaseStatus Release();
  // The same, and when `each` is not null, also appends to it what became
  // of every lease, in release order (newest first): a caller that must say
  // which lock was no longer held, or which release failed.
  ReleaseStatus Release(std::vector<LeaseRelease>* each);

 private:
  friend class LockClient;
  // A multi-lock's grant, reported to `observer` (may be null) when it is
  // released.
  MultiLease(std::vector<Lease> leases, std::shared_ptr<LockObserver> observer,
             std::shared_ptr<Clock> clock);

  std::vector<Lease> leases_;
  std::shared_ptr<LockObserver> observer_;
  std::shared_ptr<Clock> clock_;
  Clock::TimePoint acquired_at_{};
};

struct AcquireAllResult {
  AcquireStatus status = AcquireStatus::kTimedOut;
  MultiLease lease;  // held() iff status == kAcquired
  // When not acquired: the lock that was not granted in time, and its
  // holder and remaining TTL as the last attempt saw them.
  std::string blocked_on;
  std::string holder;
  std::chrono::milliseconds holder_ttl{0};

  explicit operator bool() const { return status == AcquireStatus::kAcquired; }
};

}  // namespace lockfleet
