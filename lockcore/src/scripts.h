// The Lua scripts of the lock. Every state change of a lock is one script, so
// it is atomic on the server; see scripts.cc and docs/lockcore.md for the
// contracts.
//
// Keys of one lock (all in the Redis Cluster slot of the hash tag {name}):
//   KEYS[1] lock hash   KEYS[2] fence counter of the lock's hash slot
//   KEYS[3] queue (list of waiter ids, FIFO)
//   KEYS[4] waiters (hash: waiter id -> "<presence deadline ms>|<owner>")
//   KEYS[5] reply latch of one request ("<...>:latch:<request id>"), for the
//           scripts that EvalRetryOnce may send twice and that could not
//           otherwise tell a retry from a new call.
//
// Retry safety (a first try may run with only its reply lost, then the retry
// runs too): acquire scripts add the hold's own field with HSETNX and queue a
// waiter id once, so a retry returns the same grant; release, abandon and
// force-unlock latch their reply under the request id for latch_ms, and a
// retry returns the latched reply instead of acting again.
//
// Fencing tokens: next_fence() issues max(counter + 1, server TIME in us) from
// the slot's counter, so tokens strictly increase per slot (hence per lock
// name) and, after a rollback of the counter (failover to a lagging replica,
// restart without persistence), stay above the tokens issued before it as
// long as the new server's clock is not behind the old one's by more than the
// time the rollback took.
//
// Replica acknowledgement: WAIT counts the replicas that have every write
// of its connection, so a WAIT after a script covers the script only if the
// script wrote. A grant, claim or renewal therefore always writes (its
// PEXPIRE sets max(PTTL, lease) even when that is the TTL already there):
// a retry that finds its hold already granted, or a renewal of a key whose
// TTL is long enough, would otherwise write nothing, and its WAIT would
// answer for whatever that pooled connection wrote last.
//
// Script flags: the scripts that may grow memory declare none ("#!lua"), so a
// full Redis (maxmemory, noeviction) refuses them before they run, never
// half-way; the ones that only shrink state (release, abandon, force-unlock,
// renew) declare allow-oom so a full Redis can still give locks back.
#pragma once

#include "lockfleet/lockcore/redis_client.h"

namespace lockfleet::internal {

// Barging acquire. KEYS 1-2. ARGV: owner, lease ms, hold id, fresh ("1":
// the caller holds no hold of this owner token — a private token it has no
// live hold of — so a grant already under the token is a revived one, which
// a new grant with a new token replaces instead of re-entering it).
// -> {1, fence, hold count} granted | {0, pttl ms, holder} contended.
const Script& AcquireScript();

// Fair acquire. KEYS 1-4. ARGV: owner, lease ms, hold id, waiter id,
// presence ms, enqueue (1: queue up when refused, 0: try only), fresh (as
// AcquireScript's).
// Grants when the lock is ours (reentrant), a hand-off to this waiter is
// pending (claim), or the lock is free and no live waiter is ahead. A waiter
// granted through its owner token (reentrant) leaves the queue.
// -> as AcquireScript; a refusal that queued adds, for spinning, the
//    waiter's place in the queue, the current grant's age, its fence, and
//    whether it is a claimed hand-off: {0, pttl ms, holder, place, age,
//    fence, handed} (place 1 = the head, the next release's grantee; 0 =
//    not among the first 64; age in us since the grant, whose fence is the
//    server's clock then; -2: a hand-off not claimed yet; -1: unknown;
//    handed 1: a hand-off since claimed, whose hold began later than its
//    fence by the claim's delay, 0: a hold that began at its fence).
const Script& AcquireFairScript();

// A multi-lock's locks in one script, all or none (multi_lock.h): a try,
// never queued. KEYS: 4 per lock, as AcquireFairScript's, the locks in the
// multi-lock's canonical order (all in one Cluster slot on a cluster).
// ARGV: owner, lease ms, fair ("1": a free lock with a live waiter queued is
// refused, as AcquireFairScript refuses it), then per lock its hold id and
// fresh (as AcquireScript's).
// Checks every lock first and grants only if each is grantable as the
// single-lock script would grant it (free, or ours with no hand-off
// pending); then grants each its own hold and lease.
// -> {1, fence 1, hold count 1, fence 2, hold count 2, ...} all granted |
//    {0, i, pttl ms, holder} the i-th lock (1-based) refused, nothing
//    granted (a free lock refused for its queue: pttl -2, holder "").
// Retry-safe: a retry after a lost reply finds every hold of the first try
// under our token (re-entered, counted once: HSETNX) and returns the same
// grants; a retry refused (a hold of the first try lost meanwhile) leaves
// the first try's holds in the other locks, which the caller gives back.
const Script& MultiAcquireScript();

// The queue head's spin check (see spin_advisor.h). KEYS[1] (the lock hash).
// ARGV as AcquireFairScript's first four (owner, lease ms, hold id, waiter
// id).
// Claims a hand-off pending to this waiter, and does nothing else: never
// takes a free lock, never queues, never refreshes presence. Only for a
// waiter that is not handed the lock in full ("w:" ids, see ReleaseScript);
// a "g:" waiter's check is a plain HMGET (LockCore::ConfirmHandOff).
// -> {1, fence, 1} claimed | {0, -1, holder} still held (no PTTL: a
//    spinning head parks within its own bound) | {0, 0, ""} free (the
//    caller makes a full attempt).
// Retry-safe: a retry after a claim whose reply was lost finds the lock
// held by its own owner token and no longer pending; the caller's full
// attempt then re-enters the grant with the same hold id.
const Script& SpinClaimScript();

// The read a "g:" waiter confirms a hand-off in full with (and its spin
// check), one command: HMGET of the lock hash's owner, fence, the waiter's
// hold field and claim (see ReleaseScript), in that order.
Command HandOffConfirmCommand(const std::string& lock_key,
                              const std::string& hold_id);

// A parked fair waiter's presence, refreshed by its client's watchdog
// (lockcore.md, "Presence"). KEYS 1-4. ARGV: waiter id, owner, presence ms.
// Refreshes the waiter's entry only if it is there and live (never makes
// one, never revives a lapsed one).
// -> {1} refreshed, nothing for the waiter to do | {0} off the queue: a
//    release handed it the lock (its event may be lost; a "g:" waiter
//    confirms a grant in full with its read) or it was dropped as lapsed, or
//    its entry lapsed | {2} its attempt would be granted now: the lock is
//    free and it is the first live waiter, or the lock is held under its
//    owner token with nothing pending (a call sharing the token got it).
//    Neither {0} nor {2} refreshes the entry ({2} with the lock free may
//    drop lapsed heads, as every live_head does).
const Script& PresenceScript();

// KEYS 1-5. ARGV: owner, fence ("" = whichever grant carries the hold), hold
// id, claim ms, latch ms, then the releasing client's own fair waiters on the
// lock in threes: waiter id, hold id, lease ms (none: no direct grant).
// -> {1} freed | {2, holds left} decremented | {0} not held |
//    {-1, holder} someone else's grant (untouched) |
//    {3, waiter id, owner, fence} freed and handed to the first live waiter
//    (a waiter id "g:<hold id>" in full: that hold, the claim window as the
//    lease and in the field "claim", and the grantee confirms it with one
//    HMGET, see LockCore::ConfirmHandOff; any other: pending, count 0, and
//    it claims the grant) |
//    {4, waiter id, owner, fence, hold id} freed and granted in full to the
//    first live waiter, one of the releaser's own (a direct grant: its hold,
//    its lease, nothing pending).
//    A retry of a call that removed the hold returns the first reply; the
//    latch is read only then (a hold missing from the grant). A retry that
//    finds its hold back in the grant — re-added by a late try of its
//    acquire (lockcore.md, Limits) — releases that orphaned copy as a first
//    try would.
const Script& ReleaseScript();

// A waiter leaves without the lock. KEYS 1-5. ARGV: waiter id, claim ms,
// latch ms, hold id of its call ("" = none). Passes on a grant pending to it,
// and gives back its hold if a grant carries it (a direct grant, or a try
// whose reply was lost).
// -> {0} nothing pending, no hold | {1} its grant freed the lock |
//    {2, holds left} its hold removed, the grant still held (shared owner) |
//    {3, waiter id, owner, fence} its grant passed on.
const Script& AbandonScript();

// KEYS: lock hash. ARGV: owner, fence, lease ms (0: check only, no
// extension). -> 1 the grant is current | 0 not ours.
const Script& RenewScript();

// KEYS 1-4. -> {owner or "", count, fence, pttl, last fence of the slot,
//               pending waiter, {waiter id, owner, presence ms left}...}
const Script& InspectScript();

// KEYS 1-5. ARGV: claim ms, expected owner ("" = any), expected fence ("0" =
// any), latch ms.
// -> {0, "", 0} was free | {-1, owner, fence} another grant than expected
//    (untouched) | {1, owner, fence} deleted |
//    {3, owner, fence, waiter id, next owner, next fence} deleted and handed
//    on. A retry returns the first reply.
const Script& ForceUnlockScript();

// Countdown latches (latch.cc). KEYS[1]: the latch hash "<prefix>:{name}:
// countdown": count (remaining), ttl (ms the opened latch lives), setter
// (the request id that set it), opener (the count-down id that opened it),
// and one field "d:<id>" per count-down id counted. No expiry while it
// counts; `ttl` after it opened.

// ARGV: count, ttl ms, request id.
// -> {1, count} set by this request (also on a retry of it) |
//    {0, remaining} the latch exists already (counting, or open).
const Script& LatchSetScript();

// ARGV: count-down id.
// -> {1, 0} this id opened the latch (also on a retry of it) |
//    {2, remaining} counted, or this id was counted before (remaining 0:
//    the latch opened since) | {3, 0} open already, this id not counted |
//    {-1, 0} no latch.
// Each id counts once, so a retry after a lost reply never counts twice
// and the latch never opens early.
const Script& LatchCountDownScript();

// Semaphores (semaphore.cc). KEYS: [1] the semaphore hash "<prefix>:
// {name}:semaphore": permits (the semaphore's), used (permits out), setter
// (the request id that set it), "p:<id>" = k for each permit set out (held,
// or handed to a grantee that has not claimed it); no expiry. [2] expiry
// (sorted set: permit id -> end of its lease, server ms). [3] queue (list of
// waiter ids, FIFO) [4] waiters (hash: waiter id -> "<presence deadline
// ms>|<k>"), both expiring 2 presence windows after the last refresh. [5]
// the reply latch of one request, where a script needs one. [6] (release,
// abandon) or [5] (acquire): the tombstone "...:semaphore:gone:<id>" of a
// call that ended while a try of it may still run late (a lost reply): the
// acquire script refuses to act for it, so such a try creates no set
// nobody holds and queues no waiter that is gone.
// A waiter's id is its permit set's id: a hand-off creates the set under it.
// Every script but the read-only one first takes back the sets whose lease
// ended (expiry <= now), then hands free permits to the queue's head
// waiters that fit (strict FIFO: the head first, a head that does not fit
// blocks those behind it), and returns the ids it handed to, for the caller
// to wake ("handed" below: an array of waiter ids).

// KEYS 1-5. ARGV: permit id, k, lease ms, presence ms, enqueue ("1": queue
// up when refused), claim ms.
// -> {1, k, handed} granted (or: the hand-off to this id claimed, or a
//    retry that finds its set; the lease set to now + lease either way) |
//    {0, free, wait ms, handed} refused (wait: until the earliest set's
//    lease ends; -1 none) | {-1, 0, 0, {}} no semaphore |
//    {-2, permits, 0, handed} k is above the semaphore's permits (refused;
//    the waiter leaves the queue) | {-3, 0, 0, {}} the call has ended (a
//    tombstone): nothing done.
const Script& SemAcquireScript();

// A set given back, or a waiter leaving without permits: the same script.
// KEYS 1-6. ARGV: permit id, claim ms, latch ms, tombstone ms (0: none).
// Leaves the queue, gives back a set under the id (held, a hand-off not
// claimed, or a try whose reply was lost; an expired one is taken back
// too), and hands what that frees (or what its place blocked) on.
// -> {1, handed, used} a live set given back | {0, handed, used} none
// (expired, released, never granted); used: the permits out after it. A
// retry returns the first reply.
const Script& SemReleaseScript();

// KEYS 1-2. ARGV: permit id, lease ms (0: check only). -> 1 the set is out
// and its lease not ended (extended to now + lease) | 0 gone.
const Script& SemRenewScript();

// KEYS 1-4. ARGV: permits, request id.
// -> {1, permits} set by this request (also on a retry) | {0, permits} the
//    semaphore exists.
const Script& SemSetScript();

// KEYS 1-5. ARGV: n, claim ms, latch ms, max permits, "add" (permits + n)
// or "set" (n). Makes the semaphore if it does not exist (with 0 + n).
// -> {1, permits after, handed} | {0, permits} refused (out of 0..max).
// A retry returns the first reply.
const Script& SemAddScript();

// KEYS 1-4. -> {permits (-1: none), used, sets out, queue length}.
const Script& SemInspectScript();

// Read-write locks (rwlock.cc): a semaphore of kRwPermits permits whose
// sets have owners (see kSemPrelude in scripts.cc): a read set takes 1, a
// write set all kRwPermits, so the semaphore's strict FIFO hand-off is the
// lock's fairness (a queued writer holds back the readers behind it; one
// release hands a freed lock to every reader at the head, up to the next
// writer). KEYS are the semaphore's, under "<prefix>:{name}:rwlock": [1]
// the hash (permits, used, fence: the last writer token; per set "p:<id>" =
// k, "o:<id>" = owner, "t:<id>" = token; per owner "n:<owner>" sets out and
// "x:<owner>" write sets out) [2] expiry [3] queue [4] waiters (id ->
// "<presence deadline ms>|<k>|<owner>") [5] the tombstone of the call. Release
// and renewal are SemReleaseScript and SemRenewScript on these keys.

// KEYS 1-5. ARGV: set id, k (1 read, kRwPermits write), lease ms, presence
// ms, enqueue ("1"), claim ms, owner, fresh ("1": the caller holds no set
// under its private owner token, so sets under it are not its own), fair
// ("1": queue; "0": barge, never queued), kRwPermits.
// A set is granted at once when its owner holds one already (reentrancy: a
// read beside its read, a read or a write beside its write), else when it
// fits and (fair) no live waiter is queued ahead.
// -> {1, k, handed, token} granted (or a hand-off claimed, or a retry that
//    finds its set) | {0, free, wait ms, handed} refused | {-3, 0, 0, {}}
//    the call has ended (tombstone) | {-4, 0, 0, handed} a write asked by an
//    owner holding only read sets (an upgrade, refused: it would wait for
//    itself).
const Script& RwAcquireScript();

// KEYS 1-4. ARGV: the most sets to list. -> {last writer token, queue
// length, {id, write (1/0), owner, token, lease left ms}...} (live sets,
// earliest lease end first).
const Script& RwInspectScript();

}  // namespace lockfleet::internal
