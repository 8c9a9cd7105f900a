// The Lua scripts of the lock. Every state change of a lock is one script, so
// it is atomic on the server; see scripts.cc for the contracts.
#pragma once

#include "lockfleet/lockcore/redis_client.h"

namespace lockfleet::internal {

// KEYS: lock hash, fence counter. ARGV: owner, lease ms, request id.
// -> {1, fence, hold count} granted | {0, pttl ms, holder} contended.
const Script& AcquireScript();

// KEYS: lock hash. ARGV: owner, fence, request id.
// -> {1} freed | {2, holds left} decremented | {0} not held |
//    {-1, holder} someone else's grant (untouched).
const Script& ReleaseScript();

// KEYS: lock hash. ARGV: owner, fence, lease ms. -> 1 renewed | 0 not ours.
const Script& RenewScript();

// KEYS: lock hash, fence counter.
// -> {owner or "", count, fence, pttl, last fence}
const Script& InspectScript();

// KEYS: lock hash. -> {1, owner, fence} deleted | {0, "", 0} was free.
const Script& ForceUnlockScript();

}  // namespace lockfleet::internal
