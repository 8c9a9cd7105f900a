// A release that fails because Redis is unreachable, on a Redis that keeps
// its data (so the lock is still there when it comes back).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/lock_client.h"
#include "support/redis_server.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;

// Found by the chaos suite (tests/chaos/redis_fault_chaos_test.cc): the
// stale hold of a failed release stayed in the lock, and every reentrant
// re-grant to the same owner extended it, so an owner that kept coming back
// kept the lock from every other client for ever.
TEST(ReleaseFailure, AReGrantToTheSameOwnerGivesTheStaleHoldBack) {
  RedisServer server({.durable = true});
  auto redis = std::make_shared<RedisClient>(RedisOptions{.url = server.url()});
  LockClient locks(redis, {.default_lease = milliseconds(30000)});
  AcquireResult first = locks.TryAcquire("orphan");
  ASSERT_TRUE(first);
  const int64_t fence = first.lease.fence();

  server.Stop();
  EXPECT_THROW(first.lease.Release(), Error);  // Redis down: the hold stays
  server.Start();                              // with its data
  ASSERT_TRUE(locks.Inspect("orphan").locked);

  // Same thread, same owner, but the client holds none of the lock: the
  // stale grant is replaced by a new one, with a new token (scripts.h,
  // "fresh"; it used to be re-entered, its orphaned hold given back).
  AcquireResult again = locks.TryAcquire("orphan");
  ASSERT_TRUE(again);
  EXPECT_GT(again.lease.fence(), fence);
  EXPECT_EQ(locks.Inspect("orphan").hold_count, 1);
  // Releasing it frees the lock: the stale hold does not keep it.
  EXPECT_EQ(again.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(locks.Inspect("orphan").locked);
  LockClient other(
      std::make_shared<RedisClient>(RedisOptions{.url = server.url()}));
  AcquireResult next = other.TryAcquire("orphan");
  ASSERT_TRUE(next);
  EXPECT_GT(next.lease.fence(), fence);
}

// The same for an acquire whose reply was lost: Redis was frozen, both tries
// timed out, and so did the give-back of the call's hold; Redis ran all of
// them when it woke, in an order the client cannot know. If the give-back
// ran last, the lock is free at once; if it ran first (a no-op), the late
// acquire left a grant nobody knew of — the next grant of the same owner
// gives it back. Either way one release of that grant frees the lock.
TEST(ReleaseFailure, AReGrantGivesBackTheHoldOfAnAcquireThatTimedOut) {
  RedisServer server;
  auto redis = std::make_shared<RedisClient>(
      RedisOptions{.url = server.url(), .command_timeout = milliseconds(200)});
  LockClient locks(redis, {.default_lease = milliseconds(30000)});
  ASSERT_TRUE(locks.TryAcquire("warm"));  // script loaded: EVALSHA is sent
  server.Pause();
  try {
    locks.TryAcquire("lost-reply");
    ADD_FAILURE() << "a frozen Redis must time out";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kRedisTimeout);
  }
  server.Resume();
  LockClient observer(
      std::make_shared<RedisClient>(RedisOptions{.url = server.url()}));
  // What the frozen server had queued runs in its first turns after the
  // wake; a few round trips later it has.
  for (int i = 0; i < 8; ++i) redis->Execute({"PING"});
  const LockInfo woke = observer.Inspect("lost-reply");
  std::printf("after the wake: %s\n",
              woke.locked ? "held by the late try" : "given back");

  AcquireResult again = locks.TryAcquire("lost-reply");
  ASSERT_TRUE(again);
  EXPECT_EQ(again.lease.Release(), ReleaseStatus::kReleased);
  EXPECT_FALSE(observer.Inspect("lost-reply").locked);
}

}  // namespace
}  // namespace lockfleet::testing
