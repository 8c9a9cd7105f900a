// CountDownLatch: a countdown latch in Redis, awaited across processes.
//
// One process sets the count ("12 shards"), the workers count down ("shard
// 3 finished"), and every process awaiting it goes on when the count
// reaches 0 ("start the merge"). Awaiting parks like a lock waiter: the
// count-down that opens the latch wakes this process's awaiters directly
// and publishes one UnlockEvent (cause kOpened) that wakes the awaiters of
// every other process; each park is bounded by the client's park_cap, after
// which the awaiter asks Redis again. The event is a hint: an awaiter
// returns kOpened only when Redis says the count is 0, so a lost, late,
// duplicated or forged event costs latency, never an early opening.
//
//   LockClient locks(redis, {.publisher = kafka});
//   CountDownLatch done = locks.Latch("nightly-merge");
//   done.TrySetCount(12);                       // the coordinator, once
//   done.CountDown("shard-3");                  // each shard, when finished
//   if (done.AwaitFor(std::chrono::hours(1)) == AwaitStatus::kOpened) ...
//
// Semantics:
//   - A latch that does not exist is not open: Await waits for it to be set
//     and counted down (a process may await before the coordinator sets
//     it). An opened latch stays open for `open_ttl` (LatchOptions, chosen
//     by the setter: 1 minute to 30 days), then its key expires and the
//     name may be set again. An awaiter that cannot ask Redis for longer
//     than open_ttl after the opening (a process paused that long) finds
//     no latch, and waits until its deadline: choose open_ttl well above
//     the longest such absence, and give waits a timeout.
//   - Each count-down has an id, named by the caller after the piece of
//     work it reports ("shard-3"); an id counts once per round (from a set
//     to the key's expiry). So a retry after a lost reply (EvalRetryOnce)
//     counts once, a repeated report of the same piece of work counts once,
//     and a CountDown that threw (it may have counted) is repeated with its
//     id. When a latch name is reused round after round, put the round in
//     the id ("2026-11-29/shard-3"): a late report of yesterday's shard 3
//     must not count for today's.
//   - While it counts, the latch key has no expiry (a count must not vanish
//     before the work it waits for is done).
//   - With min_replicas (LockClientOptions), a set or count-down the
//     replicas did not acknowledge throws Error(kRedisReplicas): repeat it
//     (with the same id) rather than trust a change a failover may undo.
//   - Await rides out Redis outages as a lock wait does (outage_grace).
//
// Keys: "<prefix>:{NAME}:countdown" (a hash; see scripts.h). The name
// follows the lock name rules and shares the lock's hash tag, so on Redis
// Cluster it lives in the slot of the lock of the same name.
//
// Thread-safety: all methods are thread-safe. A CountDownLatch shares its
// LockClient's state: it stays usable after the LockClient is destroyed,
// but is then woken only by its bounded parks.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>

#include "lockfleet/lockcore/clock.h"

namespace lockfleet {

namespace internal {
class LockCore;
}

// The range of LatchOptions::open_ttl.
inline constexpr std::chrono::milliseconds kMinLatchOpenTtl{60'000};
inline constexpr std::chrono::milliseconds kMaxLatchOpenTtl{30LL * 24 *
                                                            3'600'000};

struct LatchOptions {
  // How long an opened latch stays open (its key then expires):
  // kMinLatchOpenTtl..kMaxLatchOpenTtl.
  std::chrono::milliseconds open_ttl{std::chrono::minutes(10)};
};

// The largest count a latch may be set to (each count-down id is kept in
// Redis until the latch expires).
inline constexpr int64_t kMaxLatchCount = 1'000'000;
// The longest count-down id, in bytes.
inline constexpr size_t kMaxCountDownIdBytes = 256;

enum class CountDownStatus {
  kCounted,      // counted, or this id was counted before (remaining 0:
                 // the latch has opened since)
  kOpened,       // this id opened the latch (also for a repeat of it:
                 // not once-only — run one-time follow-up work after
                 // Await, or under a lock, not on this status)
  kAlreadyOpen,  // the latch was open already: nothing counted
  kNoLatch,      // no such latch (never set, or expired after opening)
};
// "counted", "opened", "already_open", "no_latch".
const char* CountDownStatusName(CountDownStatus status) noexcept;

struct CountDownResult {
  CountDownStatus status = CountDownStatus::kNoLatch;
  int64_t remaining = 0;  // the count left (0 once open)
};

enum class AwaitStatus {
  kOpened,     // Redis says the count is 0
  kTimedOut,   // the deadline passed first
  kCancelled,  // the stop token was triggered first
};
// "opened", "timed_out", "cancelled".
const char* AwaitStatusName(AwaitStatus status) noexcept;

class CountDownLatch {
 public:
  const std::string& name() const { return name_; }

  // Sets the count if the latch does not exist. True if this call set it
  // (also when a retry of it finds its own setting); false if the latch
  // exists (counting, or open and not expired yet). Throws
  // Error(kInvalidArgument) for a count outside 1..kMaxLatchCount or an
  // open_ttl outside kMinLatchOpenTtl..kMaxLatchOpenTtl; Error for Redis
  // failures (kRedisReplicas: set, but not acknowledged by the replicas).
  bool TrySetCount(int64_t count, const LatchOptions& options = {});

  // Counts down once for `id`. When the count reaches 0, the latch opens:
  // this process's awaiters wake at once and, with a publisher, one kOpened
  // event goes to the other processes (also when the opening then throws
  // kRedisReplicas). Throws Error(kInvalidArgument) for an empty id or one
  // longer than kMaxCountDownIdBytes; Error for Redis failures (the
  // count-down may then have counted: repeat it with the same id, which
  // counts at most once).
  CountDownResult CountDown(std::string_view id);

  // The count left: 0 open, -1 no such latch. One round trip.
  int64_t Count();

  // Waits until the latch is open, up to `timeout` / `deadline` (on the
  // client's clock); a zero timeout checks once. Throws Error for Redis
  // failures.
  AwaitStatus AwaitFor(Clock::Duration timeout,
                       const std::stop_token& stop = {});
  AwaitStatus AwaitUntil(Clock::TimePoint deadline,
                         const std::stop_token& stop = {});

 private:
  friend class LockClient;
  CountDownLatch(std::shared_ptr<internal::LockCore> core, std::string name);

  std::shared_ptr<internal::LockCore> core_;
  std::string name_;
};

}  // namespace lockfleet
