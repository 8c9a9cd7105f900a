// The Lua scripts of the lock. Every state change of a lock is one script, so
// it is atomic on the server; see scripts.cc and docs/lockcore.md for the
// contracts.
//
// Keys of one lock (all share the hash tag {name}):
//   KEYS[1] lock hash   KEYS[2] fence counter
//   KEYS[3] queue (list of waiter ids, FIFO)
//   KEYS[4] waiters (hash: waiter id -> "<presence deadline ms>|<owner>")
#pragma once

#include "lockfleet/lockcore/redis_client.h"

namespace lockfleet::internal {

// Barging acquire. KEYS 1-2. ARGV: owner, lease ms, hold id.
// -> {1, fence, hold count} granted | {0, pttl ms, holder} contended.
const Script& AcquireScript();

// Fair acquire. KEYS 1-4. ARGV: owner, lease ms, hold id, waiter id,
// presence ms, enqueue (1: queue up when refused, 0: try only).
// Grants when the lock is ours (reentrant), a hand-off to this waiter is
// pending (claim), or the lock is free and no live waiter is ahead.
// -> as AcquireScript.
const Script& AcquireFairScript();

// KEYS 1-4. ARGV: owner, fence, hold id, claim ms.
// -> {1} freed | {2, holds left} decremented | {0} not held |
//    {-1, holder} someone else's grant (untouched) |
//    {3, waiter id, owner, fence} freed and handed to the first live waiter.
const Script& ReleaseScript();

// A waiter leaves without the lock. KEYS 1-4. ARGV: waiter id, claim ms.
// -> {0} nothing pending | {1} its pending grant freed the lock |
//    {3, waiter id, owner, fence} its pending grant passed on.
const Script& AbandonScript();

// KEYS: lock hash. ARGV: owner, fence, lease ms. -> 1 renewed | 0 not ours.
const Script& RenewScript();

// KEYS 1-4. -> {owner or "", count, fence, pttl, last fence, pending waiter,
//               {waiter id, owner, presence ms left}...}
const Script& InspectScript();

// KEYS 1-4. ARGV: claim ms.
// -> {0, "", 0} was free | {1, owner, fence} deleted |
//    {3, owner, fence, waiter id, next owner, next fence} deleted and handed
//    on.
const Script& ForceUnlockScript();

}  // namespace lockfleet::internal
