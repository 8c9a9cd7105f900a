// RedisClient::OptimisticUpdate: WATCH / read / decide / MULTI ... EXEC.
#include <algorithm>
#include <random>
#include <thread>

#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/redis_client.h"
#include "redis_client_impl.h"

namespace lockfleet {
namespace {

std::optional<std::string> ValueOf(const Reply& r, const std::string& key) {
  if (r.is_nil()) return std::nullopt;
  if (r.type == Reply::Type::kString) return r.str;
  throw Error(ErrorCode::kRedisProtocol,
              "optimistic update: GET " + key + " returned " +
                  (r.is_error() ? r.str : std::string("a non-string")));
}

}  // namespace

OptimisticResult RedisClient::OptimisticUpdate(
    const std::vector<std::string>& keys, const OptimisticDecide& decide,
    int max_attempts) {
  if (keys.empty())
    throw Error(ErrorCode::kInvalidArgument, "optimistic update needs keys");
  if (max_attempts < 1)
    throw Error(ErrorCode::kInvalidArgument, "max_attempts must be >= 1");
  thread_local std::minstd_rand rng{std::random_device{}()};
  OptimisticResult result;
  Impl::Lent conn = impl_->Borrow();
  try {
    for (int attempt = 1; attempt <= max_attempts; ++attempt) {
      result.attempts = attempt;
      // WATCH and the reads go in one round trip: values read after WATCH
      // returned are covered by it.
      std::vector<Command> reads;
      Command watch{"WATCH"};
      watch.insert(watch.end(), keys.begin(), keys.end());
      reads.push_back(std::move(watch));
      for (const std::string& key : keys) reads.push_back({"GET", key});
      std::vector<const Command*> ptrs;
      for (const Command& c : reads) ptrs.push_back(&c);
      impl_->round_trips.fetch_add(1, std::memory_order_relaxed);
      std::vector<Reply> got = conn->Run(ptrs);
      if (got[0].is_error()) {
        throw Error(ErrorCode::kRedisProtocol, "WATCH failed: " + got[0].str);
      }
      std::vector<std::optional<std::string>> values;
      for (size_t i = 0; i < keys.size(); ++i)
        values.push_back(ValueOf(got[i + 1], keys[i]));

      std::optional<std::vector<Command>> writes;
      writes = decide(values);
      if (!writes) {
        Command unwatch{"UNWATCH"};
        impl_->round_trips.fetch_add(1, std::memory_order_relaxed);
        conn->RunOne(unwatch);
        result.status = OptimisticStatus::kAborted;
        return result;
      }
      std::vector<Command> tx;
      tx.push_back({"MULTI"});
      tx.insert(tx.end(), writes->begin(), writes->end());
      tx.push_back({"EXEC"});
      ptrs.clear();
      for (const Command& c : tx) ptrs.push_back(&c);
      impl_->round_trips.fetch_add(1, std::memory_order_relaxed);
      std::vector<Reply> done = conn->Run(ptrs);
      const Reply& exec = done.back();
      if (exec.type == Reply::Type::kArray) {
        result.status = OptimisticStatus::kCommitted;
        result.replies = exec.elements;
        return result;
      }
      if (exec.is_error()) {
        // EXECABORT: a queued command was refused. Not a conflict.
        std::string why = exec.str;
        for (const Reply& r : done) {
          if (r.is_error() && r.str.rfind("EXECABORT", 0) != 0) why = r.str;
        }
        // READONLY (a demoted master, Sentinel) and the like are the
        // server's state, not the caller's commands.
        throw Error(
            internal::CodeForErrorReply(why, ErrorCode::kInvalidArgument),
            "optimistic update rejected by Redis: " + why);
      }
      // Nil EXEC: a watched key changed. Back off a little and try again.
      ++result.conflicts;
      std::uniform_int_distribution<int> jitter(0, 200 * std::min(attempt, 10));
      std::this_thread::sleep_for(std::chrono::microseconds(jitter(rng)));
    }
  } catch (...) {
    // A WATCH may still be active or commands queued: never reuse it.
    conn->MarkBroken();
    throw;
  }
  result.status = OptimisticStatus::kConflict;
  return result;
}

}  // namespace lockfleet
