// Reading librdkafka's statistics JSON (no Kafka).
#include "consumer_introspection.h"

#include <gtest/gtest.h>

namespace lockfleet::notifier {
namespace {

// The parts of a librdkafka statistics JSON that Lag reads (see librdkafka's
// STATISTICS.md); -1001 is librdkafka's "invalid offset".
constexpr const char* kStats = R"({
  "name": "lockfleet#consumer-1", "type": "consumer",
  "topics": {
    "jobs": {
      "topic": "jobs",
      "partitions": {
        "0": {"partition": 0, "app_offset": 5, "committed_offset": 3,
              "lo_offset": 0, "hi_offset": 20},
        "1": {"partition": 1, "app_offset": -1001, "committed_offset": 7,
              "lo_offset": 0, "hi_offset": 10},
        "2": {"partition": 2, "app_offset": -1001,
              "committed_offset": -1001, "lo_offset": 2, "hi_offset": 4},
        "3": {"partition": 3, "app_offset": -1001,
              "committed_offset": -1001, "lo_offset": -1001,
              "hi_offset": -1001},
        "4": {"partition": 4, "app_offset": 2, "committed_offset": 9,
              "lo_offset": 0, "hi_offset": 9},
        "-1": {"partition": -1}
      }
    }
  }
})";

TEST(LagFromStatistics, HighWatermarkMinusPositionSummed) {
  EXPECT_EQ(LagFromStatistics(kStats, "jobs", {0}), 15);  // app position
  EXPECT_EQ(LagFromStatistics(kStats, "jobs", {1}), 3);   // committed
  EXPECT_EQ(LagFromStatistics(kStats, "jobs", {2}), 2);   // from the start
  EXPECT_EQ(LagFromStatistics(kStats, "jobs", {4}), 0);   // stale app offset
  EXPECT_EQ(LagFromStatistics(kStats, "jobs", {0, 1, 2, 4}), 20);
  EXPECT_EQ(LagFromStatistics(kStats, "jobs", {}), 0);  // nothing assigned
}

TEST(LagFromStatistics, UnknownIsMinusOne) {
  EXPECT_EQ(LagFromStatistics(kStats, "jobs", {0, 3}), -1);  // no watermark
  EXPECT_EQ(LagFromStatistics(kStats, "jobs", {0, 9}), -1);  // not in stats
  EXPECT_EQ(LagFromStatistics(kStats, "other", {0}), -1);
  EXPECT_EQ(LagFromStatistics("not json", "jobs", {0}), -1);
  EXPECT_EQ(LagFromStatistics("[1]", "jobs", {0}), -1);
}

}  // namespace
}  // namespace lockfleet::notifier
