#include "lock_acquire.h"

#include <algorithm>
#include <string>

#include "command.h"
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
  if (deadline) {
    return client.AcquireFor(request.name, *deadline - Steady::now(), options);
  }
  AcquireResult result;
  try {
    result.lease = client.Acquire(request.name, options);
    result.status = AcquireStatus::kAcquired;
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kCancelled) throw;
    result.status = AcquireStatus::kCancelled;
  }
  return result;
}

void ReportWaiting(const LockRequest& request, const AcquireResult& attempt,
                   const notifier::KafkaNotifier* kafka) {
  std::string how;
  if (kafka == nullptr) {
    how = "no Kafka";
  } else if (kafka->stats().assigned) {
    how = "Kafka unlock events on";
  } else {
    how = "Kafka not ready";
  }
  PrintError(
      "waiting for lock " + Quoted(request.name) +
      (attempt.holder.empty() ? "" : " held by " + Quoted(attempt.holder)) +
      " (" + how + "; retrying at least every " +
      config::FormatDuration(request.locks.park_cap) + ")");
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
  AcquireResult result = client.TryAcquire(request.name, options);
  if (result || (request.wait && *request.wait <= milliseconds(0))) {
    return result;
  }
  if (kafka != nullptr && !kafka->WaitUntilReady(milliseconds(0))) {
    const Steady::time_point ready_by = Steady::now() + kKafkaReadyWait;
    const milliseconds retry_every =
        std::min(kKafkaReadyRetry, request.locks.park_cap);
    Steady::time_point next_try = Steady::now() + retry_every;
    while (!kafka->WaitUntilReady(kKafkaReadyPoll)) {
      if (options.stop.stop_requested()) {
        result.status = AcquireStatus::kCancelled;
        return result;
      }
      const Steady::time_point now = Steady::now();
      if (deadline && now >= *deadline) return result;  // timed out
      if (now >= ready_by) {
        PrintError("warning: Kafka at " + request.kafka->bootstrap + " (" +
                   request.kafka_source + ") not ready after " +
                   config::FormatDuration(kKafkaReadyWait) +
                   "; waiting without unlock events (retrying at least every " +
                   config::FormatDuration(request.locks.park_cap) + ")");
        break;
      }
      if (now >= next_try) {
        result = client.TryAcquire(request.name, options);
        if (result) return result;
        next_try = now + retry_every;
      }
    }
  }
  if (request.verbose) ReportWaiting(request, result, kafka);
  return AcquireUntil(client, request, options, deadline);
}

}  // namespace lockfleet::cli
