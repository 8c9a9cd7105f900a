// RedisClient::OptimisticUpdate: WATCH / read / decide / MULTI ... EXEC.
#include <algorithm>
#include <random>
#include <thread>

#include "cluster.h"
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
  // Cluster: on the master of the keys' slot. A MOVED (the slot moved) or
  // an ASK / TRYAGAIN (it is moving) starts the attempt again on a fresh
  // connection, within the command timeout and a few redirects.
  const auto give_up =
      std::chrono::steady_clock::now() + impl_->options.command_timeout;
  auto borrow = [&] {
    if (!impl_->cluster()) return impl_->Borrow();
    return impl_->NodePool(impl_->OwnerOf(internal::KeySlot(keys[0]), give_up))
        ->Borrow();
  };
  int redirects = 0;
  std::chrono::milliseconds backoff{5};
  auto redirected = [&](const std::vector<Reply>& replies) {
    if (!impl_->cluster()) return false;
    for (const Reply& r : replies) {
      if (!r.is_error()) continue;
      std::optional<internal::Redirect> to = internal::ParseRedirect(r.str, "");
      const bool moving = (to && to->kind == internal::Redirect::Kind::kAsk) ||
                          r.str.rfind("TRYAGAIN", 0) == 0;
      if (!to && !moving) continue;
      if (++redirects > 16 || std::chrono::steady_clock::now() >= give_up) {
        throw Error(
            ErrorCode::kRedisBusy,
            "optimistic update: the keys' slot kept moving (" + r.str + ")");
      }
      if (to && to->kind == internal::Redirect::Kind::kMoved) {
        impl_->FollowMoved(*to);
      } else {
        // A slot in migration: the WATCH and the transaction would have to
        // follow each key; wait for the migration instead.
        impl_->tryagain.fetch_add(1, std::memory_order_relaxed);
        std::this_thread::sleep_for(backoff);
        backoff = std::min(backoff * 2, std::chrono::milliseconds(100));
      }
      return true;
    }
    return false;
  };
  Impl::Lent conn = [&] {
    try {
      return borrow();
    } catch (const Error&) {
      if (impl_->cluster())
        impl_->stale_.store(true, std::memory_order_relaxed);
      throw;
    }
  }();
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
      if (redirected(got)) {
        conn->MarkBroken();  // its WATCH is still on
        conn = borrow();
        --attempt;
        continue;
      }
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
      if (redirected(done)) {  // a queued command refused: nothing applied
        conn->MarkBroken();
        conn = borrow();
        --attempt;
        continue;
      }
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
  } catch (const Error&) {
    // A WATCH may still be active or commands queued: never reuse it. On a
    // cluster the node may be gone: read the slot map again.
    conn->MarkBroken();
    if (impl_->cluster()) impl_->stale_.store(true, std::memory_order_relaxed);
    throw;
  } catch (...) {
    conn->MarkBroken();
    throw;
  }
  result.status = OptimisticStatus::kConflict;
  return result;
}

}  // namespace lockfleet
