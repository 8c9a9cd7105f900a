// LockClient: the distributed lock.
//
// One LockClient per process (per Redis deployment) is the intended use: it
// owns the lease watchdog (one thread renewing every held lock in batches)
// and the local wait table where threads that failed to acquire park until a
// release wakes them.
//
// Locks live in Redis under keys that share one Redis Cluster hash tag per
// lock: "<prefix>:{<name>}:lock" (a hash: owner, count, fence, holds,
// pending), ":queue" and ":waiters" (fair mode), and short-lived reply
// latches ":latch:<request id>". Fencing tokens come from one counter per
// hash slot, "<prefix>:fence:{<tag>}" with a tag in the lock's slot: at most
// 16384 keys that never expire, however many lock names there are. A token
// is max(the slot's last token + 1, the Redis server's clock in
// microseconds), so tokens strictly increase per lock name, and a counter
// rolled back by a failover or an empty restart does not repeat them (unless
// the new server's clock is behind the old one's by more than the rollback
// took; see docs/lockcore.md, "Fencing after a failover").
//
// Acquiring. Every attempt is one Lua script that grants the lock if it is
// free or already ours (reentrancy), and otherwise reports the holder and the
// lock's remaining TTL. A failed attempt in a timed or blocking acquisition
// parks the thread on a local wait slot that was registered *before* the
// attempt (so a release racing the attempt is never missed), for at most
// min(remaining wait, the lock's remaining TTL, park_cap). It wakes early when
// a holder in this process releases, or when the UnlockPublisher transport
// delivers an unlock event (DeliverUnlockEvent). Either way it retries: the
// wake-up is a hint, Redis is the truth.
//
// Fairness. In fair mode (the default) a waiter that is refused joins a
// queue kept in Redis next to the lock ("<prefix>:{<name>}:queue" and
// ":waiters"). A release that frees the lock grants it, in the same script,
// to the first waiter whose presence has not lapsed — new fencing token, the
// claim window as its lease — and the unlock event names that waiter, so only
// its thread wakes, in whatever process it is: no herd, no barging. A call
// whose lease the watchdog renews, under the calling thread's own owner
// token (no AcquireOptions::owner), is granted in full (its hold) and
// confirms the grant with one read, its watchdog extending the lease soon
// after; one with an explicit lease (or min_replicas) claims the grant with
// one script call that sets its own lease. A
// waiter that times out or is cancelled leaves the queue, passing on a grant
// that reached it meanwhile. Presence: while a waiter is queued, the
// client's watchdog refreshes its place twice per min(park_cap,
// presence_window / 3), for all of the client's queued waiters in one
// pipelined round trip, and in the same script looks for what the waiter
// must act on — a grant handed to it, a place it lost, the lock free with
// it first or held under its owner token — and wakes it then. The waiter's
// parks keep their bound, but while the watchdog's checks keep coming it parks
// on without a round trip of its own; when they stop (the watchdog fell
// behind), it tries itself. So a lost event costs at most min(park_cap,
// presence_window / 3), as before, and a queued waiter's place costs one
// pipelined refresh instead of one attempt per waiter. Barging (fair = false,
// per client or per call) ignores the queue.
//
// Spinning. The head of the queue — the waiter the next release will grant
// to, as its refused attempt and the hand-offs seen since tell — need not
// wait for the event when the lock is held briefly: where this process's
// own holds of the lock last at most spin_max_hold, it parks only until
// about when the holder should release (the hold's start comes from Redis)
// and then checks for its grant with one read (or, for a grant to claim,
// one script call that claims it) if it is there (at most 3 checks, then
// it parks for the event as everybody
// else). The check claims only a grant the release already made to this
// waiter, so spinning changes how fast the grantee learns of its grant,
// never who gets it. The timing adapts per lock to whether checks came too
// early or too late; a lock whose checks win nothing is spun on less and
// less often (see lockcore/src/spin_advisor.h).
//
// Time bounds and Redis faults. Every script call of a timed acquisition is
// bounded by the time left (each try at least kMinAttemptBudget), and no
// retry starts past the deadline; a waiter giving up spends at most
// kGiveUpBudget leaving the queue, and as much giving back the holds whose
// acquire reply was lost. So AcquireFor(t) / AcquireUntil return shortly
// after the deadline whatever Redis does: by the deadline +
// kMinAttemptBudget + 2 x (kGiveUpBudget + kMinAttemptBudget), plus
// scheduling delay (a new connection's connect, AUTH and SELECT count
// against the same budget).
// options.stop is checked between attempts and cancels a park at once; an
// attempt in flight finishes within its bound. A waiting acquisition rides out
// Redis failures (unreachable, timeouts, LOADING/BUSY/READONLY) once this
// client has reached Redis: it backs off (parked, so a wake-up or stop still
// ends the pause) and tries again, for at most outage_grace per outage; when
// the deadline passes during an outage the result is kTimedOut with last_error
// set. A client that has never reached Redis, an outage longer than
// outage_grace, and TryAcquire throw Error without waiting — after at most
// kGiveUpBudget giving back the call's hold if a try's reply was lost (the
// script may have granted it).
//
// Owners. The default owner token is "<client_id>:<thread-number>", unique per
// client and thread, so reentrancy is per thread. A caller may pass its own
// token (AcquireOptions::owner) to share a hold across threads or processes.
//
// Thread-safety: all methods may be called from any thread concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "lockfleet/lockcore/clock.h"
#include "lockfleet/lockcore/latch.h"
#include "lockfleet/lockcore/lease.h"
#include "lockfleet/lockcore/observer.h"
#include "lockfleet/lockcore/redis_client.h"
#include "lockfleet/lockcore/unlock_event.h"

namespace lockfleet {

// Longest accepted lock name, in bytes. Names are binary-safe otherwise, but
// must not be empty or start with '}' (the lock's keys share the hash tag
// "{NAME", which a leading '}' would leave empty).
inline constexpr size_t kMaxLockNameBytes = 1024;

struct LockClientOptions {
  std::string key_prefix = "lockfleet";            // non-empty, no '{' or '}'
  std::chrono::milliseconds default_lease{30000};  // watchdog lease, >= 30ms
  std::chrono::milliseconds park_cap{1000};        // longest single park, > 0
  // Fair mode (the default): waiters queue in Redis in arrival order and a
  // release hands the lock straight to the first live one (see "Fairness").
  bool fair = true;
  // A queued waiter's place is refreshed (by the client's watchdog) at
  // least every presence_window / 3; one that stops (died, hung) is skipped
  // once this much time has passed. >= 30ms.
  std::chrono::milliseconds presence_window{3000};
  // A handed-off lock the grantee has not claimed within this passes on.
  // Must exceed presence_window / 3 (the longest a queued waiter's place goes
  // unchecked, by its watchdog or its own attempt) and not exceed
  // presence_window (so a dead waiter costs at most one presence window).
  // The releaser's claim window applies to its hand-off, and the waiter's
  // presence window to its place: use the same windows in every process.
  std::chrono::milliseconds claim_window{2000};
  std::shared_ptr<Clock> clock;                // Default: SteadyClock()
  std::shared_ptr<UnlockPublisher> publisher;  // Default: none
  // Must be unique among live clients: owner tokens and hold ids derive
  // from it, so two clients given the same id would share holds. Default:
  // client_id_prefix followed by 16 random hex digits.
  std::string client_id;
  // Readable text in front of the default client id (say "host:pid:", so an
  // operator reading "held by ..." sees where the holder runs); the random
  // part keeps it unique. Only with client_id empty.
  std::string client_id_prefix;
  std::shared_ptr<LockObserver> observer;  // Default: none (metrics)
  // How long a waiting acquisition keeps trying through one Redis outage
  // (see "Time bounds and Redis faults"). >= 0; 0 = never.
  std::chrono::milliseconds outage_grace{10000};
  // How long release, abandon and force-unlock keep their reply for a retry
  // of the same request (one small key per call). Must exceed the time
  // between a first try and its retry: 2 x the Redis command timeout plus a
  // connect is the worst case. >= 1s.
  std::chrono::milliseconds retry_latch{10000};
  // Replica acknowledgement (see "Replica acknowledgement"). When > 0, every
  // grant, claim, renewal, release and force-unlock (not the clean-ups of a
  // call that gives up: abandon, give-backs, bounded by kGiveUpBudget) is
  // followed on its connection by WAIT min_replicas replica_timeout. A grant
  // fewer replicas acknowledged is given back and the call throws
  // Error(kRedisReplicas); a renewal they did not acknowledge does not extend
  // the lease's validity (the watchdog tries again); a release or hand-off they
  // did not acknowledge stands and is counted (OnError(kRedisReplicas)).
  // 0..100; 0 = off (the default).
  int min_replicas = 0;
  // WAIT's timeout: how much longer a change may take when replicas lag.
  // > 0 (WAIT 0 would wait for ever).
  std::chrono::milliseconds replica_timeout{1000};
  // Adaptive spinning (fair mode, see "Spinning"): the head of a lock's
  // queue checks for its grant itself, a few times around the moment the
  // holder is expected to release, when this process's own holds of the
  // lock last at most this long (on average). 0 = never spin. >= 0.
  std::chrono::milliseconds spin_max_hold{5};
};

// The floor of each try's budget in a timed acquisition, and the most a
// waiter that gives up spends leaving the queue (see "Time bounds").
inline constexpr std::chrono::milliseconds kMinAttemptBudget{50};
inline constexpr std::chrono::milliseconds kGiveUpBudget{250};

// Called once when a held grant is lost (see lease.h), on the watchdog
// thread. Keep it short; it must not throw, and must not block on the lock.
using LostCallback =
    std::function<void(const std::string& name, int64_t fence)>;

struct AcquireOptions {
  // Explicit lease: the lock expires after this unless released, and is not
  // renewed. Default: none — the watchdog renews default_lease until release.
  std::optional<std::chrono::milliseconds> lease;
  std::string owner;     // Default: empty — the calling thread's owner token
  std::stop_token stop;  // Default: never stops. Cancels waiting.
  LostCallback on_lost;  // Default: none
  // Queue fairly (true) or barge (false). Default: LockClientOptions::fair.
  std::optional<bool> fair;
};

enum class AcquireStatus { kAcquired, kTimedOut, kCancelled };

const char* AcquireStatusName(AcquireStatus status) noexcept;

struct AcquireResult {
  AcquireStatus status = AcquireStatus::kTimedOut;
  Lease lease;  // held() iff status == kAcquired
  // When not acquired: the holder and its remaining TTL seen by the last
  // attempt (holder may be empty if the lock freed at the very end). After
  // a queued fair attempt the TTL is the grant's own record (scripts'
  // `exp`), which lags a renewal: then shorter than the real one.
  std::string holder;
  std::chrono::milliseconds holder_ttl{0};
  int attempts = 0;  // acquire scripts run
  // The last Redis error the call rode out (empty if none): set when a wait
  // timed out during a Redis outage.
  std::string last_error;

  explicit operator bool() const { return status == AcquireStatus::kAcquired; }
};

struct QueuedWaiter {
  std::string waiter_id;  // unique per waiting call
  std::string owner;      // the owner token it will hold the lock as
  std::chrono::milliseconds presence_left{0};  // until it is skipped as dead
};

struct LockInfo {
  bool locked = false;
  std::string owner;                 // empty when unlocked
  int64_t hold_count = 0;            // reentrant holds of the owner
  std::chrono::milliseconds ttl{0};  // remaining lease; 0 when unlocked
  int64_t fence = 0;                 // fencing token of the current grant
  int64_t last_fence = 0;            // highest token ever issued for the name
  // Fair mode: the waiter the lock was handed to and that has not claimed it
  // yet (owner is then its owner token), and the queue, first in line first.
  std::string pending_waiter;
  std::vector<QueuedWaiter> queue;
};

// Which grant a force-unlock may remove. Default: whichever is current.
// With an expectation, a grant other than the expected one is left alone
// (ForceUnlockResult::mismatch): an operator who looked at `inspect` removes
// exactly the grant seen, never the next holder's.
struct ForceUnlockOptions {
  std::string expect_owner;  // Default: empty — any owner
  int64_t expect_fence = 0;  // Default: 0 — any fencing token
};

struct ForceUnlockResult {
  bool was_locked = false;  // a grant was removed
  // The lock is held by a grant other than the expected one: untouched.
  // previous_owner / previous_fence then name the current grant.
  bool mismatch = false;
  std::string previous_owner;
  int64_t previous_fence = 0;
};

// Counters since construction. Monotonic except `waiting`.
struct LockStats {
  // Acquire scripts run, and reads confirming a hand-off in full.
  uint64_t attempts = 0;
  uint64_t contended_attempts = 0;  // ... that found another holder
  uint64_t acquisitions = 0;        // grants, reentrant ones included
  uint64_t timeouts = 0;
  uint64_t cancellations = 0;
  uint64_t releases = 0;            // holds given back (Released/StillHeld)
  uint64_t releases_not_held = 0;   // release found the lock gone
  uint64_t releases_not_owner = 0;  // release refused: someone else holds it
  uint64_t release_failures = 0;    // release threw (Redis error)
  uint64_t wakeups_local = 0;       // woken by a release in this process
  // Waiters granted the lock by a release in this process directly (no
  // claim round trip); counted in wakeups_local and acquisitions too.
  uint64_t direct_grants = 0;
  uint64_t wakeups_event = 0;  // woken by DeliverUnlockEvent
  uint64_t wakeups_bound = 0;  // park bound expired
  uint64_t spins = 0;          // spin checks sent by queue heads
  uint64_t wakeups_spin = 0;   // ... that found and claimed the grant
  // Parked fair waiters' presence, refreshed by the watchdog for all of
  // them in one pipelined round trip (lockcore.md, "Presence"): refreshes
  // sent, and the waiters they woke because they had to try again (handed
  // the lock, dropped, or the lock free; counted in wakeups_bound too).
  uint64_t presence_refreshes = 0;
  uint64_t presence_wakes = 0;
  uint64_t renewals = 0;          // successful lease renewals
  uint64_t renewal_failures = 0;  // renewals that threw or lacked replicas
  uint64_t leases_lost = 0;
  uint64_t events_published = 0;
  uint64_t events_received = 0;
  uint64_t force_unlocks = 0;
  uint64_t forced_checks =
      0;                      // grants checked because a force event named them
  uint64_t outage_waits = 0;  // back-offs of waiting calls during Redis faults
  // Changes fewer than min_replicas replicas acknowledged (grants given
  // back, renewals not counted as such, releases and hand-offs).
  uint64_t replica_shortfalls = 0;
  int64_t waiting = 0;  // threads currently in a timed/blocking acquire
  // Countdown latches (latch.h).
  uint64_t latch_parks = 0;     // parks of awaiters that found it not open
  uint64_t latches_opened = 0;  // count-downs of this client that opened one
  int64_t latch_waiting = 0;    // threads currently in an Await
  // Semaphores (semaphore.h).
  uint64_t permit_acquisitions = 0;  // permit sets granted
  uint64_t permit_releases = 0;      // ... given back (kReleased)
  // Parks of refused semaphore and read-write lock waiters, and the threads
  // waiting for either now.
  uint64_t permit_parks = 0;
  int64_t permit_waiting = 0;
  // Read-write locks (rwlock.h).
  uint64_t rw_acquisitions = 0;  // read and write holds granted
  uint64_t rw_releases = 0;      // ... given back (kReleased)
};

struct AcquireAllResult;  // multi_lock.h
class Semaphore;          // semaphore.h
class ReadWriteLock;      // rwlock.h

class LockClient {
 public:
  // Throws Error(kInvalidArgument) for bad options.
  explicit LockClient(std::shared_ptr<RedisClient> redis,
                      LockClientOptions options = {});
  // Stops the watchdog. Leases still held stay usable for Release(), but
  // nothing renews them any more or tells them when they end: they become
  // lost() and their stop tokens are requested (their on_lost callbacks do
  // not run).
  ~LockClient();
  LockClient(const LockClient&) = delete;
  LockClient& operator=(const LockClient&) = delete;

  // One attempt, no waiting.
  AcquireResult TryAcquire(std::string_view name,
                           const AcquireOptions& options = {});

  // Waits up to `timeout` (or until `deadline` on options.clock). A zero or
  // negative timeout (or a deadline already past) makes exactly one attempt,
  // as TryAcquire does: it never joins the queue.
  AcquireResult AcquireFor(std::string_view name, Clock::Duration timeout,
                           const AcquireOptions& options = {});
  AcquireResult AcquireUntil(std::string_view name, Clock::TimePoint deadline,
                             const AcquireOptions& options = {});

  // Waits without a time limit. Throws Error(kCancelled) if options.stop is
  // triggered first.
  Lease Acquire(std::string_view name, const AcquireOptions& options = {});

  // Multi-lock (multi_lock.h, which callers include): every lock of
  // `names`, all-or-nothing, taken in sorted order and released together;
  // one deadline for all. Throws Error(kInvalidArgument) for an empty list,
  // more than kMaxMultiLockNames names, a duplicate name or a bad one.
  AcquireAllResult TryAcquireAll(const std::vector<std::string>& names,
                                 const AcquireOptions& options = {});
  AcquireAllResult AcquireAllFor(const std::vector<std::string>& names,
                                 Clock::Duration timeout,
                                 const AcquireOptions& options = {});
  AcquireAllResult AcquireAllUntil(const std::vector<std::string>& names,
                                   Clock::TimePoint deadline,
                                   const AcquireOptions& options = {});

  // A consistent snapshot of the lock's state in Redis (one script).
  LockInfo Inspect(std::string_view name);

  // Deletes the lock's current grant (or only the expected one, see
  // ForceUnlockOptions), hands it to the first live queued waiter, wakes a
  // local waiter and publishes a kForce unlock event. A holder in this
  // client is marked lost at once; one elsewhere learns of it from Redis at
  // its next renewal or, sooner, when the kForce event makes it check.
  // Retry-safe: a retry after a lost reply returns the first reply (a reply
  // latch), so it never removes the next holder's grant.
  ForceUnlockResult ForceUnlock(std::string_view name,
                                const ForceUnlockOptions& options = {});

  // The countdown latch `name` (see latch.h): a handle, nothing is sent.
  // Throws Error(kInvalidArgument) for a name a lock could not have.
  CountDownLatch Latch(std::string_view name);

  // The semaphore `name` (semaphore.h, which callers include): a handle,
  // nothing is sent. Throws Error(kInvalidArgument) for a name a lock could
  // not have.
  lockfleet::Semaphore Semaphore(std::string_view name);

  // The read-write lock `name` (rwlock.h, which callers include): a handle,
  // nothing is sent. Throws Error(kInvalidArgument) for a name a lock could
  // not have.
  lockfleet::ReadWriteLock ReadWriteLock(std::string_view name);

  // Entry point for the notification transport: wakes at most one local
  // waiter parked on event.lock (every awaiter of the latch event.lock, for
  // a kOpened event; the named grantees of the semaphore or read-write lock
  // event.lock, or one read-write lock waiter when none is named, for a
  // kPermits event). An event is a hint, never an authority: a
  // kForce event naming a grant this client holds makes it check the grant
  // with Redis at once (a renewal); only Redis's "not ours" marks the lease
  // lost. Events this client published itself are ignored (its waiters were
  // woken directly). Never throws.
  void DeliverUnlockEvent(const UnlockEvent& event) noexcept;

  // A transport that fetches only the events of the names this process
  // waits on (KafkaNotifier::Subscribe sets its own in targeted fan-out):
  // every waiting call tells it the name it waits on before its first park,
  // and when it stops (UnlockInterest). Calls already parked keep the
  // interest they began with; nullptr: none (the default).
  void SetUnlockInterest(std::shared_ptr<UnlockInterest> interest);

  // The owner token the calling thread gets by default.
  std::string DefaultOwner() const;
  const std::string& client_id() const;
  LockStats stats() const;
  RedisClient& redis();

  // Test hook: runs on the acquiring thread after each failed attempt of a
  // timed or blocking acquisition, before it decides to give up or park.
  // Lets tests force a release into the listen-first window, or a hand-off
  // into the window before a timed-out waiter leaves.
  void SetAfterFailedAttemptHookForTesting(
      std::function<void(std::string_view name)> hook);
  // Test hook: runs on the releasing thread after a release granted the lock
  // directly to a waiter of this client, before the grant is handed to it.
  // Lets tests make the waiter leave, or take the grant by itself, first.
  void SetBeforeDirectGrantHookForTesting(
      std::function<void(std::string_view name)> hook);

 private:
  std::shared_ptr<internal::LockCore> core_;
};

}  // namespace lockfleet
