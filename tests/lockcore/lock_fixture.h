// Shared fixture for lockcore integration tests: one private redis-server per
// test suite (FLUSHALL between tests), and helpers to build clients.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/redis_client.h"
#include "support/loopback_bus.h"
#include "support/redis_server.h"
#include "support/wait_until.h"

namespace lockfleet::testing {

// The unlock event of a release of `lock` (grant `fence`, by another
// client) that handed the lock to `next`: what a waiter's process gets.
inline UnlockEvent HandOffEvent(const std::string& lock, int64_t fence,
                                const QueuedWaiter& next,
                                int64_t next_fence = 0) {
  UnlockEvent e;
  e.lock = lock;
  e.client_id = "elsewhere";
  e.fence = fence;
  e.next_waiter = next.waiter_id;
  e.next_owner = next.owner;
  e.next_fence = next_fence != 0 ? next_fence : fence + 1;
  return e;
}

class LockTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new RedisServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    if (server_->pid() <= 0) server_->Start();  // a test may have stopped it
    redis_ = NewRedis();
    redis_->Execute({"FLUSHALL"});
  }

  static std::shared_ptr<RedisClient> NewRedis(int pool = 4) {
    RedisOptions o;
    o.url = server_->url();
    o.pool_size = pool;
    return std::make_shared<RedisClient>(o);
  }

  // A client as a separate process would have it: its own connections.
  static std::unique_ptr<LockClient> NewClient(LockClientOptions o = {}) {
    return std::make_unique<LockClient>(NewRedis(), std::move(o));
  }

  static std::string LockKey(const std::string& name,
                             const std::string& prefix = "lockfleet") {
    return prefix + ":{" + name + "}:lock";
  }

  static RedisServer* server_;
  std::shared_ptr<RedisClient> redis_;  // for direct inspection
};

inline RedisServer* LockTest::server_ = nullptr;

// Clients connected by an in-memory bus (their unlock events reach each
// other), with a long presence window and park cap unless a test sets its
// own, so that every hand-off must come from a release or an event, not a
// bound.
class ConnectedLockTest : public LockTest {
 protected:
  std::unique_ptr<LockClient> Connected(LockClientOptions o = {}) {
    if (o.presence_window == LockClientOptions{}.presence_window) {
      o.presence_window = std::chrono::seconds(60);
      o.claim_window = std::chrono::seconds(30);
    }
    if (o.park_cap == LockClientOptions{}.park_cap)
      o.park_cap = std::chrono::seconds(600);
    o.publisher = bus_ptr_;
    auto c = NewClient(o);
    bus_.Subscribe(c.get());
    subscribed_.push_back(c.get());
    return c;
  }
  // A waiting acquisition of `name` on `waiter`, on its own thread, for up
  // to `wait`; returns once the queue (as `observer` sees it) holds
  // `position` waiters and `waiter` has counted its refused attempt (its
  // counters move after Redis queued it), so that a test's later snapshot
  // of the waiter's counters sees nothing of its first attempt.
  static std::future<AcquireResult> Queue(
      LockClient& waiter, LockClient& observer, const std::string& name,
      size_t position, AcquireOptions o = {},
      std::chrono::milliseconds wait = std::chrono::seconds(60)) {
    const uint64_t contended = waiter.stats().contended_attempts;
    auto f = std::async(std::launch::async, [&waiter, name, o, wait] {
      return waiter.AcquireFor(name, wait, o);
    });
    EXPECT_TRUE(WaitUntil([&] {
      return observer.Inspect(name).queue.size() == position &&
             waiter.stats().contended_attempts > contended;
    }));
    return f;
  }

  void TearDown() override {
    for (LockClient* c : subscribed_) bus_.Unsubscribe(c);
  }

  LoopbackBus bus_;
  std::shared_ptr<UnlockPublisher> bus_ptr_{&bus_, [](UnlockPublisher*) {}};
  std::vector<LockClient*> subscribed_;
};

// A force unlock event naming `lease`'s grant of `name`, as another client
// ("someone-else") would send it — or forge it.
inline UnlockEvent ForceEventFor(const std::string& name, const Lease& lease) {
  UnlockEvent event;
  event.lock = name;
  event.owner = lease.owner();
  event.fence = lease.fence();
  event.client_id = "someone-else";
  event.cause = UnlockCause::kForce;
  return event;
}

}  // namespace lockfleet::testing
