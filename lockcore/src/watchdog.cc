// The lease watchdog: one thread per LockClient renews every held
// watchdog-mode lock at lease/3, in pipelined batches, and notices leases
// that ran out.
#include <algorithm>

#include "lock_core.h"
#include "lockfleet/lockcore/error.h"
#include "scripts.h"

namespace lockfleet::internal {
namespace {

using std::chrono::milliseconds;

constexpr size_t kBatch = 256;  // renewals per pipelined round trip
constexpr Clock::Duration kIdle = std::chrono::seconds(1);  // longest sleep

// After a failed renewal, try again soon — but not in a hot loop.
Clock::Duration RetryDelay(milliseconds lease) {
  return std::clamp<Clock::Duration>(lease / 10, milliseconds(10),
                                     milliseconds(1000));
}

void RunCallbacks(const LockCore::LostCalls& calls) {
  for (const auto& held : calls) {
    // First the token (stop_callbacks registered on it run here), then the
    // callbacks; both after lost() became true.
    held->lost_source.request_stop();
    for (const LostCallback& cb : held->on_lost) {
      try {
        cb(held->name, held->fence);
      } catch (...) {  // a callback must not kill the watchdog
      }
    }
  }
}

}  // namespace

void LockCore::StartWatchdog() {
  // Each thread keeps the core alive while it runs: a lost-callback may
  // destroy the LockClient and the last Lease, and the thread must not come
  // back to freed memory.
  watchdog_ =
      std::thread([self = shared_from_this()] { self->WatchdogLoop(); });
  renewer_ = std::thread([self = shared_from_this()] { self->RenewerLoop(); });
}

void LockCore::StopWatchdog() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  watchdog_cv_.notify_all();
  renewer_cv_.notify_all();
  for (std::thread* t : {&watchdog_, &renewer_}) {
    if (!t->joinable()) continue;
    if (t->get_id() == std::this_thread::get_id()) {
      t->detach();  // destroyed from a lost-callback: cannot join itself
    } else {
      t->join();
    }
  }
  // Nothing renews the holds still out there, nor tells them when they end:
  // they count as lost now, and their stop tokens are requested (on_lost
  // callbacks are not run: the client is going away).
  std::vector<std::shared_ptr<HeldLock>> left;
  {
    std::lock_guard lock(mu_);
    // Lost just before the stop, their callbacks never run: their tokens
    // are still requested.
    for (auto& held : deferred_calls_) left.push_back(std::move(held));
    deferred_calls_.clear();
    for (const auto& [key, held] : held_) {
      if (held->released || held->lost.exchange(true)) continue;
      leases_lost_.fetch_add(1, std::memory_order_relaxed);
      left.push_back(held);
    }
  }
  for (const auto& held : left) held->lost_source.request_stop();
}

void LockCore::WatchdogLoop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    const Clock::TimePoint now = options_.clock->Now();
    Clock::TimePoint next = now + kIdle;
    std::vector<std::shared_ptr<HeldLock>> renew;
    std::vector<std::shared_ptr<HeldLock>> expired;
    bool due_now = false;
    for (const auto& [key, held] : held_) {
      const Clock::TimePoint valid_until = FromNs(held->valid_until_ns.load());
      if (now >= valid_until) {
        expired.push_back(held);  // the lease ran out: not renewed in time
        continue;
      }
      next = std::min(next, valid_until);
      if (held->renewing) continue;
      if (held->check_now) {
        // A force event named this grant: ask Redis now (explicit leases
        // too: their check does not extend them), or once the rate limit
        // allows.
        if (now < held->no_check_before) {
          next = std::min(next, held->no_check_before);
        } else {
          held->check_now = false;
          held->no_check_before = now + kForcedCheckInterval;
          forced_checks_.fetch_add(1, std::memory_order_relaxed);
          due_now = true;
          renew.push_back(held);
          continue;
        }
      }
      if (!held->renew) continue;
      if (held->next_check <= now) {
        due_now = true;
        renew.push_back(held);
      } else if (held->next_check <= now + held->lease / 10) {
        // Due soon: renewed early if something is due now, so locks taken
        // at nearly the same time share one pipelined round trip.
        renew.push_back(held);
        next = std::min(next, held->next_check);
      } else {
        next = std::min(next, held->next_check);
      }
    }
    if (!due_now) renew.clear();  // nothing due yet: sleep until it is
    LostCalls calls = std::move(deferred_calls_);
    deferred_calls_.clear();
    for (const auto& held : expired) {
      MarkLostLocked(held, &calls);
      Forget(held);
    }
    if (!renew.empty()) {
      for (const auto& held : renew) held->renewing = true;
      renew_queue_.push_back(std::move(renew));
      renewer_cv_.notify_one();
    }
    if (!calls.empty()) {
      lock.unlock();
      RunCallbacks(calls);
      lock.lock();
      continue;
    }
    if (due_now) continue;  // recompute: the queued ones are now `renewing`
    watchdog_cv_.wait_for(lock, next - now);
  }
}

void LockCore::RenewerLoop() {
  std::unique_lock lock(mu_);
  for (;;) {
    renewer_cv_.wait(lock, [&] { return stopping_ || !renew_queue_.empty(); });
    if (stopping_) return;
    std::vector<std::shared_ptr<HeldLock>> batch =
        std::move(renew_queue_.front());
    renew_queue_.pop_front();
    lock.unlock();
    for (size_t i = 0; i < batch.size(); i += kBatch) {
      size_t end = std::min(batch.size(), i + kBatch);
      RenewDue(std::vector<std::shared_ptr<HeldLock>>(batch.begin() + i,
                                                      batch.begin() + end));
    }
    lock.lock();
    watchdog_cv_.notify_one();
  }
}

void LockCore::RenewDue(std::vector<std::shared_ptr<HeldLock>> due) {
  std::vector<RedisClient::EvalCall> calls;
  calls.reserve(due.size());
  for (const auto& held : due) {
    // Lease 0 for an explicit lease: a check that does not extend it.
    calls.push_back({&RenewScript(),
                     {held->key},
                     {held->owner, std::to_string(held->fence),
                      std::to_string(held->renew ? held->lease.count() : 0)}});
  }
  const Clock::TimePoint sent = options_.clock->Now();
  std::vector<Reply> replies;
  bool failed = false;
  // One WAIT after the batch. A renewal the replicas did not acknowledge is
  // not one: a failover could bring back the shorter lease, so validity is
  // not extended and the renewal is tried again (a "not ours" answer still
  // ends the hold: the master's word on that needs no replica).
  std::optional<ReplicaWait> wait = ReplicaWanted();
  bool acknowledged = true;
  try {
    replies = redis_->EvalPipeline(calls, {}, wait ? &*wait : nullptr);
    acknowledged = Acknowledged(wait);
    if (!acknowledged && observer()) observer()->OnRenewal(0, true);
  } catch (const Error& e) {
    failed = true;
    renewal_failures_.fetch_add(1, std::memory_order_relaxed);
    if (observer()) {
      observer()->OnError(e.code());
      observer()->OnRenewal(0, true);
    }
  }
  uint64_t renewed = 0;
  LostCalls lost_calls;
  {
    std::lock_guard lock(mu_);
    const Clock::TimePoint now = options_.clock->Now();
    for (size_t i = 0; i < due.size(); ++i) {
      const std::shared_ptr<HeldLock>& held = due[i];
      held->renewing = false;
      // Released or lost meanwhile: a "not ours" answer is expected, ignore.
      if (held->released || held->lost.load()) continue;
      bool ok = !failed && replies[i].type == Reply::Type::kInteger;
      if (ok && replies[i].integer == 1 && !acknowledged) ok = false;
      if (ok && replies[i].integer == 1 && !held->renew) {
        continue;  // an explicit lease checked: still ours, not extended
      } else if (ok && replies[i].integer == 1) {
        renewals_.fetch_add(1, std::memory_order_relaxed);
        ++renewed;
        int64_t valid = ValidUntilNs(sent, held->lease);
        if (valid > held->valid_until_ns.load())
          held->valid_until_ns.store(valid);
        held->next_check = sent + held->lease / 3;
      } else if (ok) {
        // The lock is no longer ours: expired, force-unlocked or taken.
        MarkLostLocked(held, &lost_calls);
        Forget(held);
      } else {
        if (!failed) renewal_failures_.fetch_add(1, std::memory_order_relaxed);
        if (now >= FromNs(held->valid_until_ns.load())) {
          MarkLostLocked(held, &lost_calls);  // could not renew in time
          Forget(held);
        } else if (!held->renew) {
          // A forced check of an explicit lease failed on the connection:
          // its validity still tells when it ends.
        } else {
          held->next_check = now + RetryDelay(held->lease);
        }
      }
    }
  }
  if (renewed > 0 && observer()) observer()->OnRenewal(renewed, false);
  DeferCallbacks(std::move(lost_calls));  // they run on the watchdog thread
}

}  // namespace lockfleet::internal
