// The built-in handlers, and the inventory helpers the flash-sale demo and
// tests use.
//
// inventory.purchase — the flash sale. The job's lock names the product
// (e.g. "product:7"); payload {buyer: string} (default: the job id). Under
// the lock, in one fenced script: if the job is already done it does
// nothing; if the product's stock is > 0 it decrements it, records
// sales[job id] = buyer and marks the job done; otherwise it marks the job
// done as rejected ("sold out"). A stale holder (its lease lapsed and a newer
// holder got the lock) is refused by the fence and retries, so stock never
// goes below zero and no job sells twice. Keys (all in the product lock's
// resource slot, see FencedResource::Key): "stock" (integer), "sales" (hash
// job id → buyer), "initial" (the seeded stock, for audits).
//
// sleep — simulated work: sleeps payload `ms` (default: setting
// `default_ms`, else 100; 0..3600000) and returns kOk. Honours cancellation.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lockfleet/lockcore/redis_client.h"
#include "lockfleet/worker/job.h"

namespace lockfleet::worker {

inline constexpr std::string_view kInventoryPurchase = "inventory.purchase";
inline constexpr std::string_view kSleep = "sleep";

// Job `i` of a generated flash sale over `products` products:
// id "order-<i>", lock "product:<i mod products>", buyer "buyer-<i>".
Job FlashSaleJob(int i, int products);

// Sets the product's stock to `units`, its initial to `units`, and clears
// its sales. For demos and tests; not fenced (run it before the sale).
void SeedStock(RedisClient& redis, std::string_view key_prefix,
               std::string_view product_lock, int64_t units);

struct StockAudit {
  int64_t initial = 0;  // as seeded
  int64_t stock = 0;    // left
  int64_t sold = 0;     // entries in the sales hash
  // The invariant: stock >= 0 and stock + sold == initial. Oversold is
  // max(0, sold - initial) + max(0, -stock).
  int64_t oversold() const;
  bool consistent() const;
};

// Reads one product's keys (one pipelined round trip).
StockAudit AuditStock(RedisClient& redis, std::string_view key_prefix,
                      std::string_view product_lock);

}  // namespace lockfleet::worker
