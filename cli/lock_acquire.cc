#include "lock_acquire.h"

#include <algorithm>
#include <stop_token>
#include <string>

#include "command.h"
#include "lock_held.h"
#include "lockfleet/config/duration.h"
#include "lockfleet/lockcore/error.h"

namespace lockfleet::cli {
namespace {

using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;

// How long a contended acquisition waits for Kafka's consumer to be ready
// (unlock events published before that are not seen), how often it checks
// for a signal meanwhile, and how often it tries the lock again.
constexpr milliseconds kKafkaReadyWait{5000};
constexpr milliseconds kKafkaReadyPoll{20};
constexpr milliseconds kKafkaReadyRetry{250};

AcquireResult AcquireUntil(LockClient& client, const LockRequest& request,
                           const AcquireOptions& options,
                           std::optional<Steady::time_point> deadline) {
  const std::string& name = request.names.front();
  if (deadline)
    return client.AcquireFor(name, *deadline - Steady::now(), options);
  AcquireResult result;
  try {
    result.lease = client.Acquire(name, options);
    result.status = AcquireStatus::kAcquired;
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kCancelled) throw;
    result.status = AcquireStatus::kCancelled;
  }
  return result;
}

// Whether the request allows no more than the first try (--wait 0).
bool TriesOnce(const LockRequest& request) {
  return request.wait && *request.wait <= milliseconds(0);
}

// "waiting for lock 'X' held by 'H' (...)"; with several names, "waiting
// for locks 'A', 'X': 'X' held by 'H' (...)".
void ReportWaiting(const LockRequest& request, const std::string& blocked_on,
                   const std::string& holder,
                   const notifier::KafkaNotifier* kafka) {
  std::string how;
  if (kafka == nullptr) {
    how = "no Kafka";
  } else if (kafka->stats().assigned) {
    how = "Kafka unlock events on";
  } else {
    how = "Kafka not ready";
  }
  if (request.semaphore) {
    PrintError("waiting for " +
               PermitsNoun(request.semaphore->take, blocked_on) + " (" +
               holder + " free; " + how + "; retrying at least every " +
               config::FormatDuration(request.locks.park_cap) + ")");
    return;
  }
  if (request.rw_mode) {
    PrintError("waiting for " + RwNoun(blocked_on, *request.rw_mode) +
               (holder.empty() ? "" : " held by " + holder) + " (" + how +
               "; retrying at least every " +
               config::FormatDuration(request.locks.park_cap) + ")");
    return;
  }
  const std::string held_by =
      holder.empty() ? "" : " held by " + Quoted(holder);
  PrintError((request.names.size() == 1
                  ? "waiting for lock " + Quoted(blocked_on) + held_by
                  : "waiting for locks " + QuotedList(request.names) + ": " +
                        Quoted(blocked_on) +
                        (held_by.empty() ? " busy" : held_by)) +
             " (" + how + "; retrying at least every " +
             config::FormatDuration(request.locks.park_cap) + ")");
}

// After a refused first try (*result): waits for Kafka's consumer to be
// ready (see AcquireLock), at most kKafkaReadyWait, trying again with
// `try_again` every kKafkaReadyRetry meanwhile. Returns true when *result
// ends the acquisition (acquired by a try, cancelled, or out of time), false
// when the caller should go on and wait.
template <typename Result, typename TryAgain>
bool AwaitKafkaReady(const LockRequest& request, const std::stop_token& stop,
                     notifier::KafkaNotifier* kafka,
                     std::optional<Steady::time_point> deadline,
                     const TryAgain& try_again, Result* result) {
  if (kafka == nullptr || kafka->WaitUntilReady(milliseconds(0))) return false;
  const Steady::time_point ready_by = Steady::now() + kKafkaReadyWait;
  const milliseconds retry_every =
      std::min(kKafkaReadyRetry, request.locks.park_cap);
  Steady::time_point next_try = Steady::now() + retry_every;
  while (!kafka->WaitUntilReady(kKafkaReadyPoll)) {
    if (stop.stop_requested()) {
      result->status = AcquireStatus::kCancelled;
      return true;
    }
    const Steady::time_point now = Steady::now();
    if (deadline && now >= *deadline) return true;  // timed out
    if (now >= ready_by) {
      PrintError("warning: Kafka at " + request.kafka->bootstrap + " (" +
                 request.kafka_source + ") not ready after " +
                 config::FormatDuration(kKafkaReadyWait) +
                 "; waiting without unlock events (retrying at least every " +
                 config::FormatDuration(request.locks.park_cap) + ")");
      return false;
    }
    if (now >= next_try) {
      *result = try_again();
      if (*result) return true;
      next_try = now + retry_every;
    }
  }
  return false;
}

// The shape every acquisition here has (see AcquireLock): `try_once`; if
// refused and waiting is allowed, Kafka ready (trying again meanwhile),
// `report(refused)` with --verbose, then `wait()`.
template <typename TryOnce, typename Report, typename Wait>
auto TryThenWait(const LockRequest& request, const std::stop_token& stop,
                 notifier::KafkaNotifier* kafka,
                 std::optional<Steady::time_point> deadline,
                 const TryOnce& try_once, const Report& report,
                 const Wait& wait) {
  auto result = try_once();
  if (result || TriesOnce(request)) return result;
  if (AwaitKafkaReady(request, stop, kafka, deadline, try_once, &result)) {
    return result;
  }
  if (request.verbose) report(result);
  return wait();
}

}  // namespace

// One attempt first: a free lock costs no wait for Kafka. If it is taken,
// Kafka's consumer must be ready before the waiter parks, or the holder's
// unlock event may pass unseen and the wait last a whole park bound. So wait
// for it (at most kKafkaReadyWait) before joining the queue, trying again
// now and then meanwhile; a try never queues, so this costs no place in the
// fair queue that one wait call would not also cost. Kafka that does not
// get ready earns one warning, and the wait goes on with park bounds alone.
AcquireResult AcquireLock(LockClient& client, const LockRequest& request,
                          const AcquireOptions& options,
                          notifier::KafkaNotifier* kafka,
                          std::optional<Steady::time_point> deadline) {
  const std::string& name = request.names.front();
  return TryThenWait(
      request, options.stop, kafka, deadline,
      [&] { return client.TryAcquire(name, options); },
      [&](const AcquireResult& refused) {
        ReportWaiting(request, name, refused.holder, kafka);
      },
      [&] { return AcquireUntil(client, request, options, deadline); });
}

// The same with all-or-nothing tries and wait. A try that takes some of the
// locks gives them back before it returns (and their release may wake a
// waiter elsewhere): a retry every kKafkaReadyRetry for a few seconds at
// most, as for one lock.
AcquireAllResult AcquireAllLocks(LockClient& client, const LockRequest& request,
                                 const AcquireOptions& options,
                                 notifier::KafkaNotifier* kafka,
                                 std::optional<Steady::time_point> deadline) {
  return TryThenWait(
      request, options.stop, kafka, deadline,
      [&] { return client.TryAcquireAll(request.names, options); },
      [&](const AcquireAllResult& refused) {
        ReportWaiting(request, refused.blocked_on, refused.holder, kafka);
      },
      [&] {
        return client.AcquireAllUntil(
            request.names, deadline.value_or(Steady::time_point::max()),
            options);
      });
}

// As AcquireLock: a first try, Kafka ready, then the wait (a try never
// queues; the wait does, in arrival order).
RwResult AcquireRwLock(LockClient& client, const LockRequest& request,
                       const RwOptions& options, notifier::KafkaNotifier* kafka,
                       std::optional<Steady::time_point> deadline) {
  const std::string& name = request.names.front();
  ReadWriteLock rw = client.ReadWriteLock(name);
  const RwMode mode = *request.rw_mode;
  return TryThenWait(
      request, options.stop, kafka, deadline,
      [&] { return rw.TryAcquire(mode, options); },
      [&](const RwResult&) {
        std::string holders;
        try {
          holders = DescribeRwHolders(rw.Inspect());
        } catch (const Error&) {  // only a report: the wait tells
        }
        ReportWaiting(request, name, holders, kafka);
      },
      [&] {
        return rw.AcquireUntil(
            mode, deadline.value_or(Steady::time_point::max()), options);
      });
}

PermitResult AcquirePermits(LockClient& client, const LockRequest& request,
                            const PermitOptions& options,
                            notifier::KafkaNotifier* kafka,
                            std::optional<Steady::time_point> deadline) {
  Semaphore semaphore = client.Semaphore(request.names.front());
  const int64_t take = request.semaphore->take;
  return TryThenWait(
      request, options.stop, kafka, deadline,
      [&] { return semaphore.TryAcquire(take, options); },
      [&](const PermitResult& refused) {
        ReportWaiting(request, request.names.front(),
                      std::to_string(refused.available), kafka);
      },
      [&] {
        return semaphore.AcquireUntil(
            take, deadline.value_or(Steady::time_point::max()), options);
      });
}

}  // namespace lockfleet::cli
