// The analysis of `lockfleet bench` on synthetic records: violations,
// hand-off classes, fairness.
#include "bench_analysis.h"

#include <gtest/gtest.h>

#include <vector>

namespace lockfleet::cli {
namespace {

constexpr int64_t kMs = 1'000'000;

Section At(int64_t acquire_ms, int64_t release_ms, int process, int thread = 0,
           int lock = 0) {
  return Section{.acquire_ns = acquire_ms * kMs,
                 .release_ns = release_ms * kMs,
                 .process = process,
                 .thread = thread,
                 .lock = lock};
}

TEST(BenchAnalysisTest, SequentialSectionsHaveNoViolation) {
  const Analysis a =
      Analyze({At(0, 1, 0), At(2, 3, 1), At(5, 6, 0)}, /*processes=*/2, 1);
  EXPECT_EQ(a.acquisitions, 3u);
  EXPECT_EQ(a.violations, 0u);
  EXPECT_EQ(a.handoffs, 2u);
  EXPECT_EQ(a.cross_process_us.count, 2u);
  EXPECT_DOUBLE_EQ(a.cross_process_us.p50, 1000);
  EXPECT_DOUBLE_EQ(a.cross_process_us.max, 2000);
}

TEST(BenchAnalysisTest, OverlapOnOneLockIsAViolation) {
  // Process 1 acquires at 5 ms while process 0 holds until 10 ms.
  const Analysis a = Analyze({At(0, 10, 0), At(5, 12, 1)}, 2, 1);
  EXPECT_EQ(a.violations, 1u);
  EXPECT_EQ(a.handoff_us.count, 0u);  // an overlap has no gap
}

TEST(BenchAnalysisTest, OverlapWithANonAdjacentSectionIsCaught) {
  // The long section 0..10 contains 2..3 and 4..5: both overlap it.
  const Analysis a = Analyze({At(0, 10, 0), At(2, 3, 1), At(4, 5, 2)}, 3, 1);
  EXPECT_EQ(a.violations, 2u);
}

TEST(BenchAnalysisTest, RecordsArriveInAnyOrder) {
  const Analysis a = Analyze({At(5, 12, 1), At(0, 10, 0)}, 2, 1);
  EXPECT_EQ(a.violations, 1u);
}

TEST(BenchAnalysisTest, DifferentLocksMayOverlap) {
  const Analysis a =
      Analyze({At(0, 10, 0, 0, /*lock=*/0), At(5, 12, 1, 0, /*lock=*/1)}, 2, 1);
  EXPECT_EQ(a.violations, 0u);
  EXPECT_EQ(a.handoffs, 0u);
}

TEST(BenchAnalysisTest, TouchingSectionsAreNotAViolation) {
  const Analysis a = Analyze({At(0, 10, 0), At(10, 12, 1)}, 2, 1);
  EXPECT_EQ(a.violations, 0u);
  EXPECT_DOUBLE_EQ(a.handoff_us.max, 0);
}

TEST(BenchAnalysisTest, OverlapAfterALostLeaseIsCountedApart) {
  Section stale = At(0, 10, 0);
  stale.lost = true;
  const Analysis a = Analyze({stale, At(5, 12, 1)}, 2, 1);
  EXPECT_EQ(a.violations, 0u);
  EXPECT_EQ(a.lost_lease_overlaps, 1u);
}

TEST(BenchAnalysisTest, HandOffsAreClassified) {
  // p0t0 -> p0t0 (releaser) -> p0t1 (same process) -> p1t0 (cross).
  Section parked = At(9, 10, 1, 0);
  parked.waited = true;
  const Analysis a =
      Analyze({At(0, 1, 0, 0), At(2, 3, 0, 0), At(5, 6, 0, 1), parked}, 2, 2);
  EXPECT_EQ(a.handoffs, 3u);
  EXPECT_EQ(a.back_to_releaser, 1u);
  EXPECT_EQ(a.releaser_us.count, 1u);
  EXPECT_DOUBLE_EQ(a.releaser_us.p50, 1000);
  EXPECT_EQ(a.same_process_us.count, 1u);
  EXPECT_DOUBLE_EQ(a.same_process_us.p50, 2000);
  EXPECT_EQ(a.cross_process_us.count, 1u);
  EXPECT_DOUBLE_EQ(a.cross_process_us.p50, 3000);
  EXPECT_EQ(a.parked_cross_process_us.count, 1u);
  EXPECT_EQ(a.handoff_us.count, 3u);
  EXPECT_DOUBLE_EQ(a.releaser_reacquire_share, 1.0 / 3);
}

TEST(BenchAnalysisTest, JainIndexCountsIdleContenders) {
  // Contender (0,0) took everything; (0,1), (1,0), (1,1) nothing.
  const Analysis a = Analyze({At(0, 1, 0), At(2, 3, 0)}, 2, 2);
  ASSERT_EQ(a.per_contender.size(), 4u);
  EXPECT_EQ(a.per_contender[0], 2u);
  EXPECT_DOUBLE_EQ(a.jain_index, 0.25);
  EXPECT_DOUBLE_EQ(JainIndex({3, 3, 3}), 1.0);
  EXPECT_DOUBLE_EQ(JainIndex({}), 0.0);
}

TEST(BenchAnalysisTest, PercentilesAreNearestRank) {
  std::vector<double> values;
  for (int i = 1; i <= 100; ++i) values.push_back(i);
  const Percentiles p = Summarize(values);
  EXPECT_EQ(p.count, 100u);
  EXPECT_DOUBLE_EQ(p.p50, 50);
  EXPECT_DOUBLE_EQ(p.p90, 90);
  EXPECT_DOUBLE_EQ(p.p99, 99);
  EXPECT_DOUBLE_EQ(p.max, 100);
  EXPECT_EQ(Summarize({}).count, 0u);
  EXPECT_DOUBLE_EQ(Summarize({7}).p99, 7);
}

TEST(BenchAnalysisTest, NoSectionsNoHandOffs) {
  const Analysis a = Analyze({}, 3, 1);
  EXPECT_EQ(a.acquisitions, 0u);
  EXPECT_EQ(a.handoffs, 0u);
  EXPECT_DOUBLE_EQ(a.releaser_reacquire_share, 0);
}

}  // namespace
}  // namespace lockfleet::cli
