// lockfleet_failover_bench: locks under Sentinel failovers (bench/failover.md).
//
// Starts a SentinelGroup (a master, two replicas, three sentinels; real
// redis-server processes on loopback), forks PROCESSES contenders that take
// random locks of LOCKS names through redis+sentinel:// (each its own
// LockClient, min_replicas as given), and fails the master over FAILOVERS
// times: even rounds by SENTINEL FAILOVER (the old master keeps accepting
// writes until the sentinels demote it), odd rounds by SIGKILL (the old
// master restarts empty and rejoins as a replica). Counted in shared memory
// across the processes:
//   overlaps     a holder entered its critical section while another was in
//                it for the same lock (two holders at once)
//   lost_grants  a release found the grant gone (Redis forgot it: the lock
//                was free for others while its holder believed it held it)
//   regressions  a grant's fencing token not above every earlier one of its
//                lock (equal from another owner included)
//   revived      a grant with the same token and owner as the last one: a
//                rollback brought back a hold its owner had released, and
//                the owner re-entered it (not a regression: the same grant)
// and per failover the time until the sentinels agree on the new master and
// the longest stretch without any acquisition (unavailability).
//
//   lockfleet_failover_bench [--failovers 20] [--processes 8] [--locks 1]
//                            [--min-replicas 0] [--hold-ms 5]
// prints one JSON object (the summary) on stdout, progress on stderr.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/redis_client.h"
#include "support/sentinel_group.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

constexpr int kMaxLocks = 1000;

struct Shared {
  std::atomic<int> stop{0};
  std::atomic<long> acquired{0};
  std::atomic<long> errors{0};
  std::atomic<long> overlaps{0};
  std::atomic<long> lost_grants{0};
  std::atomic<long> regressions{0};
  std::atomic<int64_t> last_acquired_ns{0};
  std::atomic<int64_t> max_gap_ns{0};  // since the controller reset it
  std::atomic<long> revived{0};
  struct Lock {
    std::atomic<int> inside{0};
    std::atomic<int64_t> max_fence{0};
    std::atomic<uint64_t> owner{0};  // hash of the owner of max_fence's grant
  } locks[kMaxLocks];
};

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             steady_clock::now().time_since_epoch())
      .count();
}

struct Args {
  int failovers = 20;
  int processes = 8;
  int locks = 1;
  int min_replicas = 0;
  int hold_ms = 5;
};

void Contend(Shared& shared, const Args& args, const std::string& url,
             int seed) {
  RedisOptions ro;
  ro.url = url;
  ro.connect_timeout = milliseconds(500);
  ro.command_timeout = milliseconds(1000);
  LockClientOptions lo;
  lo.min_replicas = args.min_replicas;
  lo.replica_timeout = milliseconds(500);
  lo.default_lease = seconds(5);
  lo.park_cap = milliseconds(50);
  LockClient locks(std::make_shared<RedisClient>(ro), lo);
  std::mt19937 random(seed);
  std::uniform_int_distribution<int> pick(0, args.locks - 1);
  while (shared.stop.load() == 0) {
    const int index = pick(random);
    Shared::Lock& slot = shared.locks[index];
    try {
      AcquireResult got =
          locks.AcquireFor("bench-" + std::to_string(index), seconds(1));
      if (!got) continue;
      if (slot.inside.fetch_add(1) != 0) shared.overlaps.fetch_add(1);
      const int64_t fence = got.lease.fence();
      const uint64_t owner = std::hash<std::string>{}(got.lease.owner());
      const int64_t seen = slot.max_fence.load();
      if (fence == seen && slot.owner.load() == owner) {
        // The same owner's grant again: a rollback brought back a hold it
        // had released, and this acquisition re-entered it (same token, as
        // every hold of one grant). A FencedResource accepts it: same grant.
        shared.revived.fetch_add(1);
      } else if (fence <= seen) {
        shared.regressions.fetch_add(1);
        std::fprintf(stderr, "  regression: bench-%d fence %lld after %lld\n",
                     index, static_cast<long long>(fence),
                     static_cast<long long>(seen));
      } else {
        slot.owner.store(owner);
        slot.max_fence.store(fence);  // one holder at a time (else counted)
      }
      const int64_t now = NowNs();
      const int64_t last = shared.last_acquired_ns.exchange(now);
      int64_t gap = shared.max_gap_ns.load();
      while (now - last > gap &&
             !shared.max_gap_ns.compare_exchange_weak(gap, now - last)) {
      }
      std::this_thread::sleep_for(milliseconds(args.hold_ms));
      slot.inside.fetch_sub(1);
      shared.acquired.fetch_add(1);
      try {
        const ReleaseStatus status = got.lease.Release();
        if (status != ReleaseStatus::kReleased) {
          shared.lost_grants.fetch_add(1);
          std::fprintf(
              stderr, "  lost grant: bench-%d fence %lld (%s)\n", index,
              static_cast<long long>(fence),
              status == ReleaseStatus::kNotHeld ? "not held" : "another owner");
        }
      } catch (const Error&) {
        shared.errors.fetch_add(1);  // frees with its lease
      }
    } catch (const Error&) {
      shared.errors.fetch_add(1);
      std::this_thread::sleep_for(milliseconds(20));
    }
  }
}

int Main(const Args& args) {
  SentinelGroup group({.replicas = 2, .down_after = milliseconds(1000)});
  void* memory = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return 1;
  Shared& shared = *new (memory) Shared();
  std::vector<pid_t> children;
  for (int p = 0; p < args.processes; ++p) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      Contend(shared, args, group.url(), p + 1);
      ::_exit(0);
    }
    children.push_back(pid);
  }

  auto wait_acquisitions = [&](long count, seconds limit) {
    const long start = shared.acquired.load();
    return WaitUntil([&] { return shared.acquired.load() >= start + count; },
                     limit);
  };
  wait_acquisitions(100, seconds(60));
  std::string rounds;
  double sum_elect = 0, sum_gap = 0, max_gap = 0;
  int done = 0;
  for (int i = 0; i < args.failovers; ++i) {
    const bool crash = i % 2 == 1;
    const int old_master = group.MasterIndex();
    shared.max_gap_ns.store(0);
    shared.last_acquired_ns.store(NowNs());
    const auto start = steady_clock::now();
    int new_master = -1;
    if (crash) {
      group.node(old_master).Kill();
      new_master = group.WaitForNewMaster(old_master);
    } else {
      new_master = group.Failover();
    }
    const double elect_ms =
        std::chrono::duration<double, std::milli>(steady_clock::now() - start)
            .count();
    if (new_master < 0) {
      std::fprintf(stderr, "round %d: no new master\n", i + 1);
      break;
    }
    // Recovered: 100 more acquisitions after the new master was named.
    const bool recovered = wait_acquisitions(100, seconds(60));
    const double gap_ms = shared.max_gap_ns.load() / 1e6;
    if (crash) group.node(old_master).Start();
    // Back to a master with two replicas in sync before the next round.
    group.WaitForReplicas(2);
    ++done;
    sum_elect += elect_ms;
    sum_gap += gap_ms;
    max_gap = std::max(max_gap, gap_ms);
    char line[256];
    std::snprintf(line, sizeof line,
                  "%s{\"round\":%d,\"kind\":\"%s\",\"elect_ms\":%.0f,"
                  "\"longest_gap_ms\":%.0f,\"recovered\":%s}",
                  rounds.empty() ? "" : ",", i + 1, crash ? "kill" : "forced",
                  elect_ms, gap_ms, recovered ? "true" : "false");
    rounds += line;
    std::fprintf(stderr,
                 "round %d (%s): new master in %.0f ms, longest gap %.0f ms; "
                 "overlaps %ld, lost grants %ld, regressions %ld, revived "
                 "%ld\n",
                 i + 1, crash ? "kill" : "forced", elect_ms, gap_ms,
                 shared.overlaps.load(), shared.lost_grants.load(),
                 shared.regressions.load(), shared.revived.load());
  }
  shared.stop.store(1);
  for (pid_t pid : children) ::waitpid(pid, nullptr, 0);
  std::printf(
      "{\"processes\":%d,\"locks\":%d,\"min_replicas\":%d,\"hold_ms\":%d,"
      "\"failovers\":%d,\"acquired\":%ld,\"errors\":%ld,\"overlaps\":%ld,"
      "\"lost_grants\":%ld,\"regressions\":%ld,\"revived\":%ld,"
      "\"mean_elect_ms\":%.0f,"
      "\"mean_longest_gap_ms\":%.0f,\"max_longest_gap_ms\":%.0f,"
      "\"rounds\":[%s]}\n",
      args.processes, args.locks, args.min_replicas, args.hold_ms, done,
      shared.acquired.load(), shared.errors.load(), shared.overlaps.load(),
      shared.lost_grants.load(), shared.regressions.load(),
      shared.revived.load(), done ? sum_elect / done : 0,
      done ? sum_gap / done : 0, max_gap, rounds.c_str());
  return done == args.failovers ? 0 : 1;
}

}  // namespace
}  // namespace lockfleet::testing

int main(int argc, char** argv) {
  lockfleet::testing::Args args;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int value = std::atoi(argv[i + 1]);
    if (flag == "--failovers") {
      args.failovers = value;
    } else if (flag == "--processes") {
      args.processes = value;
    } else if (flag == "--locks") {
      args.locks = value;
    } else if (flag == "--min-replicas") {
      args.min_replicas = value;
    } else if (flag == "--hold-ms") {
      args.hold_ms = value;
    } else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (argc % 2 == 0 || args.failovers < 1 || args.processes < 1 ||
      args.locks < 1 || args.locks > lockfleet::testing::kMaxLocks ||
      args.min_replicas < 0 || args.hold_ms < 0) {
    std::fprintf(stderr,
                 "usage: lockfleet_failover_bench [--failovers N] "
                 "[--processes N] [--locks 1..1000] [--min-replicas N] "
                 "[--hold-ms N]\n");
    return 2;
  }
  return lockfleet::testing::Main(args);
}
