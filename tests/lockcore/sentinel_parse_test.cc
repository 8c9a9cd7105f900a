// The +switch-master message the Sentinel watch thread acts on
// (lockcore/src/sentinel.h, ParseSwitchMaster).
#include <gtest/gtest.h>

#include "sentinel.h"

namespace lockfleet::internal {
namespace {

TEST(SwitchMaster, ParsesTheNewAddressOfOurMaster) {
  EXPECT_EQ(ParseSwitchMaster("main 10.0.0.1 6379 10.0.0.2 6380", "main"),
            (RedisNode{"10.0.0.2", 6380}));
  EXPECT_EQ(ParseSwitchMaster("main ::1 6379 ::2 6380", "main"),
            (RedisNode{"::2", 6380}));
  EXPECT_EQ(ParseSwitchMaster("main a 1 redis-2.internal 6379", "main"),
            (RedisNode{"redis-2.internal", 6379}));
}

TEST(SwitchMaster, IgnoresOtherMastersAndMalformedText) {
  EXPECT_FALSE(ParseSwitchMaster("other 10.0.0.1 6379 10.0.0.2 6380", "main"));
  EXPECT_FALSE(ParseSwitchMaster("mainx 10.0.0.1 6379 10.0.0.2 6380", "main"));
  EXPECT_FALSE(ParseSwitchMaster("main 10.0.0.1 6379 10.0.0.2", "main"));
  EXPECT_FALSE(ParseSwitchMaster("main 10.0.0.1 6379 10.0.0.2 0", "main"));
  EXPECT_FALSE(ParseSwitchMaster("main 10.0.0.1 6379 10.0.0.2 70000", "main"));
  EXPECT_FALSE(ParseSwitchMaster("main 10.0.0.1 6379 10.0.0.2 63x", "main"));
  EXPECT_FALSE(ParseSwitchMaster("main 10.0.0.1 6379  6380", "main"));
  EXPECT_FALSE(
      ParseSwitchMaster("main 10.0.0.1 6379 10.0.0.2 6380 extra", "main"));
  EXPECT_FALSE(ParseSwitchMaster("", "main"));
}

}  // namespace
}  // namespace lockfleet::internal
