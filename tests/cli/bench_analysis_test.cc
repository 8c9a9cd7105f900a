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

// --primitive rwlock, semaphore and multilock: the interval checkers.

Section Rw(int64_t acquire_ms, int64_t release_ms, bool write, int process,
           int lock = 0) {
  Section s = At(acquire_ms, release_ms, process, 0, lock);
  s.write = write;
  return s;
}

TEST(BenchPrimitiveAnalysisTest, OverlappingReadsAreNoViolation) {
  const CheckResult r = CheckRwLock(
      {Rw(0, 10, false, 0), Rw(2, 8, false, 1), Rw(5, 12, false, 2)});
  EXPECT_EQ(r.violations, 0u);
}

TEST(BenchPrimitiveAnalysisTest, WriteOverlappingAReadIsAViolation) {
  // A write starting inside a read, and a read starting inside a write.
  EXPECT_EQ(CheckRwLock({Rw(0, 10, false, 0), Rw(5, 12, true, 1)}).violations,
            1u);
  EXPECT_EQ(CheckRwLock({Rw(0, 10, true, 0), Rw(5, 12, false, 1)}).violations,
            1u);
  // Two writes.
  EXPECT_EQ(CheckRwLock({Rw(0, 10, true, 0), Rw(9, 12, true, 1)}).violations,
            1u);
}

TEST(BenchPrimitiveAnalysisTest, WriteInsideAnEarlierLongReadIsFound) {
  // The write overlaps the first read only, not its immediate predecessor.
  EXPECT_EQ(CheckRwLock(
                {Rw(0, 100, false, 0), Rw(1, 2, false, 1), Rw(50, 60, true, 2)})
                .violations,
            1u);
}

TEST(BenchPrimitiveAnalysisTest, RwTouchingIntervalsAndOtherLocksDoNotCount) {
  // Release at 10, acquire at 10: no overlap. Another lock: no conflict.
  EXPECT_EQ(CheckRwLock({Rw(0, 10, true, 0), Rw(10, 20, true, 1),
                         Rw(5, 15, true, 2, /*lock=*/1)})
                .violations,
            0u);
}

TEST(BenchPrimitiveAnalysisTest, RwOverlapWithALostLeaseCountsApart) {
  Section lost = Rw(0, 10, true, 0);
  lost.lost = true;
  const CheckResult r = CheckRwLock({lost, Rw(5, 12, false, 1)});
  EXPECT_EQ(r.violations, 0u);
  EXPECT_EQ(r.lost_overlaps, 1u);
}

TEST(BenchPrimitiveAnalysisTest, SemaphoreAllowsUpToItsPermits) {
  std::vector<Section> four;
  for (int p = 0; p < 4; ++p) four.push_back(At(p, 100, p));
  EXPECT_EQ(CheckSemaphore(four, 4).violations, 0u);
  four.push_back(At(50, 60, 4));  // a fifth while four are held
  EXPECT_EQ(CheckSemaphore(four, 4).violations, 1u);
  EXPECT_EQ(CheckSemaphore(four, 5).violations, 0u);
}

TEST(BenchPrimitiveAnalysisTest, SemaphoreCountsEachInstantNotEachPair) {
  // 2 permits: sections come and go, never more than 2 held at once.
  EXPECT_EQ(CheckSemaphore({At(0, 10, 0), At(5, 15, 1), At(10, 20, 2),
                            At(15, 25, 3), At(20, 30, 0)},
                           2)
                .violations,
            0u);
  // A third starting at 12 while [5,15) and [10,20) are held.
  EXPECT_EQ(CheckSemaphore(
                {At(0, 10, 0), At(5, 15, 1), At(10, 20, 2), At(12, 13, 3)}, 2)
                .violations,
            1u);
}

TEST(BenchPrimitiveAnalysisTest, SemaphoreOfOnePermitIsMutualExclusion) {
  // The multilock check: every acquisition takes all names, recorded on one.
  EXPECT_EQ(
      CheckSemaphore({At(0, 1, 0), At(1, 2, 1), At(3, 4, 0)}, 1).violations,
      0u);
  EXPECT_EQ(
      CheckSemaphore({At(0, 10, 0), At(1, 2, 1), At(5, 6, 2)}, 1).violations,
      2u);
}

TEST(BenchPrimitiveAnalysisTest, SharedAnalysisRoundTripsAndHandOffs) {
  // Reads 0 [0,10) and 1 [2,8) (joining a reader, 1 round trip); write 2
  // waits and gets in at 11, 1 ms after the last release (10); read 3
  // waited behind the write and gets in 2 ms after its release at 20.
  Section r0 = Rw(0, 10, false, 0);
  r0.acquire_trips = 1;
  Section r1 = Rw(2, 8, false, 1);
  r1.acquire_trips = 1;
  Section w2 = Rw(11, 20, true, 2);
  w2.waited = true;
  w2.acquire_trips = 3;
  Section r3 = Rw(22, 30, false, 3);
  r3.waited = true;
  r3.acquire_trips = 2;
  const SharedAnalysis a =
      AnalyzeShared({r0, r1, w2, r3}, 4, 1, Primitive::kRwLock, 0);
  EXPECT_EQ(a.base.acquisitions, 4u);
  EXPECT_EQ(a.base.violations, 0u);
  EXPECT_EQ(a.reads, 3u);
  EXPECT_EQ(a.writes, 1u);
  EXPECT_EQ(a.max_concurrent, 2u);
  EXPECT_EQ(a.trips_read_joining.count, 1u);
  EXPECT_DOUBLE_EQ(a.trips_read_joining.mean, 1.0);
  EXPECT_EQ(a.trips_waited.count, 2u);
  EXPECT_DOUBLE_EQ(a.trips_waited.mean, 2.5);
  EXPECT_DOUBLE_EQ(a.trips_all.mean, 7.0 / 4);
  EXPECT_EQ(a.waited_write_handoff_us.count, 1u);
  EXPECT_DOUBLE_EQ(a.waited_write_handoff_us.p50, 1000);
  EXPECT_EQ(a.waited_read_handoff_us.count, 1u);
  EXPECT_DOUBLE_EQ(a.waited_read_handoff_us.p50, 2000);
  EXPECT_EQ(a.base.handoff_us.count, 2u);
  EXPECT_DOUBLE_EQ(a.base.jain_index, 1.0);
}

TEST(BenchPrimitiveAnalysisTest, SharedAnalysisSemaphoreViolationsAndJain) {
  // 2 permits; process 0 takes three, process 1 one, and the last one
  // starts while two are held.
  const SharedAnalysis a =
      AnalyzeShared({At(0, 10, 0), At(1, 10, 1), At(5, 6, 0), At(20, 21, 0)}, 2,
                    1, Primitive::kSemaphore, 2);
  EXPECT_EQ(a.base.violations, 1u);
  EXPECT_EQ(a.base.per_contender, (std::vector<uint64_t>{3, 1}));
  EXPECT_NEAR(a.base.jain_index, 16.0 / 20, 1e-12);
  EXPECT_EQ(a.max_concurrent, 3u);
}

}  // namespace
}  // namespace lockfleet::cli
