// Many threads x thousands of acquisitions on a few locks: zero overlapping
// critical sections, checked independently of the library's bookkeeping —
// by in-process occupancy counters and by a Redis-side counter that each
// holder increments on entry and decrements on exit.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <thread>

#include "lock_fixture.h"
#include "support/loopback_bus.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class Stress : public LockTest, public ::testing::WithParamInterface<bool> {};

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

TEST_P(Stress, NoTwoHoldersEver) {
  const bool fair = GetParam();
  const int kClients = 4;  // stand-ins for processes: own pools, own watchdogs
  const int kThreadsPerClient = 4;
  const int kLocks = 3;
  const int kPerThread =
      EnvInt("LOCKFLEET_STRESS_PER_THREAD", 250);  // 4000 in all

  LoopbackBus bus;
  auto bus_ptr =
      std::shared_ptr<UnlockPublisher>(&bus, [](UnlockPublisher*) {});
  std::vector<std::unique_ptr<LockClient>> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.push_back(NewClient(
        {.park_cap = milliseconds(200), .fair = fair, .publisher = bus_ptr}));
    bus.Subscribe(clients.back().get());
  }
  std::atomic<int> occupancy[kLocks] = {};
  std::atomic<int> local_overlaps{0}, redis_overlaps{0}, failures{0};
  std::atomic<long> acquisitions{0};
  std::vector<std::thread> threads;
  auto start = std::chrono::steady_clock::now();
  for (int c = 0; c < kClients; ++c) {
    for (int t = 0; t < kThreadsPerClient; ++t) {
      threads.emplace_back([&, c, t] {
        LockClient& client = *clients[c];
        auto checker = NewRedis(1);
        for (int i = 0; i < kPerThread; ++i) {
          int lock = (i * 7 + t * 3 + c) % kLocks;
          std::string name = "stress:" + std::to_string(lock);
          AcquireResult r = client.AcquireFor(name, seconds(60));
          if (!r) {
            failures.fetch_add(1);
            continue;
          }
          if (occupancy[lock].fetch_add(1) != 0) local_overlaps.fetch_add(1);
          std::string inside = "inside:{" + name + "}";
          if (checker->Execute({"INCR", inside}).integer != 1)
            redis_overlaps.fetch_add(1);
          if (i % 16 == 0) std::this_thread::yield();
          checker->Execute({"DECR", inside});
          occupancy[lock].fetch_sub(1);
          if (r.lease.Release() != ReleaseStatus::kReleased)
            failures.fetch_add(1);
          acquisitions.fetch_add(1);
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  for (auto& c : clients) bus.Unsubscribe(c.get());

  long expected = static_cast<long>(kClients) * kThreadsPerClient * kPerThread;
  EXPECT_EQ(local_overlaps.load(), 0);
  EXPECT_EQ(redis_overlaps.load(), 0);
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(acquisitions.load(), expected);
  uint64_t lost = 0, bound = 0, local = 0, event = 0;
  for (auto& c : clients) {
    LockStats s = c->stats();
    lost += s.leases_lost;
    bound += s.wakeups_bound;
    local += s.wakeups_local;
    event += s.wakeups_event;
  }
  EXPECT_EQ(lost, 0u);
  std::printf(
      "stress (%s): %ld acquisitions, %d clients x %d threads on %d locks, "
      "%.2f s, %.0f acq/s; "
      "wake-ups: local %lu, event %lu, bound %lu\n",
      fair ? "fair" : "barging", acquisitions.load(), kClients,
      kThreadsPerClient, kLocks, secs, acquisitions.load() / secs,
      static_cast<unsigned long>(local), static_cast<unsigned long>(event),
      static_cast<unsigned long>(bound));
}

INSTANTIATE_TEST_SUITE_P(Modes, Stress, ::testing::Values(true, false),
                         [](const auto& info) {
                           return info.param ? "Fair" : "Barging";
                         });

}  // namespace
}  // namespace lockfleet::testing
