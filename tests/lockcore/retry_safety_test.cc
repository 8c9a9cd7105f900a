// Retry safety: a script the lock client runs a second time after a
// connection failure (EvalRetryOnce) must be idempotent. hiredis cannot tell
// whether a command whose connection broke reached the server, so the
// retry may run on top of a first try that did everything and only lost its
// reply — by then the lock may already be someone else's.
//
// Each test puts a ReplyDropProxy between the client under test and Redis,
// makes that client's first try run with its reply lost, and checks that the
// state in Redis is what one run would have left. How to write one:
//   - build the client under test with NewProxiedClient(); everything else
//     (other holders, waiters, inspection) talks to Redis directly;
//   - arm proxy_->DropNextReply(marker) right before the call, with a marker
//     only that call sends: its lock name or owner token. The watchdog's
//     renewals carry both, so give the proxied client explicit leases (or a
//     name nothing else of it touches);
//   - after the call: proxy_->dropped() == 1 (the first try did lose its
//     reply), then check Redis through redis_ or a direct client.
// StallNextReply(marker, hold) makes the first try time out instead
// (kCommandTimeout) while still running on the server.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>

#include "lock_fixture.h"
#include "lockfleet/lockcore/lock_client.h"
#include "scripts.h"
#include "support/loopback_bus.h"
#include "support/reply_drop_proxy.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class RetrySafety : public LockTest {
 protected:
  // The proxied client's command timeout: a stalled reply becomes a client
  // timeout (and a retry) after this long.
  static constexpr milliseconds kCommandTimeout{1000};

  void SetUp() override {
    LockTest::SetUp();
    proxy_ = std::make_unique<ReplyDropProxy>(server_->url());
  }
  void TearDown() override { proxy_.reset(); }

  std::shared_ptr<RedisClient> NewProxiedRedis() {
    RedisOptions o;
    o.url = proxy_->url();
    o.command_timeout = kCommandTimeout;
    return std::make_shared<RedisClient>(o);
  }
  // A LockClient whose every Redis command goes through proxy_.
  std::unique_ptr<LockClient> NewProxiedClient(LockClientOptions o = {}) {
    return std::make_unique<LockClient>(NewProxiedRedis(), std::move(o));
  }

  std::unique_ptr<ReplyDropProxy> proxy_;
};

// The release's first try frees the lock and, in the same script, hands it
// to the queued waiter B; its reply is lost. The retry, on a fresh
// connection, finds B's grant and must leave it alone; A's hold was given
// back, so A is told kReleased.
TEST_F(RetrySafety, ReleaseWhoseReplyWasLostLeavesTheHandOffAlone) {
  LoopbackBus bus;  // A's unlock event wakes B at once
  auto bus_ptr =
      std::shared_ptr<UnlockPublisher>(&bus, [](UnlockPublisher*) {});
  auto a = NewProxiedClient({.publisher = bus_ptr});
  auto b = NewClient();
  auto inspector = NewClient();
  bus.Subscribe(b.get());
  struct Unsubscribe {
    LoopbackBus& bus;
    LockClient* client;
    ~Unsubscribe() { bus.Unsubscribe(client); }
  } unsubscribe{bus, b.get()};

  AcquireResult held =
      a->TryAcquire("handoff", {.lease = seconds(60), .owner = "retry:a"});
  ASSERT_TRUE(held);
  const int64_t a_fence = held.lease.fence();
  auto waiter = std::async(std::launch::async, [&] {
    return b->AcquireFor("handoff", seconds(60), {.owner = "retry:b"});
  });
  ASSERT_TRUE(WaitUntil(
      [&] { return inspector->Inspect("handoff").queue.size() == 1; }));

  const int connections = proxy_->accepted();
  proxy_->DropNextReply("retry:a");
  const ReleaseStatus released = held.lease.Release();
  EXPECT_EQ(released, ReleaseStatus::kReleased) << ReleaseStatusName(released);
  EXPECT_EQ(proxy_->dropped(), 1);  // the first try lost its reply ...
  EXPECT_GT(proxy_->accepted(), connections);  // ... the retry reconnected

  LockInfo info = inspector->Inspect("handoff");
  EXPECT_EQ(info.owner, "retry:b");  // handed off (or claimed already)
  EXPECT_GT(info.fence, a_fence);
  AcquireResult got = waiter.get();
  ASSERT_TRUE(got);
  EXPECT_EQ(got.lease.fence(), info.fence);
  EXPECT_EQ(a->stats().releases, 1u);
  EXPECT_EQ(a->stats().release_failures, 0u);
  EXPECT_EQ(got.lease.Release(), ReleaseStatus::kReleased);
}

// A waiting call whose acquire tries were granted on the server but lost
// their replies, and that then gives up, gives those holds back: the lock
// is free at once, not blocked for a whole lease by holds nobody renews.
TEST_F(RetrySafety, GiveUpAfterLostAcquireRepliesFreesTheLock) {
  auto waiter = NewProxiedClient();
  auto other = NewClient();
  ASSERT_FALSE(waiter->Inspect("lost").locked);  // it has reached Redis
  // Every fair acquire the waiter sends (its EVALSHA names the script's
  // SHA1; nothing else it sends does) runs, and its reply is lost.
  const std::string sha =
      redis_
          ->Execute({"SCRIPT", "LOAD", internal::AcquireFairScript().source()})
          .str;
  for (int i = 0; i < 64; ++i) proxy_->DropNextReply(sha);
  AcquireResult r = waiter->AcquireFor("lost", milliseconds(500));
  EXPECT_EQ(r.status, AcquireStatus::kTimedOut);
  EXPECT_FALSE(r.last_error.empty());
  EXPECT_GE(proxy_->dropped(), 2) << "no try ran with its reply lost";
  LockInfo info = other->Inspect("lost");
  EXPECT_FALSE(info.locked)
      << "held by " << info.owner << " for " << info.ttl.count() << " ms";
  EXPECT_TRUE(other->TryAcquire("lost"));
}

// The first try of an acquire runs (granting a hold) but its reply is
// held back; before the retry, Redis fills up, so the retry is refused
// (OOM: kRedisBusy), not lost. That error says nothing about the first try,
// so the client must still count its hold as possibly granted and give it
// back. Else the lock keeps a hold nobody releases: it stays blocked for
// the lease, and every later acquire of that owner re-enters it, so its
// releases never free the lock (the chaos suite saw 4,976 such re-grants
// after a durable Redis restart answered LOADING to the retries).
TEST_F(RetrySafety, AcquireWhoseRetryIsRefusedStillGivesBackTheFirstTry) {
  auto a = NewProxiedClient();
  auto inspector = NewClient();
  ASSERT_FALSE(a->Inspect("refused").locked);  // it has reached Redis
  for (bool wait : {false, true}) {
    SCOPED_TRACE(wait ? "AcquireFor" : "TryAcquire");
    proxy_->StallNextReply("refused:a", seconds(3));
    auto first = std::async(std::launch::async, [&] {
      const AcquireOptions o{.lease = seconds(60), .owner = "refused:a"};
      // A waiting call rides out the refusals until its deadline.
      return wait ? a->AcquireFor("refused", seconds(2), o)
                  : a->TryAcquire("refused", o);
    });
    // The first try ran: the lock is A's. Fill Redis before the reply is
    // cut (at A's 1 s command timeout).
    ASSERT_TRUE(
        WaitUntil([&] { return inspector->Inspect("refused").locked; }));
    redis_->Execute({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
    redis_->Execute({"CONFIG", "SET", "maxmemory", "1"});
    if (wait) {
      AcquireResult r = first.get();
      EXPECT_EQ(r.status, AcquireStatus::kTimedOut);
      EXPECT_NE(r.last_error.find("OOM"), std::string::npos) << r.last_error;
    } else {
      try {
        first.get();
        ADD_FAILURE() << "the retry was not refused";
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kRedisBusy) << e.what();
      }
    }
    redis_->Execute({"CONFIG", "SET", "maxmemory", "0"});
    LockInfo info = inspector->Inspect("refused");
    EXPECT_FALSE(info.locked)
        << "the lost hold was not given back: held by " << info.owner << " ("
        << info.hold_count << " holds)";
    // Re-granted to the same owner, one release frees it.
    AcquireResult again =
        a->TryAcquire("refused", {.lease = seconds(60), .owner = "refused:a"});
    ASSERT_TRUE(again);
    EXPECT_EQ(again.lease.Release(), ReleaseStatus::kReleased);
    EXPECT_FALSE(inspector->Inspect("refused").locked);
  }
  EXPECT_EQ(proxy_->dropped(), 2);
}

}  // namespace
}  // namespace lockfleet::testing
