// The resource-side fencing check.
#include "lockfleet/lockcore/fenced_resource.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lock_fixture.h"
#include "lockfleet/lockcore/error.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using namespace std::string_literals;

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
  EXPECT_EQ(res.HighestFence(), first_fence);  // untouched by "res:ledger"
  Lease second = client->Acquire("ledger");
  EXPECT_GT(second.fence(), first_fence);
  EXPECT_TRUE(res.Write(second, {{"SET", res.Key("v"), "2"}}).accepted);
  EXPECT_EQ(res.HighestFence(), second.fence());
  second.Release();
  for (const char* suffix : {"lock", "fence", "queue", "waiters"}) {
    EXPECT_NE(FencedResource::KeyOf("lockfleet", "ledger", {suffix}),
              "lockfleet:{res:ledger}:" + std::string(suffix));
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
  ASSERT_TRUE(
      res.Write(fast.lease, {{"SET", res.Key("paid_by"), "b"}}).accepted);
  // a wakes up and tries to write with its old grant.
  FenceResult late = res.Write(slow.lease, {{"SET", res.Key("paid_by"), "a"}});
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

// A full Redis (maxmemory, noeviction) refuses a fenced write as a whole
// before it runs: never the commands that free memory (DEL) applied and the
// rest refused half-way. Scripts without the "#!lua" declaration were
// checked command by command, and did exactly that.
TEST_F(Fenced, AFullRedisRefusesTheWholeWrite) {
  FencedResource res(redis_, "full");
  ASSERT_TRUE(res.Write(1, {{"SET", res.Key("old"), "1"}}).accepted);
  redis_->Execute({"CONFIG", "SET", "maxmemory-policy", "noeviction"});
  redis_->Execute({"CONFIG", "SET", "maxmemory", "1"});  // full at once
  auto try_write = [&](auto&& write) {
    try {
      write();
      ADD_FAILURE() << "a full Redis ran the write";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("OOM"), std::string::npos)
          << e.what();
    }
  };
  try_write([&] {
    res.Write(2, {{"DEL", res.Key("old")}, {"SET", res.Key("new"), "1"}});
  });
  try_write([&] {
    res.Eval(2,
             "redis.call('DEL', KEYS[1]) return redis.call('SET', KEYS[2], "
             "'1')",
             {res.Key("old"), res.Key("new")}, {});
  });
  redis_->Execute({"CONFIG", "SET", "maxmemory", "0"});
  EXPECT_EQ(redis_->Execute({"GET", res.Key("old")}).str, "1");
  EXPECT_TRUE(redis_->Execute({"GET", res.Key("new")}).is_nil());
  EXPECT_EQ(res.HighestFence(), 1);
}

// --- grants (issue 13, item 3) ----------------------------------------------
// These tests craft grants directly: a Redis rollback (failover to a lagging
// replica, a restart without persistence) can hand the same token to two
// holders, and no test should depend on how tokens are issued.

// After a rollback two grants both carried token 6 and both holders' writes
// landed. Only the grant that reached the resource first may write with 6.
TEST_F(Fenced, AnEqualTokenFromAnotherGrantIsRefused) {
  FencedResource res(redis_, "ledger");
  const FenceGrant before{.fence = 6, .owner = "client-a:1"};
  const FenceGrant after{.fence = 6, .owner = "client-b:1"};
  ASSERT_TRUE(res.Write(before, {{"SET", res.Key("v"), "a"}}).accepted);

  FenceResult w = res.Write(after, {{"SET", res.Key("v"), "b"}});
  EXPECT_FALSE(w.accepted);
  EXPECT_EQ(w.highest_fence, 6);  // == its own token: another grant has it
  FenceResult e = res.Eval(after, "redis.call('SET', KEYS[1], 'b') return 1",
                           {res.Key("v")}, {});
  EXPECT_FALSE(e.accepted);
  EXPECT_FALSE(res.Claim(after).accepted);
  EXPECT_EQ(redis_->Execute({"GET", res.Key("v")}).str, "a");
  EXPECT_EQ(res.HighestGrant(), before);

  // The first grant keeps writing; a higher token takes over as usual.
  EXPECT_TRUE(res.Write(before, {{"APPEND", res.Key("v"), "!"}}).accepted);
  const FenceGrant next{.fence = 7, .owner = "client-b:1"};
  EXPECT_TRUE(res.Write(next, {{"SET", res.Key("v"), "b"}}).accepted);
  EXPECT_FALSE(res.Write(before, {{"SET", res.Key("v"), "late"}}).accepted);
  EXPECT_EQ(redis_->Execute({"GET", res.Key("v")}).str, "b");
  EXPECT_EQ(res.HighestGrant(), next);
}

// A real lease: every hold of one grant (reentrant ones too) may write as
// often as it likes; the same token with any other owner may not.
TEST_F(Fenced, OneGrantWritesManyTimesInItsCriticalSection) {
  auto client = NewClient();
  FencedResource res(redis_, "ledger");
  Lease lease = client->Acquire("ledger");
  ASSERT_TRUE(res.Claim(lease).accepted);
  for (int i = 0; i < 5; ++i) {
    FenceResult w = res.Write(lease, {{"INCR", res.Key("n")}});
    ASSERT_TRUE(w.accepted) << i;
    EXPECT_EQ(w.highest_fence, lease.fence());
  }
  EXPECT_EQ(
      res.Eval(lease, "return redis.call('INCR', KEYS[1])", {res.Key("n")}, {})
          .reply.integer,
      6);
  Lease again = client->Acquire("ledger");  // reentrant: the same grant
  ASSERT_EQ(again.fence(), lease.fence());
  EXPECT_TRUE(res.Write(again, {{"INCR", res.Key("n")}}).accepted);
  EXPECT_TRUE(res.Claim(lease).accepted);  // claiming again is harmless

  const FenceGrant twin{.fence = lease.fence(), .owner = "someone-else"};
  EXPECT_FALSE(res.Write(twin, {{"SET", res.Key("n"), "0"}}).accepted);
  EXPECT_FALSE(res.Write(lease.fence(), {{"SET", res.Key("n"), "0"}})
                   .accepted);  // anonymous is another grant too
  EXPECT_EQ(redis_->Execute({"GET", res.Key("n")}).str, "7");
  EXPECT_EQ(res.HighestGrant(), FenceGrant::Of(lease));
  EXPECT_EQ(redis_->Execute({"GET", res.FenceKey()}).str,
            std::to_string(lease.fence()) + ":" + lease.owner());
}

// A holder paused past its lease writes late. Without a claim, its write
// would land as long as the new holder has not written yet.
TEST_F(Fenced, ClaimShutsOutAStaleHolderBeforeTheNewHolderWrites) {
  auto a = NewClient();
  auto b = NewClient();
  FencedResource res(redis_, "order:8");
  AcquireResult slow = a->TryAcquire("order:8", {.lease = milliseconds(60000)});
  ASSERT_TRUE(slow);
  ASSERT_TRUE(res.Write(slow.lease, {{"SET", res.Key("v"), "a1"}}).accepted);
  redis_->Execute({"PEXPIRE", LockKey("order:8"), "1"});  // a "pauses"
  ASSERT_TRUE(WaitUntil([&] { return !b->Inspect("order:8").locked; }));
  AcquireResult fast = b->TryAcquire("order:8");
  ASSERT_TRUE(fast);

  FenceResult claim = res.Claim(fast.lease);
  ASSERT_TRUE(claim.accepted);
  EXPECT_EQ(claim.highest_fence, fast.lease.fence());
  EXPECT_EQ(res.HighestGrant(), FenceGrant::Of(fast.lease));

  // b has written nothing yet; a's delayed write arrives.
  FenceResult late = res.Write(slow.lease, {{"SET", res.Key("v"), "a2"}});
  EXPECT_FALSE(late.accepted);
  EXPECT_EQ(late.highest_fence, fast.lease.fence());
  EXPECT_FALSE(res.Claim(slow.lease).accepted);
  // Nor does another grant with b's token get in.
  const FenceGrant twin{.fence = fast.lease.fence(), .owner = "intruder"};
  EXPECT_FALSE(res.Write(twin, {{"SET", res.Key("v"), "x"}}).accepted);
  EXPECT_EQ(redis_->Execute({"GET", res.Key("v")}).str, "a1");
  // b goes on.
  EXPECT_TRUE(res.Write(fast.lease, {{"SET", res.Key("v"), "b"}}).accepted);
  EXPECT_EQ(redis_->Execute({"GET", res.Key("v")}).str, "b");
}

// After a rollback the new holder learns at its claim, before it does any
// work, that its token was used by another grant.
TEST_F(Fenced, ClaimAfterARollbackReportsARepeatedToken) {
  FencedResource res(redis_, "ledger");
  const FenceGrant old_holder{.fence = 9, .owner = "a:1"};
  ASSERT_TRUE(res.Write(old_holder, {{"SET", res.Key("v"), "a"}}).accepted);
  const FenceResult repeated = res.Claim({.fence = 9, .owner = "b:1"});
  EXPECT_FALSE(repeated.accepted);
  EXPECT_EQ(repeated.highest_fence, 9);
  const FenceResult behind = res.Claim({.fence = 6, .owner = "b:1"});
  EXPECT_FALSE(behind.accepted);
  EXPECT_EQ(behind.highest_fence, 9);
  EXPECT_TRUE(res.Claim({.fence = 10, .owner = "b:1"}).accepted);
  EXPECT_FALSE(res.Write(old_holder, {{"SET", res.Key("v"), "x"}}).accepted);
  EXPECT_EQ(redis_->Execute({"GET", res.Key("v")}).str, "a");
}

// Fence keys written before grants were stored hold a plain token: it reads
// as that token of an unknown (anonymous) grant.
TEST_F(Fenced, AFenceKeyOfTheOldFormatIsReadAsAnAnonymousGrant) {
  FencedResource res(redis_, "legacy");
  redis_->Execute({"SET", res.FenceKey(), "7"});
  EXPECT_EQ(res.HighestFence(), 7);
  EXPECT_EQ(res.HighestGrant(), FenceGrant{.fence = 7});
  // A named grant cannot prove it wrote 7: refused.
  EXPECT_FALSE(
      res.Write({.fence = 7, .owner = "x:1"}, {{"SET", res.Key("v"), "x"}})
          .accepted);
  EXPECT_FALSE(res.Claim({.fence = 7, .owner = "x:1"}).accepted);
  // Bare tokens behave as they did before grants existed.
  EXPECT_FALSE(res.Write(6, {{"SET", res.Key("v"), "six"}}).accepted);
  EXPECT_TRUE(res.Write(7, {{"SET", res.Key("v"), "seven"}}).accepted);
  EXPECT_EQ(redis_->Execute({"GET", res.FenceKey()}).str, "7");
  // A higher named grant takes over and is stored with its owner.
  const FenceGrant named{.fence = 8, .owner = "x:1:\0\xff"s};
  EXPECT_TRUE(res.Write(named, {{"SET", res.Key("v"), "eight"}}).accepted);
  EXPECT_EQ(redis_->Execute({"GET", res.FenceKey()}).str, "8:x:1:\0\xff"s);
  EXPECT_EQ(res.HighestGrant(), named);
  EXPECT_TRUE(res.Write(named, {{"APPEND", res.Key("v"), "!"}}).accepted);
  EXPECT_FALSE(res.Write(8, {{"SET", res.Key("v"), "bare"}}).accepted);
  EXPECT_TRUE(res.Write(9, {{"SET", res.Key("v"), "nine"}}).accepted);
  EXPECT_EQ(redis_->Execute({"GET", res.FenceKey()}).str, "9");
  EXPECT_EQ(redis_->Execute({"GET", res.Key("v")}).str, "nine");
  // A fence key that holds no token is an error, not a silent zero.
  redis_->Execute({"SET", res.FenceKey(), "junk"});
  try {
    res.Claim({.fence = 10, .owner = "x:1"});
    FAIL() << "expected a script error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kRedisScript);
  }
  EXPECT_THROW(res.HighestFence(), Error);
}

TEST_F(Fenced, GrantsAreCheckedBeforeRedisIsTouched) {
  FencedResource res(redis_, "args");
  for (int64_t bad : {int64_t{0}, int64_t{-1}, FencedResource::kMaxFence + 1}) {
    try {
      res.Claim({.fence = bad, .owner = "o"});
      FAIL() << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << bad;
    }
  }
  EXPECT_TRUE(
      res.Claim({.fence = FencedResource::kMaxFence, .owner = "o"}).accepted);
  EXPECT_EQ(res.HighestFence(), FencedResource::kMaxFence);
  Lease none;
  EXPECT_THROW(res.Claim(none), Error);
  EXPECT_THROW(res.Write(none, {}), Error);
  EXPECT_EQ(redis_->Execute({"EXISTS", res.Key("anything")}).integer, 0);
}

// --- keys (issue 13, item 5) ------------------------------------------------

// Names and ids with '{', '}', ':', '%', empty parts and binary bytes: each
// resource writes its own keys and its own fence, and nothing lands on
// another resource's key (before, resource "A"'s key "x}:fence" was the
// fence key of resource "A}:x", and a job id "1}:stock" under lock "A" was
// the stock of product "A}:job:1").
TEST_F(Fenced, InjectedNamesAndIdsCannotTouchAnotherResourcesKeys) {
  const std::vector<std::string> names = {
      "A",   "A}:x", "A}",  "{A",       "A%7D:x",   "A:x",
      "A}:", "%",    "A{}", "A}:job:1", "A}:job:x", "\0A\xff}"s};
  const std::vector<std::string> ids = {
      "1}:stock", "x}:fence", "}:fence",  "",      ":", "%7D",
      "y",        "\0"s,      "x}:job:y", "{A}:x", "%", "fence"};
  std::vector<std::unique_ptr<FencedResource>> resources;
  size_t writes = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    resources.push_back(std::make_unique<FencedResource>(redis_, names[i]));
    FencedResource& res = *resources.back();
    std::vector<Command> commands{
        {"SET", res.Key({"stock"}), names[i] + "/stock"},
        // Literal paths with braces: split on ':', the braces encoded.
        {"SET", res.Key("x}:fence"), names[i] + "/x}:fence"},
        {"SET", res.Key("1}:stock"), names[i] + "/1}:stock"}};
    for (const std::string& id : ids) {
      commands.push_back(
          {"SET", res.Key({"job", id}), names[i] + "/job/" + id});
      if (id == "fence") {  // the one key a part cannot name: refused
        EXPECT_THROW(res.Key({id}), Error);
        continue;
      }
      commands.push_back({"SET", res.Key({id}), names[i] + "/" + id + "/"});
    }
    writes += commands.size();
    const FenceGrant grant{.fence = static_cast<int64_t>(100 + i),
                           .owner = "owner-" + std::to_string(i)};
    ASSERT_TRUE(res.Write(grant, commands).accepted) << i;
  }
  // Every write made a key of its own, and every fence key is its own.
  EXPECT_EQ(redis_->Execute({"DBSIZE"}).integer,
            static_cast<long long>(writes + names.size()));
  for (size_t i = 0; i < names.size(); ++i) {
    FencedResource& res = *resources[i];
    SCOPED_TRACE("resource " + std::to_string(i));
    EXPECT_EQ(res.HighestGrant(),
              (FenceGrant{.fence = static_cast<int64_t>(100 + i),
                          .owner = "owner-" + std::to_string(i)}));
    EXPECT_EQ(redis_->Execute({"GET", res.Key({"stock"})}).str,
              names[i] + "/stock");
    EXPECT_EQ(redis_->Execute({"GET", res.Key("x}:fence")}).str,
              names[i] + "/x}:fence");
    for (const std::string& id : ids) {
      EXPECT_EQ(redis_->Execute({"GET", res.Key({"job", id})}).str,
                names[i] + "/job/" + id);
    }
  }
  // Every key of the server decodes to the resource that wrote it.
  const Reply keys = redis_->Execute({"KEYS", "*"});
  for (const Reply& key : keys.elements) {
    const std::optional<ResourceKey> parsed = FencedResource::ParseKey(key.str);
    ASSERT_TRUE(parsed.has_value()) << key.str;
    EXPECT_EQ(parsed->prefix, "lockfleet");
    EXPECT_NE(std::find(names.begin(), names.end(), parsed->name), names.end());
  }
}

}  // namespace
}  // namespace lockfleet::testing
