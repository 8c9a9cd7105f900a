// lockfleet_bench_hoard: one process takes N distinct locks, holds them all
// while the watchdog renews them, then releases them (bench/hoard.md).
//
//   lockfleet_bench_hoard --redis URL [--locks N] [--lease-ms L]
//                         [--hold-s S] [--threads T]
//
// Prints one JSON object: the acquisition and release rates of each tenth
// of the locks (a cost that grows with the number already held shows as
// falling rates), the renewals and lost leases of the hold, the smallest
// remaining TTL seen on any lock key during it (renewals on time keep it
// near lease - lease/3), the round trips and the process's memory.
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/redis_client.h"

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;
using lockfleet::AcquireStatus;
using lockfleet::Lease;
using lockfleet::LockClient;
using lockfleet::RedisClient;
using lockfleet::ReleaseStatus;

constexpr int kSlices = 10;

struct Args {
  std::string redis;
  int locks = 100'000;
  int lease_ms = 30'000;
  int hold_s = 25;
  int threads = 1;
};

std::string Name(int i) { return "hoard:" + std::to_string(i); }

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// CPU seconds (user + system) this process used so far, all threads.
double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto s = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return s(usage.ru_utime) + s(usage.ru_stime);
}

long ResidentKiB() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

// The end of the s-th tenth of [0, n): the count done when it is done.
int Boundary(int s, int n) {
  return (s + 1) * static_cast<long long>(n) / kSlices;
}

// Runs `op(i)` for i in [0, n) on `threads` threads, each taking the next
// index, and returns the rate (per second) of each tenth, in the order of
// completion: a tenth ends when its last operation is done.
template <typename Op>
std::vector<double> Timed(int n, int threads, Op op, Clock::time_point* end) {
  std::atomic<int> next{0};
  std::atomic<int> done{0};
  // Each count is reached by exactly one thread: no two write one mark.
  std::vector<Clock::time_point> marks(kSlices);
  const Clock::time_point start = Clock::now();
  auto run = [&] {
    for (int i = next++; i < n; i = next++) {
      op(i);
      const int finished = ++done;
      // The only tenth that can end at `finished` (n >= kSlices).
      const int slice =
          static_cast<int>(
              (static_cast<long long>(finished) * kSlices + n - 1) / n) -
          1;
      if (slice >= 0 && Boundary(slice, n) == finished)
        marks[slice] = Clock::now();
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(run);
  run();
  for (auto& t : pool) t.join();
  *end = Clock::now();
  std::vector<double> rates;
  Clock::time_point from = start;
  for (int s = 0; s < kSlices; ++s) {
    const int size = Boundary(s, n) - (s == 0 ? 0 : Boundary(s - 1, n));
    rates.push_back(size / std::max(Seconds(marks[s] - from), 1e-9));
    from = marks[s];
  }
  return rates;
}

// The smallest PTTL (ms) of the n lock keys, read in pipelined chunks; -2
// (no key) or -1 (no expiry) count as 0: the lock is gone or wrong.
long long MinTtlMs(RedisClient& redis, int n) {
  long long least = -1;
  constexpr int kChunk = 1000;
  for (int from = 0; from < n; from += kChunk) {
    std::vector<lockfleet::Command> commands;
    for (int i = from; i < std::min(n, from + kChunk); ++i)
      commands.push_back({"PTTL", "lockfleet:{" + Name(i) + "}:lock"});
    for (const lockfleet::Reply& r : redis.Pipeline(commands)) {
      const long long ttl = std::max<long long>(r.integer, 0);
      if (least < 0 || ttl < least) least = ttl;
    }
  }
  return least;
}

json Summary(const std::vector<double>& rates) {
  return {{"per_tenth", rates},
          {"min", *std::min_element(rates.begin(), rates.end())},
          {"last_tenth", rates.back()}};
}

int Run(const Args& args) {
  auto redis = std::make_shared<RedisClient>(
      lockfleet::RedisOptions{.url = args.redis, .pool_size = 8});
  const std::chrono::milliseconds lease(args.lease_ms);
  LockClient client(redis, {.default_lease = lease});
  std::vector<Lease> leases(args.locks);
  std::atomic<int> refused{0};

  const uint64_t trips0 = redis->round_trips();
  double cpu = CpuSeconds();
  Clock::time_point start = Clock::now(), end;
  std::vector<double> acquire_rates = Timed(
      args.locks, args.threads,
      [&](int i) {
        lockfleet::AcquireResult r = client.TryAcquire(Name(i));
        if (r.status != AcquireStatus::kAcquired) ++refused;
        leases[i] = std::move(r.lease);
      },
      &end);
  const double acquire_s = Seconds(end - start);
  const double acquire_cpu = CpuSeconds() - cpu;
  // Renewals under way while acquiring (once that takes over lease/3) are
  // in the acquisition's round trips and CPU: reported apart.
  const uint64_t acquire_renewals = client.stats().renewals;
  const uint64_t acquire_trips = redis->round_trips() - trips0;
  const long rss_holding = ResidentKiB();

  // The hold: sample every lock's TTL every lease/3 (and at the end).
  const Clock::time_point hold_end =
      Clock::now() + std::chrono::seconds(args.hold_s);
  long long min_ttl = MinTtlMs(*redis, args.locks);
  int samples = 1;
  while (Clock::now() < hold_end) {
    std::this_thread::sleep_until(std::min(hold_end, Clock::now() + lease / 3));
    min_ttl = std::min(min_ttl, MinTtlMs(*redis, args.locks));
    ++samples;
  }
  const lockfleet::LockStats held = client.stats();
  int lost = 0;
  for (const Lease& l : leases) lost += l.lost() ? 1 : 0;

  std::atomic<int> not_released{0};
  const uint64_t trips1 = redis->round_trips();
  cpu = CpuSeconds();
  start = Clock::now();
  std::vector<double> release_rates = Timed(
      args.locks, args.threads,
      [&](int i) {
        if (leases[i].Release() != ReleaseStatus::kReleased) ++not_released;
      },
      &end);
  const double release_s = Seconds(end - start);
  const double release_cpu = CpuSeconds() - cpu;

  json out = {
      {"locks", args.locks},
      {"threads", args.threads},
      {"lease_ms", args.lease_ms},
      {"hold_s", args.hold_s},
      {"acquire",
       {{"seconds", acquire_s},
        {"per_second", args.locks / acquire_s},
        {"refused", refused.load()},
        {"cpu_us_each", acquire_cpu * 1e6 / args.locks},
        {"round_trips", acquire_trips},
        {"renewals_meanwhile", acquire_renewals},
        {"rates", Summary(acquire_rates)}}},
      {"hold",
       {{"renewals", held.renewals - acquire_renewals},
        {"renewal_failures", held.renewal_failures},
        {"leases_lost", held.leases_lost},
        {"lost_leases_seen", lost},
        {"ttl_samples", samples},
        {"min_ttl_ms", min_ttl},
        {"min_ttl_of_lease", static_cast<double>(min_ttl) / args.lease_ms}}},
      {"release",
       {{"seconds", release_s},
        {"per_second", args.locks / release_s},
        {"not_released", not_released.load()},
        {"cpu_us_each", release_cpu * 1e6 / args.locks},
        {"round_trips", redis->round_trips() - trips1},
        {"rates", Summary(release_rates)}}},
      {"rss_kib_holding", rss_holding},
  };
  std::cout << out.dump() << "\n";
  const bool ok =
      refused == 0 && lost == 0 && held.leases_lost == 0 && not_released == 0;
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "One process takes N distinct locks, holds them, releases them."};
  Args args;
  app.add_option("--redis", args.redis, "Redis URL")->required();
  app.add_option("--locks", args.locks, "distinct locks")
      ->check(CLI::Range(10, 10'000'000));
  app.add_option("--lease-ms", args.lease_ms, "watchdog lease")
      ->check(CLI::Range(1000, 3'600'000));
  app.add_option("--hold-s", args.hold_s, "how long all are held")
      ->check(CLI::Range(0, 3600));
  app.add_option("--threads", args.threads, "acquiring threads")
      ->check(CLI::Range(1, 64));
  CLI11_PARSE(app, argc, argv);
  try {
    return Run(args);
  } catch (const std::exception& e) {
    std::cerr << "lockfleet_bench_hoard: " << e.what() << "\n";
    return 69;
  }
}
