// The lease watchdog: one thread per LockClient renews every held
// watchdog-mode lock at lease/3, in pipelined batches, and notices leases
// that ran out.
#include <pthread.h>

#include <algorithm>
#include <unordered_map>

#include "lock_core.h"
#include "lockfleet/lockcore/error.h"
#include "scripts.h"

namespace lockfleet::internal {
namespace {

using std::chrono::milliseconds;

constexpr size_t kBatch = 256;  // renewals per pipelined round trip
constexpr Clock::Duration kIdle = std::chrono::seconds(1);  // longest sleep
// A renewal due within lease/10 is sent early with one that is due now, so
// that locks taken at nearly the same time share a round trip — but never
// more than this early: the scan for them looks at the front of the
// timetable up to now + kMostEarly (with leases under ~4.5 s, that is every
// held grant once per round of renewals).
constexpr Clock::Duration kMostEarly = std::chrono::seconds(3);

// After a failed renewal, try again soon — but not in a hot loop.
Clock::Duration RetryDelay(milliseconds lease) {
  return std::clamp<Clock::Duration>(lease / 10, milliseconds(10),
                                     milliseconds(1000));
}

// Names the calling thread as `top -H`, ps and gdb show it (at most 15
// characters). Best effort.
void NameThread(const char* name) { pthread_setname_np(pthread_self(), name); }

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
  watchdog_ = std::thread([self = shared_from_this()] {
    NameThread("lf-watchdog");
    self->WatchdogLoop();
  });
  renewer_ = std::thread([self = shared_from_this()] {
    NameThread("lf-renewer");
    self->RenewerLoop();
  });
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
    for (const auto& [at, held] : schedule_) held->scheduled_at.reset();
    schedule_.clear();
    auto lose = [&](const std::shared_ptr<HeldLock>& held) {
      if (held->released || held->lost.exchange(true)) return;
      leases_lost_.fetch_add(1, std::memory_order_relaxed);
      if (observer() && held->set_kind != SetKind::kNone) ObserveLost(*held);
      left.push_back(held);
    };
    for (const auto& [key, held] : held_) lose(held);
    for (const auto& [id, held] : permits_) lose(held);
  }
  for (const auto& held : left) held->lost_source.request_stop();
}

void LockCore::Schedule(const std::shared_ptr<HeldLock>& held) {
  Unschedule(held);
  Clock::TimePoint at = FromNs(held->valid_until_ns.load());
  if (!held->renewing) {
    if (held->check_now) at = std::min(at, held->no_check_before);
    if (held->renew) at = std::min(at, held->next_check);
  }
  held->scheduled_at = at;
  schedule_.emplace(at, held);
  // Wake a sleeping watchdog if this is before its wake-up, or if its
  // wake-up has passed (a clock that jumped: it would sleep on for real).
  if (watchdog_wakes_at_ != Clock::TimePoint::min() &&
      (at < watchdog_wakes_at_ ||
       watchdog_wakes_at_ <= options_.clock->Now())) {
    watchdog_cv_.notify_one();
  }
}

void LockCore::Unschedule(const std::shared_ptr<HeldLock>& held) {
  if (!held->scheduled_at) return;
  schedule_.erase({*held->scheduled_at, held});
  held->scheduled_at.reset();
}

void LockCore::WatchdogLoop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    const Clock::TimePoint now = options_.clock->Now();
    std::vector<std::shared_ptr<HeldLock>> renew;
    std::vector<std::shared_ptr<HeldLock>> expired;
    // Only the grants whose time has come: each leaves the timetable here
    // and goes back into it (Schedule) at its next time, or is forgotten.
    while (!schedule_.empty() && schedule_.begin()->first <= now) {
      std::shared_ptr<HeldLock> held = schedule_.begin()->second;
      Unschedule(held);
      if (now >= FromNs(held->valid_until_ns.load())) {
        expired.push_back(std::move(held));  // not renewed in time
      } else if (!held->renewing && held->check_now &&
                 now >= held->no_check_before) {
        // A force event named this grant: ask Redis now (explicit leases
        // too: their check does not extend them), rate-limited.
        held->check_now = false;
        held->no_check_before = now + kForcedCheckInterval;
        forced_checks_.fetch_add(1, std::memory_order_relaxed);
        renew.push_back(std::move(held));
      } else if (!held->renewing && held->renew && held->next_check <= now) {
        renew.push_back(std::move(held));
      } else {
        Schedule(held);  // its times moved on meanwhile: later, then
      }
    }
    if (!renew.empty()) {
      // Due soon: renewed early with those due now, so locks taken at nearly
      // the same time share one pipelined round trip.
      for (auto it = schedule_.begin();
           it != schedule_.end() && it->first <= now + kMostEarly; ++it) {
        const std::shared_ptr<HeldLock>& held = it->second;
        if (held->renew && !held->renewing &&
            held->next_check <= now + held->lease / 10) {
          renew.push_back(held);
        }
      }
      for (const auto& held : renew) {
        held->renewing = true;
        Schedule(held);  // now only its validity deadline counts
      }
      renew_queue_.push_back(std::move(renew));
      renewer_cv_.notify_one();
    }
    // Parked waiters whose presence is due, and all due within the next
    // refresh period with them (early is harmless: presence is 3 intervals
    // long): one pipelined round trip for all, and from then on in step,
    // twice an interval (a waiter parks on only while a check came within
    // the last interval: half an interval of slack).
    if (!parked_due_.empty() && parked_due_.begin()->first <= now) {
      const Clock::TimePoint until = now + PresenceInterval() / 2;
      std::vector<std::string> refresh;
      while (!parked_due_.empty() && parked_due_.begin()->first <= until) {
        std::string id = parked_due_.begin()->second;
        parked_due_.erase(parked_due_.begin());
        auto it = parked_.find(id);
        if (it == parked_.end()) continue;
        it->second.refreshing = true;
        refresh.push_back(std::move(id));
      }
      if (!refresh.empty()) {
        presence_queue_.push_back(std::move(refresh));
        renewer_cv_.notify_one();
      }
    }
    LostCalls calls = std::move(deferred_calls_);
    deferred_calls_.clear();
    for (const auto& held : expired) {
      MarkLostLocked(held, &calls);
      Forget(held);
    }
    if (!calls.empty()) {
      lock.unlock();
      RunCallbacks(calls);
      lock.lock();
      continue;
    }
    const Clock::TimePoint after = options_.clock->Now();
    Clock::TimePoint next = after + kIdle;
    if (!schedule_.empty()) next = std::min(next, schedule_.begin()->first);
    if (!parked_due_.empty()) next = std::min(next, parked_due_.begin()->first);
    watchdog_wakes_at_ = next;
    watchdog_cv_.wait_for(lock, next - after);
    watchdog_wakes_at_ = Clock::TimePoint::min();
  }
}

void LockCore::RenewerLoop() {
  std::unique_lock lock(mu_);
  for (;;) {
    renewer_cv_.wait(lock, [&] {
      return stopping_ || !renew_queue_.empty() || !presence_queue_.empty();
    });
    if (stopping_) return;
    if (!renew_queue_.empty()) {  // renewals first: leases are at stake
      std::vector<std::shared_ptr<HeldLock>> batch =
          std::move(renew_queue_.front());
      renew_queue_.pop_front();
      lock.unlock();
      for (size_t i = 0; i < batch.size(); i += kBatch) {
        size_t end = std::min(batch.size(), i + kBatch);
        RenewDue(std::vector<std::shared_ptr<HeldLock>>(batch.begin() + i,
                                                        batch.begin() + end));
      }
    } else {
      // One pipelined chunk at a time; the rest waits behind any renewals
      // that came meanwhile.
      std::vector<std::string>& front = presence_queue_.front();
      std::vector<std::string> chunk;
      if (front.size() <= kBatch) {
        chunk = std::move(front);
        presence_queue_.pop_front();
      } else {
        chunk.assign(std::make_move_iterator(front.end() - kBatch),
                     std::make_move_iterator(front.end()));
        front.resize(front.size() - kBatch);
      }
      lock.unlock();
      RefreshPresence(chunk);
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
    const std::string lease =
        std::to_string(held->renew ? held->lease.count() : 0);
    if (!held->expiry_key.empty()) {  // a semaphore's permit set
      calls.push_back({&SemRenewScript(),
                       {held->key, held->expiry_key},
                       {held->owner, lease}});
      continue;
    }
    calls.push_back({&RenewScript(),
                     {held->key},
                     {held->owner, std::to_string(held->fence), lease}});
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
        // An explicit lease checked: still ours, not extended.
        Schedule(held);
      } else if (ok && replies[i].integer == 1) {
        renewals_.fetch_add(1, std::memory_order_relaxed);
        ++renewed;
        int64_t valid = ValidUntilNs(sent, held->lease);
        if (valid > held->valid_until_ns.load())
          held->valid_until_ns.store(valid);
        held->next_check = sent + held->lease / 3;
        Schedule(held);
      } else if (ok) {
        // The lock is no longer ours: expired, force-unlocked or taken.
        MarkLostLocked(held, &lost_calls);
        Forget(held);
      } else {
        if (!failed) renewal_failures_.fetch_add(1, std::memory_order_relaxed);
        if (now >= FromNs(held->valid_until_ns.load())) {
          MarkLostLocked(held, &lost_calls);  // could not renew in time
          Forget(held);
        } else {
          // A forced check of an explicit lease that failed on the
          // connection needs nothing more: its validity tells when it ends.
          // Again well before the validity ends (a hand-off in full is
          // valid for the claim window only until its first renewal).
          if (held->renew)
            held->next_check =
                now + std::min<Clock::Duration>(
                          RetryDelay(held->lease),
                          std::max<Clock::Duration>(
                              (FromNs(held->valid_until_ns.load()) - now) / 3,
                              milliseconds(10)));
          Schedule(held);
        }
      }
    }
  }
  if (renewed > 0 && observer()) observer()->OnRenewal(renewed, false);
  DeferCallbacks(std::move(lost_calls));  // they run on the watchdog thread
}

Clock::Duration LockCore::PresenceInterval() const {
  return std::min<Clock::Duration>(options_.park_cap,
                                   options_.presence_window / 3);
}

void LockCore::ParkedDueLocked(const std::string& waiter_id, Parked& parked,
                               Clock::TimePoint due) {
  if (!parked.refreshing) {
    parked_due_.erase({parked.due, waiter_id});
    parked_due_.emplace(due, waiter_id);
    // Wake a sleeping watchdog that would sleep past it (as Schedule).
    if (watchdog_wakes_at_ != Clock::TimePoint::min() &&
        (due < watchdog_wakes_at_ ||
         watchdog_wakes_at_ <= options_.clock->Now())) {
      watchdog_cv_.notify_one();
    }
  }
  parked.due = due;
}

bool LockCore::KeepPresence(const std::string& name, const std::string& owner,
                            const std::string& waiter_id,
                            Clock::TimePoint sent) {
  std::lock_guard lock(mu_);
  if (stopping_) return false;
  Parked& parked = parked_[waiter_id];
  parked.name = name;
  parked.owner = owner;
  parked.checked = std::max(parked.checked, sent);  // the attempt checked
  // Alive now, after the attempt (a slow one must not look stuck).
  parked.seen = std::max(parked.seen, options_.clock->Now());
  ParkedDueLocked(waiter_id, parked, sent + PresenceInterval() / 2);
  return true;
}

void LockCore::DropPresence(const std::string& waiter_id) {
  std::lock_guard lock(mu_);
  auto it = parked_.find(waiter_id);
  if (it == parked_.end()) return;
  if (!it->second.refreshing) parked_due_.erase({it->second.due, waiter_id});
  parked_.erase(it);
}

std::pair<Clock::TimePoint, uint64_t> LockCore::PresenceChecked(
    const std::string& waiter_id, Clock::TimePoint now) {
  std::lock_guard lock(mu_);
  auto it = parked_.find(waiter_id);
  if (it == parked_.end()) return {Clock::TimePoint::min(), 0};
  it->second.seen = std::max(it->second.seen, now);
  return {it->second.checked, it->second.confirmed};
}

void LockCore::RefreshPresence(const std::vector<std::string>& waiter_ids) {
  const Clock::Duration interval = PresenceInterval();
  std::vector<RedisClient::EvalCall> calls;
  std::vector<std::string> ids;  // of calls, in order
  const std::string presence = std::to_string(options_.presence_window.count());
  {
    std::lock_guard lock(mu_);
    const Clock::TimePoint now = options_.clock->Now();
    for (const std::string& id : waiter_ids) {
      auto it = parked_.find(id);
      if (it == parked_.end()) continue;  // left meanwhile
      // A waiter's thread wakes at least every interval; one not seen for
      // one and a half is stuck (in user code, say): its place is no longer
      // kept, so that it lapses as a hung waiter's does (a presence window
      // after that). One that was only late finds no check confirmed when
      // it wakes, and makes its own attempt.
      if (now - it->second.seen > interval * 3 / 2) continue;
      calls.push_back({&PresenceScript(),
                       Keys(it->second.name),
                       {id, it->second.owner, presence}});
      ids.push_back(id);
    }
  }
  const Clock::TimePoint sent = options_.clock->Now();
  std::vector<Reply> replies;
  bool failed = false;
  if (!calls.empty()) {
    try {
      // Short: renewals may be waiting behind this batch (a waiter's own
      // attempt is the net for a refresh that did not make it).
      const Clock::Duration timeout = std::clamp<Clock::Duration>(
          interval / 2, milliseconds(50), milliseconds(250));
      replies = redis_->EvalPipeline(
          calls, std::chrono::duration_cast<milliseconds>(timeout));
      presence_refreshes_.fetch_add(calls.size(), std::memory_order_relaxed);
    } catch (const Error& e) {
      failed = true;  // each waiter's own bound is the net; retried soon
      if (observer()) observer()->OnError(e.code());
    }
  }
  std::unordered_map<std::string, size_t> index;  // waiter id -> its call
  for (size_t i = 0; i < ids.size(); ++i) index.emplace(ids[i], i);
  struct Wake {
    std::string name, waiter_id;
    bool handed;  // off the queue ({0}): maybe handed the lock
  };
  std::vector<Wake> wake;
  {
    std::lock_guard lock(mu_);
    const Clock::TimePoint now = options_.clock->Now();
    for (const std::string& id : waiter_ids) {
      auto it = parked_.find(id);
      if (it == parked_.end() || !it->second.refreshing) continue;
      Parked& parked = it->second;
      parked.refreshing = false;
      const auto at = index.find(id);
      if (at == index.end()) {  // not sent (not seen lately): as usual
        ParkedDueLocked(id, parked, now + interval / 2);
        continue;
      }
      const Reply* reply = failed || at->second >= replies.size()
                               ? nullptr
                               : &replies[at->second];
      if (reply == nullptr || reply->type != Reply::Type::kArray ||
          reply->elements.empty()) {  // Redis did not answer: again soon
        ParkedDueLocked(
            id, parked,
            now + std::min<Clock::Duration>(interval / 2, milliseconds(200)));
        continue;
      }
      if (reply->elements[0].integer == 1) {
        parked.checked = std::max(parked.checked, sent);
        ++parked.confirmed;
      } else {
        wake.push_back({parked.name, id, reply->elements[0].integer == 0});
      }
      ParkedDueLocked(id, parked, sent + interval / 2);
    }
  }
  for (const Wake& w : wake) {
    if (waits_.WakeWaiter(w.name, w.waiter_id, WakeCause::kChecked, w.handed))
      presence_wakes_.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace lockfleet::internal
