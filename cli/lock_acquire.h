// Acquiring the lock for `lockfleet lock`, with or without Kafka.
//
// The first attempt is made at once, so a free lock never waits for Kafka.
// If the lock is taken and waiting is allowed, unlock events can only wake
// this process once its Kafka consumer is ready (events published before are
// not seen), so it first waits for that — a few hundred milliseconds
// normally, at most a few seconds, trying the lock again now and then — and
// only then joins the wait (in fair mode, the queue in Redis). If Kafka does
// not get ready in time it warns once on stderr and waits on its park bounds
// (--park-cap) alone. Either way Redis decides who holds the lock; Kafka
// only decides how soon a waiter tries again.
//
// Several names (AcquireAllLocks) go the same way as a whole: a first
// all-or-nothing try, the wait for Kafka with all-or-nothing tries now and
// then, then one all-or-nothing wait (LockClient::AcquireAllUntil: sorted
// order, what was taken given back when the wait ends without the rest).
#pragma once

#include <chrono>
#include <optional>

#include "lock_run.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/multi_lock.h"
#include "lockfleet/lockcore/rwlock.h"
#include "lockfleet/lockcore/semaphore.h"
#include "lockfleet/notifier/kafka_notifier.h"

namespace lockfleet::cli {

// Acquires request.names[0] for up to `deadline` (nullopt: no limit;
// request.wait == 0: exactly one attempt), cancelled by options.stop. With
// request.verbose, reports on stderr when waiting starts. `kafka` may be
// null (no Kafka). Throws lockfleet::Error for Redis failures, like
// LockClient.
AcquireResult AcquireLock(
    LockClient& client, const LockRequest& request,
    const AcquireOptions& options, notifier::KafkaNotifier* kafka,
    std::optional<std::chrono::steady_clock::time_point> deadline);

// The same for every lock of request.names, all-or-nothing: when the result
// is not kAcquired, none of them is held, and result.blocked_on names the
// lock that was not granted.
AcquireAllResult AcquireAllLocks(
    LockClient& client, const LockRequest& request,
    const AcquireOptions& options, notifier::KafkaNotifier* kafka,
    std::optional<std::chrono::steady_clock::time_point> deadline);

// The same for request.rw_mode's hold of the read-write lock
// request.names[0]. With --verbose, the waiting report names its holders
// (one ReadWriteLock::Inspect).
RwResult AcquireRwLock(
    LockClient& client, const LockRequest& request, const RwOptions& options,
    notifier::KafkaNotifier* kafka,
    std::optional<std::chrono::steady_clock::time_point> deadline);

// The same for request.semaphore's permits of the semaphore
// request.names[0] (it exists: the caller set it).
PermitResult AcquirePermits(
    LockClient& client, const LockRequest& request,
    const PermitOptions& options, notifier::KafkaNotifier* kafka,
    std::optional<std::chrono::steady_clock::time_point> deadline);

}  // namespace lockfleet::cli
