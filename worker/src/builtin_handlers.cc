#include "lockfleet/worker/builtin_handlers.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include "lockfleet/lockcore/fenced_resource.h"
#include "lockfleet/worker/handler.h"

namespace lockfleet::worker {
namespace {

// KEYS: stock, sales, done marker. ARGV: job id, buyer, marker TTL (ms).
// Runs inside FencedResource::Eval: only when the caller's grant may write.
constexpr std::string_view kPurchase = R"lua(
if redis.call('EXISTS', KEYS[3]) == 1 then return 'duplicate' end
local stock = tonumber(redis.call('GET', KEYS[1]))
if stock == nil then return 'unknown' end
if stock <= 0 then
  redis.call('SET', KEYS[3], 'rejected', 'PX', ARGV[3])
  return 'sold_out'
end
redis.call('DECR', KEYS[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('SET', KEYS[3], 'ok', 'PX', ARGV[3])
return 'sold'
)lua";

constexpr int64_t kMaxSleepMs = 3'600'000;

// One of the product's keys (a constant part: no caller data).
std::string ProductKey(std::string_view prefix, std::string_view lock,
                       std::string_view part) {
  return FencedResource::KeyOf(prefix, lock, {part});
}

JobResult Purchase(JobContext& context) {
  const std::string buyer =
      GetString(context.job.payload, "buyer").value_or(context.job.id);
  // Its one check point: the sale is a single fenced script, so once it has
  // started it either applies whole (the done marker with it) or not at all.
  if (context.stop.stop_requested()) throw JobCancelled();
  const FenceResult result = context.resource.Eval(
      context.grant, kPurchase,
      {context.resource.Key({"stock"}), context.resource.Key({"sales"}),
       context.done_key},
      {context.job.id, buyer, std::to_string(context.dedup_ttl.count())});
  if (!result.accepted) {
    // Our lease lapsed and a newer holder wrote meanwhile: nothing was
    // written. Throwing retries under a fresh hold.
    throw std::runtime_error(
        "stale fencing token " + std::to_string(context.grant.fence) +
        " (resource has seen " + std::to_string(result.highest_fence) +
        (result.highest_fence == context.grant.fence ? " from another grant"
                                                     : "") +
        ")");
  }
  const std::string& outcome = result.reply.str;
  if (outcome == "sold") return JobResult::kOk;
  // Done before (this delivery's earlier attempt sold, then lost Redis).
  if (outcome == "duplicate") return JobResult::kDuplicate;
  if (outcome == "sold_out") return JobResult::kRejected;
  if (outcome == "unknown") {
    throw std::runtime_error("product '" + context.job.lock +
                             "' has no stock key (not seeded)");
  }
  throw std::runtime_error("unexpected purchase reply '" + outcome + "'");
}

JobResult Sleep(JobContext& context) {
  const int64_t ms =
      GetInt(context.job.payload, "ms")
          .value_or(GetInt(context.settings, "default_ms").value_or(100));
  if (ms < 0 || ms > kMaxSleepMs) {
    throw JobError("'ms': expected 0..3600000, found " + std::to_string(ms));
  }
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  if (cv.wait_for(lock, context.stop, std::chrono::milliseconds(ms),
                  [] { return false; }) ||
      context.stop.stop_requested()) {
    throw JobCancelled();
  }
  return JobResult::kOk;
}

}  // namespace

void RegisterBuiltinHandlers(HandlerRegistry& registry) {
  registry.Register(std::string(kInventoryPurchase), {.run = Purchase});
  registry.Register(std::string(kSleep),
                    {.run = Sleep, .settings = {"default_ms"}});
}

Job FlashSaleJob(int i, int products) {
  Job job{.id = "order-" + std::to_string(i),
          .lock = "product:" + std::to_string(i % products),
          .type = std::string(kInventoryPurchase)};
  job.payload["buyer"] = {config::Scalar::Type::kString,
                          "buyer-" + std::to_string(i)};
  return job;
}

void SeedStock(RedisClient& redis, std::string_view key_prefix,
               std::string_view product_lock, int64_t units) {
  const std::string units_text = std::to_string(units);
  redis.Pipeline({
      {"SET", ProductKey(key_prefix, product_lock, "stock"), units_text},
      {"SET", ProductKey(key_prefix, product_lock, "initial"), units_text},
      {"DEL", ProductKey(key_prefix, product_lock, "sales")},
  });
}

int64_t StockAudit::oversold() const {
  return std::max<int64_t>(0, sold - initial) + std::max<int64_t>(0, -stock);
}

bool StockAudit::consistent() const {
  return stock >= 0 && stock + sold == initial;
}

StockAudit AuditStock(RedisClient& redis, std::string_view key_prefix,
                      std::string_view product_lock) {
  const std::vector<Reply> replies = redis.Pipeline({
      {"GET", ProductKey(key_prefix, product_lock, "initial")},
      {"GET", ProductKey(key_prefix, product_lock, "stock")},
      {"HLEN", ProductKey(key_prefix, product_lock, "sales")},
  });
  const auto integer = [](const Reply& reply) -> int64_t {
    if (reply.type == Reply::Type::kInteger) return reply.integer;
    if (reply.type == Reply::Type::kString) return std::stoll(reply.str);
    return 0;
  };
  StockAudit audit;
  audit.initial = integer(replies.at(0));
  audit.stock = integer(replies.at(1));
  audit.sold = integer(replies.at(2));
  return audit;
}

}  // namespace lockfleet::worker
