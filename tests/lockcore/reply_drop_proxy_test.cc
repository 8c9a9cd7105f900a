// The test-support ReplyDropProxy itself: it forwards faithfully, and an
// armed rule makes exactly the marked command run on Redis with its reply
// lost, once.
#include "support/reply_drop_proxy.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <iterator>
#include <memory>
#include <string>

#include "lock_fixture.h"
#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/redis_client.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Steady = std::chrono::steady_clock;

// LockTest's server_ and redis_ (the client around the proxy).
class ReplyDropProxyTest : public LockTest {
 protected:
  static std::unique_ptr<RedisClient> Through(
      const ReplyDropProxy& proxy,
      milliseconds command_timeout = milliseconds(2000)) {
    return std::make_unique<RedisClient>(
        RedisOptions{.url = proxy.url(),
                     .pool_size = 1,
                     .command_timeout = command_timeout});
  }
  // The code of the Error `command` throws; kInternal if it throws none.
  static ErrorCode CodeOf(RedisClient& client, const Command& command) {
    try {
      client.Execute(command);
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::kInternal;
  }
};

TEST_F(ReplyDropProxyTest, ForwardsBothWays) {
  ReplyDropProxy proxy(server_->url());
  EXPECT_EQ(proxy.url(), "redis://127.0.0.1:" + std::to_string(proxy.port()));
  auto client = Through(proxy);
  EXPECT_EQ(client->Execute({"PING"}).str, "PONG");
  // Larger than any socket buffer, both ways.
  const std::string big(4 << 20, 'b');
  EXPECT_EQ(client->Execute({"SET", "big", big}).str, "OK");
  EXPECT_EQ(client->Execute({"GET", "big"}).str, big);
  std::vector<Command> pipeline(1000, Command{"INCR", "n"});
  std::vector<Reply> replies = client->Pipeline(pipeline);
  ASSERT_EQ(replies.size(), 1000u);
  EXPECT_EQ(replies.back().integer, 1000);
  EXPECT_EQ(redis_->Execute({"GET", "n"}).str, "1000");
  EXPECT_EQ(proxy.accepted(), 1);
  EXPECT_EQ(proxy.dropped(), 0);
}

TEST_F(ReplyDropProxyTest, ForwardsToATcpTarget) {
  RedisServer tcp({.tcp = true});
  ReplyDropProxy by_url(tcp.url());
  ReplyDropProxy by_address("127.0.0.1:" + std::to_string(tcp.port()));
  EXPECT_EQ(Through(by_url)->Execute({"SET", "k", "v"}).str, "OK");
  EXPECT_EQ(Through(by_address)->Execute({"GET", "k"}).str, "v");
}

TEST_F(ReplyDropProxyTest, DroppedReplyRanOnTheServerAndTheNextCommandPasses) {
  ReplyDropProxy proxy(server_->url());
  auto client = Through(proxy);
  ASSERT_EQ(client->Execute({"INCR", "other"}).integer, 1);  // unmarked
  proxy.DropNextReply("drop:counter");
  EXPECT_EQ(proxy.armed(), 1);
  EXPECT_EQ(CodeOf(*client, {"INCR", "drop:counter"}),
            ErrorCode::kRedisUnavailable);
  EXPECT_EQ(redis_->Execute({"GET", "drop:counter"}).str, "1");  // it ran
  EXPECT_EQ(proxy.dropped(), 1);
  EXPECT_EQ(proxy.armed(), 0);
  // A rule is used once: the same command on a fresh connection passes.
  EXPECT_EQ(client->Execute({"INCR", "drop:counter"}).integer, 2);
  EXPECT_EQ(proxy.accepted(), 2);
  EXPECT_EQ(proxy.dropped(), 1);
}

TEST_F(ReplyDropProxyTest, RulesMatchInOrderOnlyCommandsCarryingTheirMarker) {
  ReplyDropProxy proxy(server_->url());
  auto client = Through(proxy);
  proxy.DropNextReply("second");
  proxy.DropNextReply("first");
  EXPECT_EQ(client->Execute({"INCR", "neither"}).integer, 1);
  EXPECT_EQ(CodeOf(*client, {"INCR", "first"}), ErrorCode::kRedisUnavailable);
  EXPECT_EQ(proxy.armed(), 1);
  EXPECT_EQ(CodeOf(*client, {"INCR", "second"}), ErrorCode::kRedisUnavailable);
  EXPECT_EQ(proxy.dropped(), 2);
  EXPECT_EQ(redis_->Execute({"GET", "first"}).str, "1");
  EXPECT_EQ(redis_->Execute({"GET", "second"}).str, "1");
}

// Held past the client's command timeout: the client times out, and the
// proxy drops the connection as soon as the client has left.
TEST_F(ReplyDropProxyTest, StalledReplyTimesTheClientOut) {
  ReplyDropProxy proxy(server_->url());
  auto client = Through(proxy, milliseconds(300));
  ASSERT_EQ(client->Execute({"PING"}).str, "PONG");
  proxy.StallNextReply("stall:counter", seconds(60));
  auto start = Steady::now();
  EXPECT_EQ(CodeOf(*client, {"INCR", "stall:counter"}),
            ErrorCode::kRedisTimeout);
  EXPECT_EQ(redis_->Execute({"GET", "stall:counter"}).str, "1");
  EXPECT_EQ(client->Execute({"INCR", "stall:counter"}).integer, 2);
  EXPECT_LT(Steady::now() - start, seconds(30));  // not the 60 s hold
  EXPECT_EQ(proxy.dropped(), 1);
}

// Held for less than the client's timeout: the client reads EOF after it.
TEST_F(ReplyDropProxyTest, StalledReplyIsHeldForItsDurationThenDropped) {
  ReplyDropProxy proxy(server_->url());
  auto client = Through(proxy, milliseconds(20000));
  ASSERT_EQ(client->Execute({"PING"}).str, "PONG");
  proxy.StallNextReply("held:counter", milliseconds(300));
  auto start = Steady::now();
  EXPECT_EQ(CodeOf(*client, {"INCR", "held:counter"}),
            ErrorCode::kRedisUnavailable);
  EXPECT_GE(Steady::now() - start, milliseconds(300));
  EXPECT_EQ(redis_->Execute({"GET", "held:counter"}).str, "1");
  EXPECT_EQ(proxy.dropped(), 1);
}

// Delayed: the command runs at once, other connections are answered
// meanwhile, and the reply arrives after the hold on a connection that
// goes on working.
TEST_F(ReplyDropProxyTest, DelayedReplyArrivesLateAndTheConnectionGoesOn) {
  ReplyDropProxy proxy(server_->url());
  auto client = Through(proxy, milliseconds(20000));
  auto other = Through(proxy, milliseconds(20000));
  ASSERT_EQ(client->Execute({"PING"}).str, "PONG");
  ASSERT_EQ(other->Execute({"PING"}).str, "PONG");
  proxy.DelayNextReply("late:counter", milliseconds(300));
  auto start = Steady::now();
  auto late = std::async(std::launch::async, [&] {
    return client->Execute({"INCR", "late:counter"}).integer;
  });
  // The command ran at once; another connection's reply overtakes it.
  ASSERT_TRUE(WaitUntil([&] {
    return !redis_->Execute({"GET", "late:counter"}).is_nil();
  }));
  EXPECT_EQ(other->Execute({"INCR", "late:counter"}).integer, 2);
  EXPECT_EQ(late.get(), 1);
  EXPECT_GE(Steady::now() - start, milliseconds(300));
  EXPECT_EQ(client->Execute({"INCR", "late:counter"}).integer, 3);
  EXPECT_EQ(proxy.delayed(), 1);
  EXPECT_EQ(proxy.dropped(), 0);
}

// A held-back request runs after what the client did next elsewhere, even
// though the client gave up on it and left.
TEST_F(ReplyDropProxyTest, DelayedRequestRunsLateAfterTheClientLeft) {
  ReplyDropProxy proxy(server_->url());
  auto client = Through(proxy, milliseconds(200));
  ASSERT_EQ(client->Execute({"PING"}).str, "PONG");
  proxy.DelayNextRequest("late:request", milliseconds(500));
  EXPECT_EQ(CodeOf(*client, {"INCR", "late:request"}),
            ErrorCode::kRedisTimeout);
  EXPECT_TRUE(redis_->Execute({"GET", "late:request"}).is_nil());
  redis_->Execute({"SET", "late:request", "10"});
  ASSERT_TRUE(WaitUntil([&] { return proxy.dropped() == 1; }));
  EXPECT_EQ(redis_->Execute({"GET", "late:request"}).str, "11");
  EXPECT_EQ(client->Execute({"INCR", "late:request"}).integer, 12);
}

// EVALSHA answered NOSCRIPT did not run: that reply passes and the rule
// waits for the EVAL the client sends next, which runs and loses its reply.
TEST_F(ReplyDropProxyTest, NoScriptReplyPassesAndTheRuleWaitsForTheEval) {
  ReplyDropProxy proxy(server_->url());
  auto client = Through(proxy);
  Script incr("return redis.call('INCR', KEYS[1])");
  ASSERT_EQ(client->Eval(incr, {"script:counter"}, {}).integer, 1);
  redis_->Execute({"SCRIPT", "FLUSH"});
  proxy.DropNextReply("script:counter");
  try {
    client->Eval(incr, {"script:counter"}, {});
    ADD_FAILURE() << "the EVAL's reply must be lost";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kRedisUnavailable);
  }
  EXPECT_EQ(redis_->Execute({"GET", "script:counter"}).str, "2");
  EXPECT_EQ(proxy.dropped(), 1);
  EXPECT_EQ(proxy.armed(), 0);
}

TEST_F(ReplyDropProxyTest, DestructionClosesOpenConnections) {
  auto proxy = std::make_unique<ReplyDropProxy>(server_->url());
  auto client = Through(*proxy);
  ASSERT_EQ(client->Execute({"PING"}).str, "PONG");
  proxy->DropNextReply("never-sent");  // an unused rule is fine
  proxy.reset();
  auto start = Steady::now();
  EXPECT_EQ(CodeOf(*client, {"PING"}), ErrorCode::kRedisUnavailable);
  EXPECT_LT(Steady::now() - start, seconds(10));
}

// Every socket the proxy opened (listener, accepted, upstream, its wake-up
// pipe) is closed when it is gone, cut connections included.
TEST_F(ReplyDropProxyTest, LeavesNoDescriptorOpen) {
  auto open_fds = [] {
    return std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                         std::filesystem::directory_iterator());
  };
  const auto before = open_fds();
  {
    ReplyDropProxy proxy(server_->url());
    auto client = Through(proxy);
    ASSERT_EQ(client->Execute({"PING"}).str, "PONG");
    proxy.DropNextReply("fd:counter");
    EXPECT_EQ(CodeOf(*client, {"INCR", "fd:counter"}),
              ErrorCode::kRedisUnavailable);
    EXPECT_EQ(client->Execute({"INCR", "fd:counter"}).integer, 2);
  }
  EXPECT_EQ(open_fds(), before);
}

TEST_F(ReplyDropProxyTest, AStoppedTargetClosesTheClient) {
  RedisServer own;
  ReplyDropProxy proxy(own.url());
  auto client = Through(proxy);
  ASSERT_EQ(client->Execute({"PING"}).str, "PONG");
  own.Stop();
  EXPECT_EQ(CodeOf(*client, {"PING"}), ErrorCode::kRedisUnavailable);
  EXPECT_EQ(CodeOf(*client, {"PING"}), ErrorCode::kRedisUnavailable);
  own.Start();
  EXPECT_EQ(client->Execute({"PING"}).str, "PONG");
}

}  // namespace
}  // namespace lockfleet::testing
