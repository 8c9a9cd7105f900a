// The seam between lockcore and a notification transport.
//
// When a lock is freed, LockClient wakes one waiter of its own process
// directly and hands an UnlockEvent to its UnlockPublisher (if any), which
// carries it to the other processes (lockfleet::notifier does this over
// Kafka). A process that receives an event calls
// LockClient::DeliverUnlockEvent, which wakes at most one local waiter parked
// on that lock.
//
// Notification is a speed-up, never a correctness dependency: a parked waiter
// never sleeps past the bound computed from the lock's remaining TTL, so a
// lost, late, duplicated or forged event costs latency or one extra Redis
// attempt, never a hang or a second holder.
#pragma once

#include <cstdint>
#include <string>

namespace lockfleet {

enum class UnlockCause {
  kRelease,  // the owner released its last hold
  kForce,    // an administrator force-unlocked the lock
  kOpened,   // the countdown latch `lock` opened (latch.h): every process
             // wakes all its awaiters of it
  kPermits,  // the semaphore (or read-write lock) `lock` handed permits to
             // the queued waiters named in `next_waiter`, their ids joined
             // by '\n' (semaphore.h, rwlock.h): only those waiters wake.
             // Naming none: a read-write lock was freed for nobody; one
             // local waiter (one that barges) wakes
};

// "release" / "force" / "opened" / "permits".
const char* UnlockCauseName(UnlockCause cause) noexcept;

struct UnlockEvent {
  std::string lock;            // the lock name as given to LockClient
  std::string owner;           // owner token of the releasing holder
  std::string client_id;       // LockClient::client_id() of the releaser
  int64_t fence = 0;           // fencing token of the grant that ended
  int64_t released_at_ns = 0;  // system_clock time of the release, ns
  UnlockCause cause = UnlockCause::kRelease;
  // Fair hand-off: the lock was granted directly to this queued waiter (its
  // wait id, owner token and the grant's fencing token). Only that waiter's
  // process wakes, and only that thread. Empty when the lock became free.
  std::string next_waiter;
  std::string next_owner;
  int64_t next_fence = 0;
};

// Implemented by a transport that delivers to a process only the events of
// the names it waits on (lockfleet::notifier's targeted fan-out), and given
// to a LockClient with SetUnlockInterest. The client calls Watch(name) when
// one of its calls is about to park on `name` — a lock, semaphore,
// read-write lock or latch — after an attempt at Redis that did not get it,
// and Unwatch(name) once for each Watch when the call stops waiting. The
// transport must then deliver the events about `name` published since
// shortly before Watch (the refused attempt's own moment: the release that
// follows it may already have been published) — a transport that starts
// fetching does so a little before the end it finds. An event that does not
// arrive anyway costs latency only (the park is bounded). Both are called on
// the waiting thread, outside the client's locks, and from many threads at
// once; they must not throw, and Watch delays the park, so it must not wait
// on the network.
class UnlockInterest {
 public:
  virtual ~UnlockInterest() = default;
  virtual void Watch(const std::string& name) noexcept = 0;
  virtual void Unwatch(const std::string& name) noexcept = 0;
};

// Implemented by a transport. Thread-safety: Publish may be called from any
// thread concurrently.
class UnlockPublisher {
 public:
  virtual ~UnlockPublisher() = default;

  // Hands `event` off for delivery to other processes. Must neither block on
  // the network nor throw: the releaser is on its critical path. Delivery is
  // best effort; failures are the transport's to count and log.
  virtual void Publish(const UnlockEvent& event) noexcept = 0;
};

}  // namespace lockfleet
