// The resource-side fencing check.
#include "lockfleet/lockcore/fenced_resource.h"

#include <gtest/gtest.h>

#include "lock_fixture.h"
#include "lockfleet/lockcore/error.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;

class Fenced : public LockTest {};

TEST_F(Fenced, RejectsTokensOlderThanTheHighestSeen) {
  FencedResource res(redis_, "ledger");
  EXPECT_EQ(res.HighestFence(), 0);
  FenceResult w5 = res.Write(5, {{"SET", res.Key("v"), "five"}});
  EXPECT_TRUE(w5.accepted);
  EXPECT_EQ(w5.highest_fence, 5);
  FenceResult w4 = res.Write(4, {{"SET", res.Key("v"), "four"}});
  EXPECT_FALSE(w4.accepted);
  EXPECT_EQ(w4.highest_fence, 5);
  EXPECT_EQ(redis_->Execute({"GET", res.Key("v")}).str, "five");
  EXPECT_TRUE(res.Write(5, {{"APPEND", res.Key("v"), "!"}})
                  .accepted);  // same holder again
  EXPECT_TRUE(res.Write(9, {{"SET", res.Key("v"), "nine"}}).accepted);
  EXPECT_EQ(res.HighestFence(), 9);
  EXPECT_FALSE(res.Write(5, {{"SET", res.Key("v"), "late"}}).accepted);
  EXPECT_EQ(redis_->Execute({"GET", res.Key("v")}).str, "nine");
}

// A lock whose name starts with "res:" once shared its fencing counter with
// the resource of the rest of its name: its grants raised the resource's
// highest token, and the real holders of "ledger" were refused as stale.
TEST_F(Fenced, ALockNamedResColonXDoesNotTouchResourceX) {
  auto client = NewClient();
  FencedResource res(redis_, "ledger");
  Lease first = client->Acquire("ledger");
  const int64_t first_fence = first.fence();
  EXPECT_TRUE(res.Write(first_fence, {{"SET", res.Key("v"), "1"}}).accepted);
  first.Release();
  for (int i = 0; i < 5; ++i) client->Acquire("res:ledger").Release();
  Lease second = client->Acquire("ledger");
  EXPECT_EQ(second.fence(), first_fence + 1);
  EXPECT_TRUE(res.Write(second.fence(), {{"SET", res.Key("v"), "2"}}).accepted);
  EXPECT_EQ(res.HighestFence(), second.fence());
  second.Release();
  for (const char* suffix : {"lock", "fence", "queue", "waiters"}) {
    EXPECT_NE(res.Key(suffix), "lockfleet:{res:ledger}:" + std::string(suffix));
  }
  EXPECT_EQ(res.Key("v"), "lockfleet:res:{ledger}:v");
}

TEST_F(Fenced, WriteAppliesAllCommandsAndReturnsTheirReplies) {
  FencedResource res(redis_, "multi");
  FenceResult r = res.Write(1, {{"SET", res.Key("a"), "1"},
                                {"INCRBY", res.Key("a"), "41"},
                                {"GET", res.Key("missing")}});
  ASSERT_TRUE(r.accepted);
  ASSERT_EQ(r.reply.type, Reply::Type::kArray);
  ASSERT_EQ(r.reply.elements.size(), 3u);
  EXPECT_EQ(r.reply.elements[1].integer, 42);
  EXPECT_TRUE(r.reply.elements[2].is_nil());
}

// A holder paused past its lease must not overwrite the newer holder's write.
TEST_F(Fenced, PausedHolderIsRejectedAfterANewerHolderWrote) {
  auto a = NewClient();
  auto b = NewClient();
  FencedResource res(redis_, "order:7");
  AcquireResult slow = a->TryAcquire("order:7", {.lease = milliseconds(60000)});
  ASSERT_TRUE(slow);
  // a "pauses": its lease runs out while it is stopped.
  redis_->Execute({"PEXPIRE", LockKey("order:7"), "1"});
  ASSERT_TRUE(WaitUntil([&] { return !b->Inspect("order:7").locked; }));
  AcquireResult fast = b->TryAcquire("order:7");
  ASSERT_TRUE(fast);
  ASSERT_TRUE(res.Write(fast.lease.fence(), {{"SET", res.Key("paid_by"), "b"}})
                  .accepted);
  // a wakes up and tries to write with its old token.
  FenceResult late =
      res.Write(slow.lease.fence(), {{"SET", res.Key("paid_by"), "a"}});
  EXPECT_FALSE(late.accepted);
  EXPECT_EQ(late.highest_fence, fast.lease.fence());
  EXPECT_EQ(redis_->Execute({"GET", res.Key("paid_by")}).str, "b");
}

TEST_F(Fenced, EvalRunsACheckAndSetBodyWithItsOwnKeysAndArgs) {
  FencedResource res(redis_, "sku:1");
  redis_->Execute({"SET", res.Key("stock"), "2"});
  constexpr const char* kBuy = R"lua(
    local stock = tonumber(redis.call('GET', KEYS[1]) or '0')
    if stock <= 0 then return 0 end
    redis.call('DECR', KEYS[1])
    redis.call('RPUSH', KEYS[2], ARGV[1])
    return 1
  )lua";
  std::vector<std::string> keys{res.Key("stock"), res.Key("buyers")};
  EXPECT_EQ(res.Eval(3, kBuy, keys, {"ann"}).reply.integer, 1);
  EXPECT_EQ(res.Eval(3, kBuy, keys, {"bob"}).reply.integer, 1);
  EXPECT_EQ(res.Eval(4, kBuy, keys, {"cy"}).reply.integer, 0);  // sold out
  FenceResult stale = res.Eval(2, kBuy, keys, {"old"});
  EXPECT_FALSE(stale.accepted);
  EXPECT_EQ(redis_->Execute({"GET", res.Key("stock")}).str, "0");
  EXPECT_EQ(redis_->Execute({"LLEN", res.Key("buyers")}).integer, 2);
}

TEST_F(Fenced, BodyErrorThrowsAndDoesNotAdvanceTheFence) {
  FencedResource res(redis_, "err");
  ASSERT_TRUE(res.Write(1, {{"SET", res.Key("x"), "1"}}).accepted);
  try {
    res.Eval(7, "return redis.call('NOSUCHCOMMAND')", {}, {});
    FAIL() << "expected a script error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kRedisScript);
  }
  EXPECT_EQ(res.HighestFence(), 1);
  EXPECT_THROW(res.Write(0, {}), Error);  // tokens are positive
}

}  // namespace
}  // namespace lockfleet::testing
