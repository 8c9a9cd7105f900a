// Redis Cluster routing, the pure parts (lockcore/src/cluster.h): MOVED and
// ASK replies, the slot a command is routed by, CLUSTER SLOTS replies and
// the slot map.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cluster.h"
#include "key_slot.h"
#include "lockfleet/lockcore/error.h"
#include "redis_connection.h"

namespace lockfleet::internal {
namespace {

// Redis Cluster's CRC16 (the spec's check value: "123456789" -> 0x31C3),
// hash tags, and the fence counters' slot tags, which are part of the key
// layout: each the smallest decimal number hashing to its slot.
TEST(ClusterParse, KeySlotsAndSlotTags) {
  EXPECT_EQ(KeySlot("123456789"), 0x31C3 % kSlots);
  EXPECT_EQ(KeySlot("foo"), 12182);  // CLUSTER KEYSLOT foo
  EXPECT_EQ(KeySlot("somekey"), 11058);
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("user1000"));
  EXPECT_EQ(SlotTag(0), "3560");
  EXPECT_EQ(SlotTag(5), "460");
  EXPECT_EQ(SlotTag(16383), "39296");
  std::vector<bool> taken(kSlots);
  size_t found = 0;
  for (uint64_t n = 0; found < kSlots; ++n) {
    const std::string tag = std::to_string(n);
    const uint16_t slot = KeySlot(tag);
    if (taken[slot]) continue;
    taken[slot] = true;
    ++found;
    ASSERT_EQ(SlotTag(slot), tag) << slot;
  }
}

TEST(ClusterParse, MovedAndAsk) {
  std::optional<Redirect> moved =
      ParseRedirect("MOVED 3999 127.0.0.1:6381", "");
  ASSERT_TRUE(moved);
  EXPECT_EQ(moved->kind, Redirect::Kind::kMoved);
  EXPECT_EQ(moved->slot, 3999);
  EXPECT_EQ(moved->node, (RedisNode{"127.0.0.1", 6381}));
  std::optional<Redirect> ask = ParseRedirect("ASK 0 [::1]:7000", "");
  ASSERT_TRUE(ask);
  EXPECT_EQ(ask->kind, Redirect::Kind::kAsk);
  EXPECT_EQ(ask->node, (RedisNode{"::1", 7000}));
  // Redis writes IPv6 without brackets, and an empty host for a node that
  // does not know its address: the node asked.
  EXPECT_EQ(ParseRedirect("MOVED 1 ::1:7000", "")->node,
            (RedisNode{"::1", 7000}));
  EXPECT_EQ(ParseRedirect("MOVED 16383 :7000", "10.0.0.9")->node,
            (RedisNode{"10.0.0.9", 7000}));
  for (const char* not_one :
       {"ERR MOVED 1 h:1", "MOVED", "MOVED 1", "MOVED x h:1", "MOVED 16384 h:1",
        "MOVED 1 h", "MOVED 1 h:0", "MOVED 1 h:70000", "ASK 1 h:p",
        "TRYAGAIN Multiple keys", "MOVED 123456 h:1"}) {
    EXPECT_FALSE(ParseRedirect(not_one, "")) << not_one;
  }
}

TEST(ClusterParse, CommandSlot) {
  EXPECT_EQ(CommandSlot({"GET", "foo"}), KeySlot("foo"));
  EXPECT_EQ(CommandSlot({"set", "{user1000}.a", "v"}), KeySlot("user1000"));
  EXPECT_EQ(CommandSlot({"EVALSHA", "abc", "2", "{x}:1", "{x}:2", "arg"}),
            KeySlot("x"));
  EXPECT_EQ(CommandSlot({"EVAL", "return 1", "0", "notakey"}), std::nullopt);
  EXPECT_EQ(CommandSlot({"OBJECT", "ENCODING", "k"}), KeySlot("k"));
  EXPECT_EQ(CommandSlot({"BITOP", "AND", "dest", "a"}), KeySlot("dest"));
  for (const Command& keyless :
       std::vector<Command>{{"PING"},
                            {"INFO", "commandstats"},
                            {"SCAN", "0", "MATCH", "x*"},
                            {"WAIT", "1", "100"},
                            {"MULTI"},
                            {"exec"},
                            {"SCRIPT", "LOAD", "return 1"},
                            {"CLUSTER", "SLOTS"},
                            {"DBSIZE"},
                            {}}) {
    EXPECT_EQ(CommandSlot(keyless), std::nullopt)
        << (keyless.empty() ? "" : keyless[0]);
  }
}

Reply Int(long long n) {
  return Reply{.type = Reply::Type::kInteger, .integer = n};
}
Reply Str(std::string s) {
  return Reply{.type = Reply::Type::kString, .str = s};
}
Reply Arr(std::vector<Reply> e) {
  return Reply{.type = Reply::Type::kArray, .elements = std::move(e)};
}

TEST(ClusterParse, ClusterSlots) {
  const Reply reply = Arr({
      Arr({Int(0), Int(5460), Arr({Str("127.0.0.1"), Int(7000), Str("id1")}),
           Arr({Str("127.0.0.1"), Int(7003), Str("id4")})}),
      Arr({Int(5461), Int(10922), Arr({Str(""), Int(7001), Str("id2")})}),
      Arr({Int(10923), Int(16383), Arr({Str("?"), Int(7002), Str("id3")})}),
  });
  const std::vector<SlotRange> ranges = ParseClusterSlots(reply, "seed");
  ASSERT_EQ(ranges.size(), 2u);  // the "?" endpoint is left out
  EXPECT_EQ(ranges[0].master, (RedisNode{"127.0.0.1", 7000}));
  EXPECT_EQ(ranges[0].replicas, (std::vector<RedisNode>{{"127.0.0.1", 7003}}));
  EXPECT_EQ(ranges[1].master, (RedisNode{"seed", 7001}));

  SlotMap map;
  EXPECT_TRUE(map.empty());
  EXPECT_EQ(map.Owner(0), std::nullopt);
  map.Replace(ranges);
  EXPECT_FALSE(map.empty());
  EXPECT_EQ(map.Owner(0), (RedisNode{"127.0.0.1", 7000}));
  EXPECT_EQ(map.Owner(10922), (RedisNode{"seed", 7001}));
  EXPECT_EQ(map.Owner(16383), std::nullopt);
  map.Moved(16383, {"127.0.0.1", 7000});
  EXPECT_EQ(map.Owner(16383), (RedisNode{"127.0.0.1", 7000}));
  EXPECT_EQ(map.Masters(),
            (std::vector<RedisNode>{{"127.0.0.1", 7000}, {"seed", 7001}}));

  for (const Reply& bad :
       {Str("x"), Arr({Arr({Int(0)})}), Arr({Arr({Int(5), Int(1), Arr({})})}),
        Arr({Arr({Int(0), Int(16384), Arr({Str("h"), Int(1)})})}),
        Arr({Arr({Int(0), Int(1), Arr({Str("h"), Int(0)})})}),
        Arr({Arr({Int(0), Int(1), Arr({Int(1), Int(1)})})})}) {
    EXPECT_THROW(ParseClusterSlots(bad, "seed"), Error);
  }
}

// An error reply is never a value: what each kind stands for, including
// the reply a failed cluster master's commands get.
TEST(ClusterParse, ErrorReplyCodes) {
  const ErrorCode other = ErrorCode::kRedisProtocol;
  EXPECT_EQ(ErrorReplyCode("CLUSTERDOWN The cluster is down", other),
            ErrorCode::kRedisBusy);
  EXPECT_EQ(ErrorReplyCode("TRYAGAIN Multiple keys", other),
            ErrorCode::kRedisBusy);
  EXPECT_EQ(ErrorReplyCode("MOVED 1 h:1 (lockfleet gave up ...)", other),
            ErrorCode::kRedisBusy);
  EXPECT_EQ(ErrorReplyCode("NOPERM this user has no permissions", other),
            ErrorCode::kRedisAuth);
  EXPECT_EQ(ErrorReplyCode("WRONGTYPE Operation against a key", other), other);
  const Reply failed =
      FailedNodeReply(NotSentError(Error(ErrorCode::kRedisTimeout, "slow")));
  EXPECT_EQ(failed.str, "ERR lockfleet: not sent: slow");
  EXPECT_EQ(ErrorReplyCode(failed.str, other), ErrorCode::kRedisUnavailable);
  EXPECT_EQ(FailedNodeReply(Error(ErrorCode::kRedisUnavailable, "reset")).str,
            "ERR lockfleet: reset");
}

}  // namespace
}  // namespace lockfleet::internal
