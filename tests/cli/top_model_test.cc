// The model behind `lockfleet top`: rates from counter increases (restarts
// included), interval quantiles, observed hold and wait times, sorting,
// filtering, and the rendered lines.
#include "top_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace lockfleet::cli::top {
namespace {

using metrics::Sample;
using std::chrono::milliseconds;
using std::chrono::seconds;

Sample S(std::string name, std::map<std::string, std::string> labels,
         double value) {
  return Sample{std::move(name), std::move(labels), value, std::nullopt};
}

HeldLock Held(std::string name, std::string owner, int64_t fence,
              std::vector<std::string> waiters = {}) {
  HeldLock lock{std::move(name), {}};
  lock.info.locked = true;
  lock.info.owner = std::move(owner);
  lock.info.hold_count = 1;
  lock.info.fence = fence;
  lock.info.ttl = seconds(30);
  for (std::string& id : waiters) {
    lock.info.queue.push_back({std::move(id), "someone", seconds(10)});
  }
  return lock;
}

// A worker's scrape: `acquired` acquisitions of class "product", `jobs` ok
// jobs, and a wait histogram with `fast` observations <= 1 ms and `slow`
// ones in (1 ms, 1 s].
WorkerScrape Worker(std::string target, double acquired, double jobs,
                    double fast = 0, double slow = 0) {
  WorkerScrape w;
  w.target = std::move(target);
  w.ok = true;
  w.samples = {
      S("lockfleet_lock_acquisitions_total",
        {{"lock_class", "product"}, {"result", "acquired"}}, acquired),
      S("lockfleet_lock_attempts_total", {{"lock_class", "product"}},
        acquired * 2),
      S("lockfleet_lock_contended_total", {{"lock_class", "product"}},
        acquired / 2),
      S("lockfleet_lock_wakeups_total",
        {{"lock_class", "product"}, {"cause", "event"}}, acquired / 4),
      S("lockfleet_jobs_total",
        {{"source", "kafka"}, {"type", "t"}, {"result", "ok"}}, jobs),
      S("lockfleet_jobs_running", {}, 3),
      S("lockfleet_jobs_consumer_lag", {}, 42),
      S("lockfleet_jobs_consumer_partitions", {}, 4),
      S("lockfleet_lock_wait_seconds_bucket",
        {{"lock_class", "product"}, {"le", "0.001"}}, fast),
      S("lockfleet_lock_wait_seconds_bucket",
        {{"lock_class", "product"}, {"le", "1"}}, fast + slow),
      S("lockfleet_lock_wait_seconds_bucket",
        {{"lock_class", "product"}, {"le", "+Inf"}}, fast + slow),
  };
  return w;
}

Observation At(Clock::time_point at) {
  Observation o;
  o.at = at;
  return o;
}

TEST(TopModel, IncreaseCountsARestartFromZero) {
  const std::vector<Sample> before = {S("c", {{"a", "1"}}, 100),
                                      S("c", {{"a", "2"}}, 50)};
  const std::vector<Sample> after = {S("c", {{"a", "1"}}, 130),
                                     S("c", {{"a", "2"}}, 7),   // restarted
                                     S("c", {{"a", "3"}}, 5)};  // new series
  const std::vector<Sample> increase = Increase(before, after);
  ASSERT_EQ(increase.size(), 3u);
  EXPECT_EQ(increase[0].value, 30);
  EXPECT_EQ(increase[1].value, 7);
  EXPECT_EQ(increase[2].value, 5);
}

TEST(TopModel, RatesAreIncreasesOverTheIntervalSummedOverWorkers) {
  const Clock::time_point t0 = Clock::time_point() + seconds(1000);
  Model model;
  Observation first = At(t0);
  first.workers = {Worker("a:1", 100, 10, 10, 0), Worker("b:2", 0, 0)};
  model.Observe(first);
  Frame frame = model.View({});
  EXPECT_FALSE(frame.have_rates);  // one look: no rates yet

  Observation second = At(t0 + seconds(2));
  // a: +200 acquisitions, +40 jobs, waits: +100 fast, +100 slow.
  // b: restarted, its counters start over: +20 acquisitions.
  second.workers = {Worker("a:1", 300, 50, 110, 100), Worker("b:2", 20, 0)};
  model.Observe(second);
  frame = model.View({});
  ASSERT_TRUE(frame.have_rates);
  EXPECT_DOUBLE_EQ(frame.totals.acquisitions_per_s, (200 + 20) / 2.0);
  EXPECT_DOUBLE_EQ(frame.totals.jobs_per_s, 40 / 2.0);
  EXPECT_DOUBLE_EQ(frame.totals.contended_share, 0.25);
  EXPECT_DOUBLE_EQ(frame.totals.wakeups_per_s.at("event"), 55 / 2.0);
  EXPECT_DOUBLE_EQ(frame.totals.running, 6);
  ASSERT_EQ(frame.workers.size(), 2u);
  EXPECT_DOUBLE_EQ(frame.workers[0].jobs_per_s, 20);
  EXPECT_DOUBLE_EQ(frame.workers[0].acquisitions_per_s, 100);
  EXPECT_DOUBLE_EQ(frame.workers[0].lag, 42);
  EXPECT_DOUBLE_EQ(frame.workers[1].acquisitions_per_s, 10);
  // The interval's waits: half <= 1 ms, half in (1 ms, 1 s]: the median
  // is at the 1 ms bound, the p99 near 1 s (not the whole history's).
  ASSERT_EQ(frame.classes.size(), 1u);
  EXPECT_EQ(frame.classes[0].lock_class, "product");
  EXPECT_NEAR(frame.classes[0].wait_p50_s, 0.001, 1e-9);
  EXPECT_GT(frame.classes[0].wait_p99_s, 0.9);
}

// A class taken as several kinds (a lock, a semaphore) is a row per kind;
// a worker from before the kind label counts as lock; the totals count
// holds, not multi-locks (whose locks count already) nor latch awaits.
TEST(TopModel, AClassIsARowPerKind) {
  const Clock::time_point t0 = Clock::time_point() + seconds(1000);
  auto acquired = [](const char* kind, double value) {
    metrics::LabelMatch labels = {{"lock_class", "partner"},
                                  {"result", "acquired"}};
    if (*kind != '\0') labels.emplace("kind", kind);
    return S("lockfleet_lock_acquisitions_total", labels, value);
  };
  auto scrape = [&](double n) {
    WorkerScrape w;
    w.target = "a:1";
    w.ok = true;
    w.samples = {acquired("lock", n), acquired("semaphore", 4 * n),
                 acquired("multilock", 3 * n), acquired("latch", 2 * n)};
    return w;
  };
  auto old_worker = [&](double n) {
    WorkerScrape w;
    w.target = "b:2";
    w.ok = true;
    w.samples = {acquired("", n)};
    return w;
  };
  Model model;
  Observation first = At(t0);
  first.workers = {scrape(0), old_worker(0)};
  model.Observe(first);
  Observation second = At(t0 + seconds(2));
  second.workers = {scrape(10), old_worker(6)};
  model.Observe(second);
  const Frame frame = model.View({});
  ASSERT_EQ(frame.classes.size(), 4u);
  EXPECT_EQ(frame.classes[0].kind, "semaphore");  // most acquisitions first
  EXPECT_DOUBLE_EQ(frame.classes[0].acquisitions_per_s, 20);
  EXPECT_EQ(frame.classes[1].kind, "multilock");
  EXPECT_EQ(frame.classes[2].kind, "latch");
  EXPECT_EQ(frame.classes[3].kind, "lock");
  EXPECT_DOUBLE_EQ(frame.classes[3].acquisitions_per_s, 5 + 3)
      << "the old worker's acquisitions are locks";
  EXPECT_EQ(frame.classes[3].lock_class, "partner");
  EXPECT_DOUBLE_EQ(frame.totals.acquisitions_per_s, 20 + 5 + 3);
  ASSERT_EQ(frame.workers.size(), 2u);
  EXPECT_DOUBLE_EQ(frame.workers[0].acquisitions_per_s, 25);
  EXPECT_DOUBLE_EQ(frame.workers[1].acquisitions_per_s, 3);
}

TEST(TopModel, AWorkerThatStopsAnsweringIsShownDownAndStartsOverWhenBack) {
  const Clock::time_point t0 = Clock::time_point() + seconds(1000);
  Model model;
  Observation o = At(t0);
  o.workers = {Worker("a:1", 100, 0)};
  model.Observe(o);
  o = At(t0 + seconds(1));
  o.workers = {WorkerScrape{"a:1", false, "connection refused", {}}};
  model.Observe(o);
  Frame frame = model.View({});
  ASSERT_EQ(frame.workers.size(), 1u);
  EXPECT_FALSE(frame.workers[0].up);
  EXPECT_EQ(frame.workers[0].error, "connection refused");
  // Back: one look is not a rate (its counters may have started over).
  o = At(t0 + seconds(2));
  o.workers = {Worker("a:1", 5000, 0)};
  model.Observe(o);
  frame = model.View({});
  EXPECT_TRUE(frame.workers[0].up);
  EXPECT_FALSE(frame.have_rates);
  EXPECT_EQ(frame.totals.acquisitions_per_s, 0);
}

TEST(TopModel, HeldAndWaitedAreObservedPerGrantAndPerWaiter) {
  const Clock::time_point t0 = Clock::time_point() + seconds(1000);
  Model model;
  Observation o = At(t0);
  o.locks = {Held("a", "w1", 7, {"x"})};
  model.Observe(o);
  o = At(t0 + seconds(3));
  o.locks = {Held("a", "w1", 7, {"x", "y"}), Held("b", "w2", 9)};
  model.Observe(o);
  Frame frame = model.View({.sort = SortKey::kName});
  ASSERT_EQ(frame.locks.size(), 2u);
  EXPECT_EQ(frame.locks[0].held, seconds(3));
  EXPECT_TRUE(frame.locks[0].held_before);       // there at the first look
  EXPECT_EQ(frame.locks[0].waited, seconds(3));  // x, the oldest waiter
  EXPECT_TRUE(frame.locks[0].waited_before);
  EXPECT_EQ(frame.locks[0].waiters, 2u);
  EXPECT_EQ(frame.locks[1].held, seconds(0));
  EXPECT_FALSE(frame.locks[1].held_before);

  // A new grant of the same lock (a new fence) starts over, even under the
  // same owner token; a waiter that left is forgotten.
  o = At(t0 + seconds(5));
  o.locks = {Held("a", "w1", 8, {"y"})};
  model.Observe(o);
  frame = model.View({});
  ASSERT_EQ(frame.locks.size(), 1u);
  EXPECT_EQ(frame.locks[0].held, seconds(0));
  EXPECT_EQ(frame.locks[0].waited, seconds(2));  // y since t0 + 3 s
  EXPECT_FALSE(frame.locks[0].waited_before);
}

TEST(TopModel, RedisOutageKeepsTheLastLocksAndSaysSo) {
  const Clock::time_point t0 = Clock::time_point() + seconds(1000);
  Model model;
  Observation o = At(t0);
  o.locks = {Held("a", "w1", 7)};
  model.Observe(o);
  o = At(t0 + seconds(4));
  o.redis_error = "redis_unavailable: connection refused";
  model.Observe(o);
  const Frame frame = model.View({});
  EXPECT_EQ(frame.redis_error, "redis_unavailable: connection refused");
  ASSERT_EQ(frame.locks.size(), 1u);
  EXPECT_EQ(frame.locks[0].held, seconds(4));
  const std::vector<Line> lines = Render(
      frame, {}, {.source = "s", .clock = "c", .width = 120, .height = 40});
  bool warned = false;
  for (const Line& line : lines) {
    warned = warned || line.text.find("Redis: redis_unavailable") == 0;
  }
  EXPECT_TRUE(warned);
}

TEST(TopModel, SortsByEachKeyAndFiltersBySubstringOrGlob) {
  const Clock::time_point t0 = Clock::time_point() + seconds(1000);
  Model model;
  Observation o = At(t0);
  o.locks = {Held("order:1", "w", 1, {"a"}), Held("product:2", "w", 2)};
  model.Observe(o);
  o = At(t0 + seconds(2));
  o.locks = {Held("order:1", "w", 1, {"a"}), Held("product:2", "w", 3),
             Held("product:10", "w", 4, {"b", "c"})};
  model.Observe(o);
  const auto names = [&](ViewOptions view) {
    std::vector<std::string> out;
    for (const LockRow& row : model.View(view).locks) out.push_back(row.name);
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(names({.sort = SortKey::kWaiters}),
            V({"product:10", "order:1", "product:2"}));
  EXPECT_EQ(names({.sort = SortKey::kWait}),
            V({"order:1", "product:10", "product:2"}));
  EXPECT_EQ(names({.sort = SortKey::kHeld}),
            V({"order:1", "product:10", "product:2"}));
  EXPECT_EQ(names({.sort = SortKey::kName}),
            V({"order:1", "product:10", "product:2"}));
  EXPECT_EQ(names({.filter = "duct:1"}), V({"product:10"}));
  EXPECT_EQ(names({.filter = "product:?"}), V({"product:2"}));
  EXPECT_EQ(names({.filter = "*:1*"}), V({"product:10", "order:1"}));
  EXPECT_EQ(names({.filter = "nothing"}), V({}));
  EXPECT_EQ(NextSortKey(SortKey::kName), SortKey::kWaiters);
  EXPECT_EQ(ParseSortKey("held"), SortKey::kHeld);
  EXPECT_EQ(ParseSortKey("size"), std::nullopt);
}

TEST(TopModel, RenderFitsTheScreenAndNeverPrintsControlBytes) {
  const Clock::time_point t0 = Clock::time_point() + seconds(1000);
  Model model;
  Observation o = At(t0);
  for (int i = 0; i < 50; ++i) {
    o.locks.push_back(Held("lock:" + std::to_string(i), "w", i));
  }
  o.locks.push_back(Held("evil\x1b]0;pwned\x07", "w\x1b[2J", 99, {"x"}));
  o.workers = {Worker("a:1", 1, 1)};
  model.Observe(o);
  const Frame frame = model.View({});
  const std::vector<Line> lines =
      Render(frame, {},
             {.source = "src", .clock = "12:00:00", .width = 80, .height = 24});
  ASSERT_EQ(lines.size(), 24u);
  for (const Line& line : lines) {
    EXPECT_LE(line.text.size(), 80u) << line.text;
    for (char c : line.text) {
      EXPECT_TRUE(c >= 0x20 && c <= 0x7e)
          << "byte " << int(c) << " in " << line.text;
    }
  }
  EXPECT_EQ(lines.front().text.rfind("lockfleet top  12:00:00  src", 0), 0u);
  EXPECT_EQ(lines.back().text.rfind("s sort: waiters", 0), 0u);
  // The lock with a waiter is first; the rows that do not fit are counted.
  EXPECT_EQ(lines[5].text.rfind("evil?]0;pwn~ w?[2J", 0), 0u) << lines[5].text;
  bool more = false;
  for (const Line& line : lines) {
    more = more || line.text.find(" more (filter with /)") != std::string::npos;
  }
  EXPECT_TRUE(more);
  // A tiny screen still gets the header and the key help.
  const std::vector<Line> tiny = Render(
      frame, {}, {.source = "src", .clock = "c", .width = 20, .height = 6});
  EXPECT_EQ(tiny.size(), 6u);
}

TEST(TopModel, NarrowScreensDropColumnsButNeverCutWaiters) {
  const Clock::time_point t0 = Clock::time_point() + seconds(1000);
  Model model;
  Observation o = At(t0);
  std::vector<std::string> waiters;
  for (int i = 0; i < 17; ++i) waiters.push_back("w" + std::to_string(i));
  o.locks = {Held("product:hot-and-long-name", "worker-1/abcdef:17",
                  1795518880363639, waiters)};
  model.Observe(o);
  o.at = t0 + seconds(75);
  model.Observe(o);
  const Frame frame = model.View({});
  for (int width : {200, 100, 80, 60, 40}) {
    const std::vector<Line> lines = Render(
        frame, {}, {.source = "s", .clock = "c", .width = width, .height = 30});
    const std::string& heading = lines[4].text;
    const std::string& row = lines[5].text;
    EXPECT_LE(row.size(), static_cast<size_t>(width));
    EXPECT_TRUE(heading.ends_with("WAITERS*   WAITED"))
        << width << ": " << heading;
    EXPECT_TRUE(row.ends_with("      17   1m15s+")) << width << ": " << row;
    // What is dropped, in order.
    EXPECT_EQ(heading.find("FENCE") != std::string::npos, width >= 80)
        << width << ": " << heading;
    EXPECT_EQ(heading.find("HELD") != std::string::npos, width >= 60)
        << width << ": " << heading;
  }
}

}  // namespace
}  // namespace lockfleet::cli::top
