// Chaos scenarios 1-2 (docs/RELIABILITY.md): a lock holder killed with -9
// while holding, and a holder frozen (SIGSTOP) past its lease and resumed.
//
// Holders and waiters are separate processes (lockfleet_chaos_holder, which
// uses the real library, and `lockfleet lock`) against a private
// redis-server. Safety is checked from data the lock library does not keep:
// an interval log every holder appends to under its hold (no two may
// overlap), and a fenced resource whose write list must hold each grant's
// writes contiguously, in strictly increasing token order, and nothing from a
// stale holder. Liveness bounds are generous (a loaded 2-core machine); the
// only lower bounds are safety properties. The measured figures are printed
// as "chaos: key=value" lines and recorded as test properties.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "chaos/holder_process.h"
#include "cli/broker_process.h"
#include "cli/cli_process.h"
#include "lockfleet/lockcore/fenced_resource.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/redis_client.h"
#include "lockfleet/lockcore/rwlock.h"
#include "support/redis_server.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int64_t kMs = 1000000;  // nanoseconds
constexpr milliseconds kParkCap(1000);
// On top of every liveness bound: CI runs this on 2 busy cores.
constexpr int64_t kSlackMs = 5000;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Prints a measured figure and records it in the test's XML properties.
void Report(const std::string& key, int64_t value) {
  std::printf("chaos: %s=%lld\n", key.c_str(), static_cast<long long>(value));
  std::fflush(stdout);
  ::testing::Test::RecordProperty(key, std::to_string(value));
}

// One hold from the interval log: "pid fence start_ns end_ns".
struct Interval {
  int64_t pid = 0;
  int64_t fence = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

std::vector<Interval> ReadIntervals(const std::string& path) {
  std::vector<Interval> out;
  for (const std::string& line : SplitLines(ReadFile(path))) {
    std::istringstream in(line);
    Interval i;
    in >> i.pid >> i.fence >> i.start_ns >> i.end_ns;
    out.push_back(i);
  }
  return out;
}

class HolderChaos : public ::testing::Test {
 protected:
  HolderChaos()
      : redis_(
            std::make_shared<RedisClient>(RedisOptions{.url = server_.url()})),
        client_(redis_) {}

  std::unique_ptr<HolderProcess> StartHolder(const std::string& name,
                                             std::vector<std::string> options) {
    std::vector<std::string> args{"--redis", server_.url(), "--name", name};
    args.insert(args.end(), options.begin(), options.end());
    return std::make_unique<HolderProcess>(args);
  }

  // The resource's write list, "<fence>:<pid>" per accepted write.
  std::vector<std::string> Writes(const std::string& resource) {
    std::vector<std::string> out;
    const Reply list = redis_->Execute(
        {"LRANGE", FencedResource::KeyOf("lockfleet", resource, "writes"), "0",
         "-1"});
    for (const Reply& e : list.elements) out.push_back(e.str);
    return out;
  }

  // Safety, from the resource alone: every grant's writes are contiguous and
  // tokens strictly increase from grant to grant, one process per token; the
  // counter equals the number of writes. Returns the tokens in write order.
  std::vector<int64_t> CheckResource(const std::string& resource) {
    const std::vector<std::string> writes = Writes(resource);
    const Reply count = redis_->Execute(
        {"GET", FencedResource::KeyOf("lockfleet", resource, "count")});
    EXPECT_EQ(std::to_string(writes.size()), count.str);
    std::vector<int64_t> tokens;
    std::map<int64_t, std::string> writer;
    for (const std::string& w : writes) {
      const size_t colon = w.find(':');
      const int64_t fence = std::stoll(w.substr(0, colon));
      const std::string pid = w.substr(colon + 1);
      if (tokens.empty() || tokens.back() != fence) {
        EXPECT_TRUE(tokens.empty() || fence > tokens.back())
            << "token " << fence << " written after " << tokens.back();
        tokens.push_back(fence);
        EXPECT_TRUE(writer.emplace(fence, pid).second)
            << "token " << fence << " came back after a newer one";
      }
      EXPECT_EQ(writer[fence], pid) << "two processes wrote with one token";
    }
    return tokens;
  }

  std::string File(const std::string& name) const { return dir_.File(name); }

  void KilledHolderScenario(const std::string& kafka, const std::string& tag);

  RedisServer server_;
  TempDir dir_;
  std::shared_ptr<RedisClient> redis_;
  LockClient client_;
};

// Scenario 1. A holder with a 2 s watchdog lease is SIGKILLed while three
// waiters in other processes queue for its lock and an unrelated process
// holds another lock. The lock must stay the dead holder's until its lease
// runs out (never earlier), then go to the waiters one after another within
// the lease + the park bound; the other lock and other names are untouched.
void HolderChaos::KilledHolderScenario(const std::string& kafka,
                                       const std::string& tag) {
  constexpr char kLock[] = "orders";
  constexpr int kWaiters = 3;
  const milliseconds lease(2000);
  std::vector<std::string> common{"--park-cap",
                                  std::to_string(kParkCap.count())};
  if (!kafka.empty()) common.insert(common.end(), {"--kafka", kafka});
  auto with = [&](std::vector<std::string> options) {
    options.insert(options.end(), common.begin(), common.end());
    return options;
  };
  const std::string log = File("intervals");

  auto other = StartHolder("other", with({"--go", File("other-go")}));
  ASSERT_TRUE(other->WaitForLine("held")) << other->Output();
  auto holder = StartHolder(
      kLock,
      with({"--lease", std::to_string(lease.count()), "--go", File("never")}));
  const std::optional<std::string> held = holder->WaitForLine("held");
  ASSERT_TRUE(held) << holder->Output();
  ASSERT_TRUE(holder->WaitForLine("write")) << holder->Output();
  const int64_t holder_start_ns = IntField(*held, "t_ns");

  std::vector<std::unique_ptr<HolderProcess>> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.push_back(StartHolder(
        kLock, with({"--wait", "60000", "--hold", "200", "--log", log})));
    // Queued in arrival order, each in its own process.
    ASSERT_TRUE(WaitUntil([&] {
      return client_.Inspect(kLock).queue.size() == static_cast<size_t>(i + 1);
    })) << waiters.back()->Output();
  }

  // The watchdog keeps the lock past its first lease while others wait.
  std::this_thread::sleep_until(std::chrono::steady_clock::time_point(
      std::chrono::nanoseconds(holder_start_ns + (lease.count() + 500) * kMs)));
  LockInfo before = client_.Inspect(kLock);
  ASSERT_TRUE(before.locked);
  ASSERT_EQ(before.owner, Field(*held, "owner"));
  ASSERT_EQ(before.fence, IntField(*held, "fence"));
  for (auto& waiter : waiters) ASSERT_EQ(waiter->Stdout(), "");

  // Kill it. Its lock can expire no earlier than ttl after this snapshot
  // (renewals only push the expiry later).
  const int64_t snapshot_ns = NowNs();
  const int64_t ttl_ms = client_.Inspect(kLock).ttl.count();
  holder->Signal(SIGKILL);
  const int64_t kill_ns = NowNs();
  ASSERT_EQ(holder->Wait(), 128 + SIGKILL);
  ASSERT_GT(ttl_ms, 0);

  // Meanwhile another name is free to take at once.
  const int64_t unrelated_ns = NowNs();
  AcquireResult unrelated = client_.TryAcquire("unrelated");
  ASSERT_TRUE(unrelated);
  EXPECT_EQ(unrelated.lease.Release(), ReleaseStatus::kReleased);
  const int64_t unrelated_ms = (NowNs() - unrelated_ns) / kMs;

  std::vector<int64_t> acquired_ns;
  for (auto& waiter : waiters) {
    ASSERT_EQ(waiter->Wait(seconds(60)), 0) << waiter->Output();
    const std::optional<std::string> line = waiter->WaitForLine("held");
    ASSERT_TRUE(line) << waiter->Output();
    acquired_ns.push_back(IntField(*line, "t_ns"));
    EXPECT_NE(waiter->Stdout().find("done on_lost_called=0 release=released"),
              std::string::npos)
        << waiter->Output();
  }
  std::sort(acquired_ns.begin(), acquired_ns.end());
  const int64_t first_ns = acquired_ns.front();
  // Safety: nobody got the lock before the dead holder's lease ran out.
  EXPECT_GE(first_ns, snapshot_ns + (ttl_ms - 2) * kMs)
      << "a waiter acquired " << (snapshot_ns + ttl_ms * kMs - first_ns) / kMs
      << " ms before the killed holder's lease could have expired";
  // Liveness: within the remaining lease + one park bound (+ slack).
  const int64_t recovery_ms = (first_ns - kill_ns) / kMs;
  EXPECT_LE(recovery_ms, ttl_ms + kParkCap.count() + kSlackMs);
  EXPECT_LE(ttl_ms, lease.count());

  // Safety from the interval log: the dead holder's hold (until the kill)
  // and the waiters' holds never overlap, tokens rise with time.
  std::vector<Interval> intervals = ReadIntervals(log);
  ASSERT_EQ(intervals.size(), static_cast<size_t>(kWaiters)) << ReadFile(log);
  intervals.push_back(
      {holder->pid(), IntField(*held, "fence"), holder_start_ns, kill_ns});
  std::sort(intervals.begin(), intervals.end(),
            [](const Interval& a, const Interval& b) {
              return a.start_ns < b.start_ns;
            });
  int64_t max_handoff_ms = 0;
  for (size_t i = 1; i < intervals.size(); ++i) {
    EXPECT_GE(intervals[i].start_ns, intervals[i - 1].end_ns)
        << "holds of pids " << intervals[i - 1].pid << " and "
        << intervals[i].pid << " overlap";
    EXPECT_GT(intervals[i].fence, intervals[i - 1].fence);
    if (i >= 2) {  // waiter to waiter: a release handed it on
      max_handoff_ms =
          std::max(max_handoff_ms,
                   (intervals[i].start_ns - intervals[i - 1].end_ns) / kMs);
    }
  }
  EXPECT_LE(max_handoff_ms, kParkCap.count() + kSlackMs);

  // Safety from the resource: 1 write by the dead holder, 2 per waiter.
  const std::vector<int64_t> tokens = CheckResource(kLock);
  EXPECT_EQ(tokens.size(), static_cast<size_t>(1 + kWaiters));
  EXPECT_EQ(Writes(kLock).size(), static_cast<size_t>(1 + 2 * kWaiters));

  // The other lock was never disturbed.
  WriteFile(File("other-go"), "");
  ASSERT_EQ(other->Wait(), 0) << other->Output();
  EXPECT_NE(other->Stdout().find("write n=2 result=accepted"),
            std::string::npos)
      << other->Output();
  EXPECT_NE(other->Stdout().find("done on_lost_called=0 release=released"),
            std::string::npos)
      << other->Output();

  // Nothing is left behind.
  const LockInfo after = client_.Inspect(kLock);
  EXPECT_FALSE(after.locked);
  EXPECT_TRUE(after.queue.empty());

  Report(tag + "_lease_left_at_kill_ms", ttl_ms);
  Report(tag + "_recovery_ms", recovery_ms);
  Report(tag + "_after_expiry_ms", (first_ns - snapshot_ns) / kMs - ttl_ms);
  Report(tag + "_all_waiters_done_ms", (acquired_ns.back() - kill_ns) / kMs);
  Report(tag + "_max_handoff_ms", max_handoff_ms);
  Report(tag + "_unrelated_lock_ms", unrelated_ms);
}

TEST_F(HolderChaos, KilledHolderFreesAfterLeaseWithoutKafka) {
  KilledHolderScenario("", "sigkill_park");
}

TEST_F(HolderChaos, KilledHolderFreesAfterLeaseWithKafka) {
  BrokerProcess broker;
  KilledHolderScenario(broker.bootstrap(), "sigkill_kafka");
}

// The read-write lock's scenario 1: a reader with a 2 s lease is SIGKILLed
// while a writer, two readers and a second writer queue behind it (in that
// order, each in its own process, woken through Kafka). Nobody gets in
// before the dead reader's lease runs out; then the writer alone, the two
// readers together (one release hands it to both), the second writer alone.
// From the interval log: no write hold overlaps any other hold; writer
// tokens rise; the readers saw the first writer's token.
TEST_F(HolderChaos, RwKilledReaderNeverLetsAWriterBesideAnyone) {
  BrokerProcess broker;
  constexpr char kLock[] = "catalogue";
  const std::vector<std::string> common{"--park-cap",
                                        std::to_string(kParkCap.count()),
                                        "--kafka", broker.bootstrap()};
  auto with = [&](std::vector<std::string> options) {
    options.insert(options.end(), common.begin(), common.end());
    return options;
  };
  const std::string log = File("rw-intervals");
  ReadWriteLock rw = client_.ReadWriteLock(kLock);
  auto dead = StartHolder(
      kLock, with({"--rw", "read", "--lease", "2000", "--go", File("never")}));
  const std::optional<std::string> held = dead->WaitForLine("held");
  ASSERT_TRUE(held) << dead->Output();
  std::vector<std::unique_ptr<HolderProcess>> waiters;
  for (const auto& [mode, hold] :
       std::vector<std::pair<std::string, std::string>>{{"write", "300"},
                                                        {"read", "800"},
                                                        {"read", "800"},
                                                        {"write", "300"}}) {
    waiters.push_back(StartHolder(kLock, with({"--rw", mode, "--wait", "60000",
                                               "--hold", hold, "--log", log})));
    ASSERT_TRUE(WaitUntil([&] {
      return rw.Inspect().waiters == static_cast<int64_t>(waiters.size());
    })) << waiters.back()->Output();
  }
  const RwInfo before = rw.Inspect();
  ASSERT_EQ(before.holders.size(), 1u);
  const int64_t snapshot_ns = NowNs();
  const int64_t ttl_ms = before.holders[0].ttl.count();
  dead->Signal(SIGKILL);
  const int64_t kill_ns = NowNs();
  ASSERT_EQ(dead->Wait(), 128 + SIGKILL);
  for (auto& waiter : waiters) {
    ASSERT_EQ(waiter->Wait(seconds(60)), 0) << waiter->Output();
    EXPECT_NE(waiter->Stdout().find("done on_lost_called=0 release=released"),
              std::string::npos)
        << waiter->Output();
  }

  std::vector<Interval> intervals;
  std::vector<bool> write;
  for (const std::string& line : SplitLines(ReadFile(log))) {
    std::istringstream in(line);
    Interval i;
    std::string mode;
    in >> i.pid >> i.fence >> i.start_ns >> i.end_ns >> mode;
    intervals.push_back(i);
    write.push_back(mode == "w");
  }
  ASSERT_EQ(intervals.size(), waiters.size()) << ReadFile(log);
  intervals.push_back({dead->pid(), IntField(*held, "fence"),
                       IntField(*held, "t_ns"), kill_ns});
  write.push_back(false);
  int64_t first_ns = INT64_MAX;
  for (size_t i = 0; i + 1 < intervals.size(); ++i)
    first_ns = std::min(first_ns, intervals[i].start_ns);
  EXPECT_GE(first_ns, snapshot_ns + (ttl_ms - 2) * kMs)
      << "a waiter got in before the killed reader's lease could have ended";
  int readers_overlapping = 0;
  for (size_t i = 0; i < intervals.size(); ++i) {
    for (size_t j = i + 1; j < intervals.size(); ++j) {
      const bool overlap = intervals[i].start_ns < intervals[j].end_ns &&
                           intervals[j].start_ns < intervals[i].end_ns;
      if (write[i] || write[j]) {
        EXPECT_FALSE(overlap)
            << "a write hold of pid " << intervals[write[i] ? i : j].pid
            << " overlaps the hold of pid " << intervals[write[i] ? j : i].pid;
      } else if (overlap && i + 1 < intervals.size() &&
                 j + 1 < intervals.size()) {
        ++readers_overlapping;
      }
    }
  }
  EXPECT_EQ(readers_overlapping, 1) << "the two queued readers shared it";
  // Writer tokens rise in arrival order; the readers carry the first's.
  EXPECT_GT(intervals[0].fence, 0);
  EXPECT_GT(intervals[3].fence, intervals[0].fence);
  EXPECT_EQ(intervals[1].fence + intervals[2].fence, 2 * intervals[0].fence);
  const std::vector<int64_t> tokens = CheckResource(kLock);
  EXPECT_EQ(tokens.size(), 2u);
  const RwInfo after = rw.Inspect();
  EXPECT_TRUE(after.holders.empty());
  EXPECT_EQ(after.waiters, 0);
  Report("rw_sigkill_lease_left_at_kill_ms", ttl_ms);
  Report("rw_sigkill_recovery_ms", (first_ns - kill_ns) / kMs);
}

// Scenario 2. A holder is frozen past its lease; another process acquires
// and writes through the fenced resource. The frozen holder is resumed with
// its next write already due: that write is rejected by fencing, the holder
// is told it lost the lock (lost() and on_lost), and its release does not
// touch the new holder's lock.
TEST_F(HolderChaos, PausedHolderIsFencedOffAndToldItLost) {
  constexpr char kLock[] = "ledger";
  auto stale = StartHolder(kLock, {"--lease", "1500", "--go", File("go-a")});
  const std::optional<std::string> stale_held = stale->WaitForLine("held");
  ASSERT_TRUE(stale_held) << stale->Output();
  ASSERT_TRUE(stale->WaitForLine("write")) << stale->Output();
  const int64_t stale_fence = IntField(*stale_held, "fence");

  const int64_t snapshot_ns = NowNs();
  const int64_t ttl_ms = client_.Inspect(kLock).ttl.count();
  stale->Signal(SIGSTOP);
  const int64_t stop_ns = NowNs();

  auto fresh = StartHolder(
      kLock, {"--wait", "30000", "--lease", "1500", "--go", File("go-b")});
  const std::optional<std::string> fresh_held = fresh->WaitForLine("held");
  ASSERT_TRUE(fresh_held) << fresh->Output();
  const std::optional<std::string> fresh_write = fresh->WaitForLine("write");
  ASSERT_TRUE(fresh_write) << fresh->Output();
  EXPECT_EQ(Field(*fresh_write, "result"), "accepted");
  const int64_t fresh_fence = IntField(*fresh_held, "fence");
  EXPECT_GT(fresh_fence, stale_fence);
  const int64_t fresh_ns = IntField(*fresh_held, "t_ns");
  // Safety: not before the frozen holder's lease could have run out.
  EXPECT_GE(fresh_ns, snapshot_ns + (ttl_ms - 2) * kMs);
  EXPECT_LE((fresh_ns - stop_ns) / kMs, ttl_ms + kParkCap.count() + kSlackMs);

  // Resume with the stale write already due: the most adversarial moment.
  WriteFile(File("go-a"), "");
  const int64_t cont_ns = NowNs();
  stale->Signal(SIGCONT);
  ASSERT_EQ(stale->Wait(), 0) << stale->Output();
  const std::vector<std::string> out = SplitLines(stale->Stdout());
  std::string late_write, on_lost, done;
  for (const std::string& line : out) {
    if (line.starts_with("write n=2 ")) late_write = line;
    if (line.starts_with("on_lost ")) on_lost = line;
    if (line.starts_with("done ")) done = line;
  }
  EXPECT_EQ(Field(late_write, "result"), "rejected") << stale->Output();
  EXPECT_EQ(IntField(late_write, "highest"), fresh_fence);
  EXPECT_EQ(Field(late_write, "lost"), "1")
      << "lost() must be true as soon as the holder runs again";
  ASSERT_FALSE(on_lost.empty()) << stale->Output();
  EXPECT_EQ(IntField(on_lost, "fence"), stale_fence);
  EXPECT_EQ(Field(done, "on_lost_called"), "1");
  EXPECT_EQ(Field(done, "release"), "not_owner") << stale->Output();

  // The new holder still holds: the stale release deleted nothing.
  const LockInfo info = client_.Inspect(kLock);
  EXPECT_TRUE(info.locked);
  EXPECT_EQ(info.owner, Field(*fresh_held, "owner"));
  EXPECT_EQ(info.fence, fresh_fence);
  WriteFile(File("go-b"), "");
  ASSERT_EQ(fresh->Wait(), 0) << fresh->Output();
  EXPECT_NE(fresh->Stdout().find("write n=2 result=accepted"),
            std::string::npos)
      << fresh->Output();
  EXPECT_NE(fresh->Stdout().find("done on_lost_called=0 release=released"),
            std::string::npos)
      << fresh->Output();

  // The resource holds the stale holder's one early write, then only the
  // new holder's.
  EXPECT_EQ(CheckResource(kLock),
            (std::vector<int64_t>{stale_fence, fresh_fence}));
  EXPECT_EQ(Writes(kLock).size(), 3u);
  EXPECT_EQ(
      redis_
          ->Execute({"GET", FencedResource::KeyOf("lockfleet", kLock, "last")})
          .str,
      std::to_string(fresh_fence) + ":" + std::to_string(fresh->pid()));

  Report("sigstop_paused_ms", (cont_ns - stop_ns) / kMs);
  Report("sigstop_takeover_ms", (fresh_ns - stop_ns) / kMs);
  Report("sigstop_on_lost_after_resume_ms",
         (IntField(on_lost, "t_ns") - cont_ns) / kMs);
}

// Scenario 2 through `lockfleet lock`: the lockfleet process (not COMMAND)
// is frozen past its lease, the lock is taken over, and on resuming
// lockfleet notices, stops COMMAND and exits 76. COMMAND itself was not
// frozen: it kept running unprotected until then (see RELIABILITY.md).
TEST_F(HolderChaos, PausedLockCommandExits76) {
  constexpr char kLock[] = "cli-ledger";
  CliProcess holder({"lock", "--redis", server_.url(), "--lease", "1s", kLock,
                     "--", "sh", "-c",
                     "trap 'touch \"" + File("term") +
                         "\"; exit 0' TERM; touch '" + File("started") +
                         "'; i=0; while :; do i=$((i+1)); echo $i > '" +
                         File("beat") + "'; sleep 0.02; done"});
  ASSERT_TRUE(WaitForFile(File("started"))) << holder.Stderr();
  const int64_t stale_fence = client_.Inspect(kLock).fence;

  holder.Signal(SIGSTOP);
  const int64_t stop_ns = NowNs();
  AcquireResult fresh = client_.AcquireFor(kLock, seconds(30));
  ASSERT_TRUE(fresh);
  const int64_t fresh_ns = NowNs();
  EXPECT_GT(fresh.lease.fence(), stale_fence);
  FencedResource resource(redis_, kLock);
  EXPECT_TRUE(
      resource.Write(fresh.lease.fence(), {{"SET", resource.Key("v"), "new"}})
          .accepted);
  // The limit this test documents: COMMAND is not frozen with lockfleet,
  // so it runs on while another process holds the lock. Only fencing with
  // $LOCKFLEET_FENCE protects what it writes.
  const std::string beat = ReadFile(File("beat"));
  EXPECT_TRUE(WaitUntil([&] { return ReadFile(File("beat")) != beat; }))
      << "COMMAND stopped running while lockfleet was frozen";

  const int64_t cont_ns = NowNs();
  holder.Signal(SIGCONT);
  EXPECT_EQ(holder.Wait(seconds(30)), 76) << holder.Stderr();
  EXPECT_NE(holder.Stderr().find("lost lock"), std::string::npos)
      << holder.Stderr();
  EXPECT_TRUE(FileExists(File("term"))) << "COMMAND was not stopped";
  const int64_t exit_ns = NowNs();
  // The stale token stays fenced off; the new holder still holds.
  EXPECT_FALSE(resource.Write(stale_fence, {{"SET", resource.Key("v"), "old"}})
                   .accepted);
  EXPECT_FALSE(fresh.lease.lost());
  EXPECT_EQ(client_.Inspect(kLock).owner, fresh.lease.owner());
  EXPECT_EQ(fresh.lease.Release(), ReleaseStatus::kReleased);

  Report("cli_sigstop_takeover_ms", (fresh_ns - stop_ns) / kMs);
  Report("cli_exit76_after_resume_ms", (exit_ns - cont_ns) / kMs);
}

}  // namespace
}  // namespace lockfleet::testing
