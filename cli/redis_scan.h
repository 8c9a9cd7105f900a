// Walking Redis's keyspace with SCAN (in batches, never KEYS), for the
// subcommands that look for keys by pattern (`locks`, `top`, `jobs status`).
//
// Thread-safety: as the RedisClient it is given.
#pragma once

#include <functional>
#include <string>

#include "lockfleet/lockcore/redis_client.h"

namespace lockfleet::cli {

// How a ForEachScannedKey ended.
struct ScanEnd {
  bool complete = false;  // the cursor came back to 0: every key was seen
  long long calls = 0;    // SCAN calls made
};

// SCAN from cursor 0 with MATCH `match` (Redis glob) and COUNT `count`,
// calling `visit` with each key returned, in order (SCAN may return a key
// twice) — on a Redis Cluster on each master in turn (RedisClient::Masters;
// a slot migrating meanwhile may show a key twice or not at all). Ends when
// the cursor comes back to 0 (on every master), when `visit` returns false,
// or when `stop` (if given), asked before each SCAN call with the number of
// calls made so far, returns true. SCAN walks the whole keyspace (MATCH
// filters after), so a scan costs one round trip per `count` keys. Throws
// lockfleet Error (kRedisProtocol for an error or malformed reply) when
// Redis fails.
ScanEnd ForEachScannedKey(
    RedisClient& redis, const std::string& match, int count,
    const std::function<bool(const std::string& key)>& visit,
    const std::function<bool(long long calls)>& stop = nullptr);

}  // namespace lockfleet::cli
