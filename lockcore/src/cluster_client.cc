// RedisClient's cluster mode (redis+cluster://): a pool per node, commands
// routed by their key's slot, MOVED / ASK / TRYAGAIN followed (cluster.h).
#include <algorithm>
#include <exception>
#include <thread>

#include "cluster.h"
#include "lockfleet/lockcore/error.h"
#include "redis_client_impl.h"

namespace lockfleet {

using internal::Deadline;
using internal::NotSentError;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

namespace {

// Redirects one command may follow before its MOVED or ASK goes to the
// caller: a slot map that does not settle (a migration left half done, two
// nodes that each name the other) is an error, not a loop.
constexpr int kMaxRedirects = 5;
// A map read less than this long ago is not read again for a MOVED or a
// failed node (a failover makes every call fail until a replica takes
// over: one read per interval, not one per call).
constexpr milliseconds kRefreshInterval{100};
constexpr milliseconds kTryAgainFirst{5};
constexpr milliseconds kTryAgainMax{100};

bool StartsWith(const std::string& text, std::string_view prefix) {
  return std::string_view(text).substr(0, prefix.size()) == prefix;
}

}  // namespace

std::shared_ptr<RedisClient::Impl> RedisClient::Impl::NodePool(
    const RedisNode& node) {
  std::lock_guard lock(nodes_mu_);
  std::shared_ptr<Impl>& pool = nodes_[node];
  if (!pool) pool = std::make_shared<Impl>(*this, node);
  return pool;
}

void RedisClient::Impl::FollowMoved(const internal::Redirect& to) {
  moved.fetch_add(1, std::memory_order_relaxed);
  // (A node that does not know its address answers an empty host.)
  if (!to.node.host.empty()) slots_->Moved(to.slot, to.node);
  stale_.store(true, std::memory_order_relaxed);
}

void RedisClient::Impl::RefreshSlots(Deadline deadline, bool force) {
  const auto asked_at = steady_clock::now();
  // With a map in hand nobody waits for another thread's read: the map
  // stands meanwhile. Without one, the first read is waited for.
  std::unique_lock lock(refresh_mu_, std::defer_lock);
  if (!slots_->empty()) {
    if (!lock.try_lock()) return;
  } else if (!lock.try_lock_until(deadline)) {
    throw NotSentError(Error(
        ErrorCode::kRedisTimeout,
        "the slot map of " + endpoint.Redacted() + " was not read in time"));
  }
  if (!slots_->empty() &&
      (refreshed_at_ >= asked_at ||
       (!force && steady_clock::now() - refreshed_at_ < kRefreshInterval))) {
    return;
  }
  // The interval counts from this attempt, answered or not: while every
  // node fails, calls do not each sweep the nodes again.
  refreshed_at_ = steady_clock::now();
  // The known masters, then the seeds; nodes that failed the last read go
  // last (a dead master first in line would cost every read a connect).
  std::vector<RedisNode> candidates = slots_->Masters();
  for (const RedisNode& seed : endpoint.seeds) {
    if (std::find(candidates.begin(), candidates.end(), seed) ==
        candidates.end()) {
      candidates.push_back(seed);
    }
  }
  std::stable_partition(
      candidates.begin(), candidates.end(), [&](const RedisNode& node) {
        return std::find(unreadable_.begin(), unreadable_.end(), node) ==
               unreadable_.end();
      });
  const Command slots_command{"CLUSTER", "SLOTS"};
  const std::vector<const Command*> one{&slots_command};
  std::string why = "no node was asked in time";
  for (const RedisNode& node : candidates) {
    const milliseconds left = internal::Remaining(deadline);
    if (left.count() <= 0) break;
    try {
      Reply r;
      try {
        r = std::move(NodePool(node)->Run(one, left).front());
      } catch (const Error&) {
        if (std::find(unreadable_.begin(), unreadable_.end(), node) ==
            unreadable_.end()) {
          unreadable_.push_back(node);
        }
        throw;
      }
      std::erase(unreadable_, node);  // it answered
      round_trips.fetch_add(1, std::memory_order_relaxed);
      if (r.is_error()) {
        if (r.str.find("cluster support disabled") != std::string::npos) {
          throw Error(ErrorCode::kInvalidArgument,
                      node.ToString() + " (of " + endpoint.Redacted() +
                          ") is not in cluster mode (" + r.str +
                          "): redis+cluster:// needs a Redis Cluster; use "
                          "redis:// for a single server");
        }
        why = node.ToString() + " answered CLUSTER SLOTS with " + r.str;
        continue;
      }
      std::vector<internal::SlotRange> ranges =
          internal::ParseClusterSlots(r, node.host);
      if (ranges.empty()) {
        why = node.ToString() +
              " knows no slot assignment (a cluster not "
              "yet created, or a node not joined)";
        continue;
      }
      slots_->Replace(ranges);
      stale_.store(false, std::memory_order_relaxed);
      refreshes.fetch_add(1, std::memory_order_relaxed);
      return;
    } catch (const Error& e) {
      if (e.code() == ErrorCode::kInvalidArgument) throw NotSentError(e);
      why = e.what();
    }
  }
  if (!slots_->empty()) return;  // the map we have stands: the calls will say
  throw NotSentError(Error(ErrorCode::kRedisUnavailable,
                           "no node of " + endpoint.Redacted() +
                               " gave its slot map (CLUSTER SLOTS): " + why));
}

RedisNode RedisClient::Impl::OwnerOf(std::optional<uint16_t> slot,
                                     Deadline deadline) {
  if (slots_->empty() || stale_.load(std::memory_order_relaxed)) {
    RefreshSlots(deadline, /*force=*/false);
  }
  for (int attempt = 1;; ++attempt) {
    if (!slot) {
      // No key: any master will do (the first, so one connection serves).
      std::vector<RedisNode> masters = slots_->Masters();
      if (!masters.empty()) return masters.front();
    } else if (std::optional<RedisNode> owner = slots_->Owner(*slot)) {
      return *owner;
    }
    if (attempt == 2) {
      throw NotSentError(
          Error(ErrorCode::kRedisUnavailable,
                (slot ? "slot " + std::to_string(*slot) + " of " : "") +
                    endpoint.Redacted() +
                    (slot ? " is served by no master (cluster_state:fail?)"
                          : " has no master serving a slot")));
    }
    RefreshSlots(deadline, /*force=*/true);
  }
}

std::vector<Reply> RedisClient::Impl::RunCluster(
    const std::vector<const Command*>& commands, milliseconds timeout,
    milliseconds server_wait) {
  const bool bounded = timeout.count() > 0;
  if (bounded) timeout = std::min(timeout, options.command_timeout);
  // The call's budget; unbounded, TRYAGAIN waits for a migration at most a
  // command timeout (each round trip has its own).
  const Deadline end =
      steady_clock::now() + (bounded ? timeout : options.command_timeout);
  const Command* wait =
      !commands.empty() && !commands.back()->empty() &&
              internal::VerbIs(commands.back()->front(), "WAIT")
          ? commands.back()
          : nullptr;
  const size_t count = commands.size() - (wait ? 1 : 0);
  for (size_t i = 0; i < count; ++i) {
    const Command& c = *commands[i];
    if (!c.empty() && internal::VerbIsOneOf(c[0], {"MULTI", "EXEC", "DISCARD",
                                                   "WATCH", "UNWATCH"})) {
      // Split over masters or resent alone after a redirect, a transaction
      // would half apply: OptimisticUpdate runs them on a cluster.
      throw NotSentError(Error(
          ErrorCode::kInvalidArgument,
          c[0] + " in a pipeline is not supported on a Redis Cluster: use "
                 "OptimisticUpdate (WATCH/MULTI/EXEC on the keys' master)"));
    }
  }

  // A command without a key goes where its neighbours go (MULTI with the
  // commands it opens); a WAIT at the end goes to every node written to.
  std::vector<std::optional<uint16_t>> slot(count);
  for (size_t i = 0; i < count; ++i) {
    slot[i] = internal::CommandSlot(*commands[i]);
    if (!slot[i] && i > 0) slot[i] = slot[i - 1];
  }
  for (size_t i = count; i-- > 1;) {
    if (!slot[i - 1]) slot[i - 1] = slot[i];
  }

  struct Pending {
    size_t index = 0;
    std::optional<RedisNode> ask;  // ASK: this node, after ASKING
    int redirects = 0;
  };
  std::vector<Pending> pending(count);
  for (size_t i = 0; i < count; ++i) pending[i].index = i;
  std::vector<Reply> replies(commands.size());
  std::optional<Reply> waited;  // the fewest acknowledgements, or an error
  const Command asking{"ASKING"};
  bool sent = false;        // a round trip went out: the commands may have run
  bool real_reply = false;  // a command got its answer (not a redirect)
  std::exception_ptr first_failure;   // of a master whose commands failed
  bool failure_may_have_run = false;  // one of those may have run
  milliseconds backoff = kTryAgainFirst;
  // A node failed (or none was found): read the map again next time. Not
  // sent in this round trip, but an earlier one's may have run: then the
  // caller hears "may have run".
  auto fail = [&](const Error& e) {
    stale_.store(true, std::memory_order_relaxed);
    return sent && !internal::MayHaveRun(e);
  };

  while (!pending.empty()) {
    // Group by node, in the order of each node's first command.
    std::vector<std::pair<RedisNode, std::vector<Pending>>> groups;
    for (Pending& p : pending) {
      RedisNode node;
      try {
        node = p.ask ? *p.ask : OwnerOf(slot[p.index], end);
      } catch (const NotSentError& e) {
        if (real_reply) {
          // Other masters answered this call: only this command fails.
          stale_.store(true, std::memory_order_relaxed);
          replies[p.index] = internal::FailedNodeReply(e);
          continue;
        }
        if (fail(e)) throw Error(e.code(), e.what());
        throw;
      }
      auto it = std::find_if(groups.begin(), groups.end(),
                             [&](const auto& g) { return g.first == node; });
      if (it == groups.end()) {
        groups.emplace_back(std::move(node), std::vector<Pending>{});
        it = groups.end() - 1;
      }
      it->second.push_back(std::move(p));
    }
    std::vector<Pending> next;
    bool try_again = false;
    // Several masters in this call: a failed one fails only its commands
    // (if no command of the call gets a real answer, the call throws).
    const bool isolate = groups.size() > 1 || real_reply;
    for (auto& [node, group] : groups) {
      std::vector<const Command*> batch;
      std::vector<int> slot_of;  // per batch entry: group index, -1 ASKING,
                                 // -2 WAIT
      for (size_t g = 0; g < group.size(); ++g) {
        if (group[g].ask) {
          batch.push_back(&asking);
          slot_of.push_back(-1);
        }
        batch.push_back(commands[group[g].index]);
        slot_of.push_back(static_cast<int>(g));
      }
      if (wait) {
        batch.push_back(wait);
        slot_of.push_back(-2);
      }
      std::vector<Reply> got;
      try {
        got = NodePool(node)->Run(
            batch, bounded ? internal::Remaining(end) : milliseconds(0),
            server_wait);
      } catch (const Error& e) {
        if (fail(e) && !isolate) throw Error(e.code(), e.what());
        if (!isolate) throw;
        // One master failing does not fail the others' commands (the
        // watchdog's batch spans masters): its commands get this error
        // reply — they may have run unless it says "not sent".
        for (const Pending& p : group)
          replies[p.index] = internal::FailedNodeReply(e);
        // Its WAIT is not counted: its commands already answer failed, and
        // the other masters' acknowledgements stand for theirs.
        if (!first_failure) first_failure = std::current_exception();
        if (internal::MayHaveRun(e)) failure_may_have_run = true;
        continue;
      }
      round_trips.fetch_add(1, std::memory_order_relaxed);
      sent = true;
      bool ran = false;  // a command of this group ran here (not redirected)
      for (size_t j = 0; j < got.size(); ++j) {
        Reply& r = got[j];
        if (slot_of[j] == -1) continue;  // ASKING's +OK
        if (slot_of[j] == -2) {
          // (Last in the batch.) A node whose every command was sent on
          // elsewhere wrote nothing here: its WAIT — on a demoted master,
          // an error — says nothing about this call.
          if (!ran) continue;
          if (!waited || waited->is_error()) {
            if (!waited) waited = std::move(r);
          } else if (r.is_error() || r.type != Reply::Type::kInteger) {
            waited = std::move(r);
          } else {
            waited->integer = std::min(waited->integer, r.integer);
          }
          continue;
        }
        Pending& p = group[slot_of[j]];
        if (r.is_error()) {
          if (std::optional<internal::Redirect> to =
                  internal::ParseRedirect(r.str, node.host)) {
            if (p.redirects < kMaxRedirects) {
              Pending again{p.index, std::nullopt, p.redirects + 1};
              if (to->kind == internal::Redirect::Kind::kMoved) {
                FollowMoved(*to);
              } else {
                asked.fetch_add(1, std::memory_order_relaxed);
                again.ask = to->node;
              }
              next.push_back(std::move(again));
              continue;
            }
            r.str += " (lockfleet gave up after " +
                     std::to_string(kMaxRedirects) +
                     " redirects: the cluster's slot map does not settle)";
          } else if (StartsWith(r.str, "TRYAGAIN") &&
                     steady_clock::now() + backoff < end) {
            // A migration split the keys: the same again, from the owner,
            // for as long as the call's budget lasts (the redirects it took
            // to get here start over: the ASK that led to a TRYAGAIN is the
            // migration, not a loop, and time bounds this one).
            tryagain.fetch_add(1, std::memory_order_relaxed);
            next.push_back({p.index, std::nullopt, 0});
            try_again = true;
            continue;
          } else if (StartsWith(r.str, "CLUSTERDOWN")) {
            stale_.store(true, std::memory_order_relaxed);
          }
        }
        ran = true;
        real_reply = true;
        replies[p.index] = std::move(r);
      }
    }
    if (try_again) {
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, kTryAgainMax);
    }
    pending = std::move(next);
  }
  // No command got an answer: the call failed, as on one server.
  if (!real_reply && first_failure) {
    try {
      std::rethrow_exception(first_failure);
    } catch (const Error& e) {
      if (failure_may_have_run && !internal::MayHaveRun(e))
        throw Error(e.code(), e.what());
      throw;
    }
  }
  if (wait) {
    replies.back() = waited ? std::move(*waited) : Reply{};
  }
  return replies;
}

}  // namespace lockfleet
