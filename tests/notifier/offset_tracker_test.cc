// OffsetTracker: what a consumer-group member may commit (no Kafka needed).
#include "offset_tracker.h"

#include <gtest/gtest.h>

namespace lockfleet::notifier {
namespace {

using Commits = std::vector<std::pair<int32_t, int64_t>>;

Commits Due(OffsetTracker& t, const std::vector<int32_t>& only = {},
            bool resend = false) {
  Commits out;
  for (const auto& c : t.Due(only, resend))
    out.emplace_back(c.partition, c.offset);
  return out;
}

// Takes the record at `offset` and finishes it at once.
void TakeAndFinish(OffsetTracker& t, int32_t partition, int64_t offset) {
  std::optional<uint64_t> epoch = t.Take(partition, offset);
  ASSERT_TRUE(epoch);
  EXPECT_TRUE(t.Done(partition, *epoch, offset));
}

TEST(OffsetTracker, CommitsOnlyPastRecordsThatAreAllFinished) {
  OffsetTracker t;
  uint64_t epoch = t.Assign(0);
  for (int64_t o : {5, 6, 7}) ASSERT_EQ(t.Take(0, o), epoch);
  EXPECT_TRUE(Due(t).empty());  // nothing finished
  EXPECT_TRUE(t.Done(0, epoch, 6));
  EXPECT_TRUE(t.Done(0, epoch, 7));
  EXPECT_TRUE(Due(t).empty());  // nothing beyond 5 (5 itself: no progress)
  EXPECT_TRUE(t.Done(0, epoch, 5));
  EXPECT_EQ(Due(t), (Commits{{0, 8}}));
  t.Committed(0, 8, true);
  EXPECT_TRUE(Due(t).empty());
  EXPECT_EQ(t.CommittedOffset(0), 8);
}

TEST(OffsetTracker, CommitsUpToTheFirstUnfinishedRecord) {
  OffsetTracker t;
  uint64_t epoch = t.Assign(0);
  for (int64_t o = 0; o < 10; ++o) t.Take(0, o);
  for (int64_t o = 0; o < 10; ++o) {
    if (o != 3) t.Done(0, epoch, o);
  }
  EXPECT_EQ(Due(t), (Commits{{0, 3}}));
}

TEST(OffsetTracker, InFlightOffsetsAreNotRequestedTwiceUnlessResent) {
  OffsetTracker t;
  t.Assign(3);
  TakeAndFinish(t, 3, 0);
  EXPECT_EQ(Due(t), (Commits{{3, 1}}));
  EXPECT_TRUE(Due(t).empty());                     // in flight
  EXPECT_EQ(Due(t, {}, true), (Commits{{3, 1}}));  // a sync commit resends
  t.Committed(3, 1, true);
  EXPECT_TRUE(Due(t, {}, true).empty());  // the broker has it
}

TEST(OffsetTracker, AFailedCommitIsDueAgain) {
  OffsetTracker t;
  t.Assign(0);
  TakeAndFinish(t, 0, 0);
  EXPECT_EQ(Due(t), (Commits{{0, 1}}));
  t.Committed(0, 1, false);
  EXPECT_EQ(Due(t), (Commits{{0, 1}}));
}

TEST(OffsetTracker, OnlySelectsPartitions) {
  OffsetTracker t;
  t.Assign(0);
  t.Assign(1);
  TakeAndFinish(t, 0, 10);
  TakeAndFinish(t, 1, 20);
  EXPECT_EQ(Due(t, {1}), (Commits{{1, 21}}));
  EXPECT_EQ(Due(t), (Commits{{0, 11}}));
}

TEST(OffsetTracker, RecordsOfARevokedPartitionChangeNothing) {
  OffsetTracker t;
  uint64_t old_epoch = t.Assign(0);
  t.Take(0, 0);
  t.Take(0, 1);
  t.Revoke(0);
  EXPECT_FALSE(t.Done(0, old_epoch, 0));  // no longer assigned
  EXPECT_EQ(t.Take(0, 2), std::nullopt);
  // Assigned again: a record of the old assignment still counts for nothing,
  // even where the new assignment took the same offset.
  uint64_t new_epoch = t.Assign(0);
  EXPECT_NE(new_epoch, old_epoch);
  EXPECT_EQ(t.Take(0, 1), new_epoch);
  EXPECT_FALSE(t.Done(0, old_epoch, 1));
  EXPECT_TRUE(Due(t).empty());
  EXPECT_TRUE(t.Done(0, new_epoch, 1));
  EXPECT_EQ(Due(t), (Commits{{0, 2}}));
}

TEST(OffsetTracker, NeverCommitsBelowWhatThisMemberCommitted) {
  OffsetTracker t;
  t.Assign(0);
  TakeAndFinish(t, 0, 9);
  ASSERT_EQ(Due(t), (Commits{{0, 10}}));
  t.Committed(0, 10, true);
  // Re-assigned, and the partition starts again lower (the broker lost its
  // log, or another member's commit was older): nothing at or below 10.
  t.Assign(0);
  TakeAndFinish(t, 0, 3);
  EXPECT_TRUE(Due(t, {}, true).empty());
  TakeAndFinish(t, 0, 10);
  EXPECT_EQ(Due(t), (Commits{{0, 11}}));
  // A late success for an older offset lowers nothing.
  t.Committed(0, 4, true);
  EXPECT_EQ(t.CommittedOffset(0), 10);
}

}  // namespace
}  // namespace lockfleet::notifier
