// The contention harness of the fault scenarios (3: Kafka broker down or
// frozen, 4: Redis restarted, stalled or its connections killed).
//
// A FaultNode stands for one lockfleet process, wired exactly as
// `lockfleet worker` wires one (cli/fleet.cc): its own RedisClient (pool),
// its own LockClient (watchdog, wait table) and, with Kafka, its own
// KafkaNotifier (one producer and one broadcast consumer) as the client's
// publisher and subscriber.
//
// Contention runs a few threads per node that loop: acquire one of a few
// lock names (timed wait) -> fenced write (INCR of a counter through
// FencedResource) -> hold about 1 ms -> release. Each thread records the
// interval in which it believed it held the lock — from AcquireFor's return
// to just before Release — with its fencing token. Check() then verifies
// safety independently of the library's own bookkeeping:
//   - no two intervals of one lock name overlap (steady clock, one process);
//     with a read-write lock (Primitive::kReadWrite) no write overlaps any
//     other hold, with a semaphore (kSemaphore) no more holds overlap than
//     it has permits;
//   - fencing tokens strictly increase in the order the intervals occurred
//     (except for an owner re-entering its own grant, see regrants); for a
//     read-write lock, the writes' tokens (a semaphore has none);
//   - the fenced counter equals the writes the resource accepted (give or
//     take writes whose reply was lost to the fault), and no write from a
//     holder whose lease was not lost was ever rejected.
// Errors thrown to the callers are counted by ErrorCode name; the observer
// counts wake-ups by cause and the library's own errors by code.
//
// Thread-safety: Contention's counters may be read from any thread while it
// runs; Start/Stop/Check belong to the test thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "lockfleet/lockcore/fenced_resource.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/observer.h"
#include "lockfleet/lockcore/redis_client.h"
#include "lockfleet/notifier/kafka_notifier.h"

namespace lockfleet::testing {

int64_t SteadyNs();

// Resident set size of this process, in KiB (VmRSS), or 0 if unknown.
long RssKib();

// Counts what a LockObserver sees. Thread-safe.
class CountingObserver final : public LockObserver {
 public:
  void OnWakeup(std::string_view name, WakeCause cause) noexcept override;
  void OnLeaseLost(std::string_view name) noexcept override;
  // A read-write hold's or a permit set's lease lost: counted as leases.
  void OnRwLost(std::string_view name, RwMode mode) noexcept override;
  void OnPermitsLost(std::string_view name) noexcept override;
  void OnError(ErrorCode code) noexcept override;

  uint64_t wakeups(WakeCause cause) const;
  uint64_t leases_lost() const { return leases_lost_.load(); }
  std::map<std::string, uint64_t> errors() const;

 private:
  std::atomic<uint64_t> wake_local_{0}, wake_event_{0}, wake_bound_{0},
      wake_spin_{0};
  std::atomic<uint64_t> leases_lost_{0};
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> errors_;  // guarded by mu_
};

struct NodeConfig {
  std::string redis_url;
  std::string bootstrap;  // empty: no Kafka
  // Production defaults except the lease: short, so that a lock orphaned by
  // a release that failed during a fault frees within a test's patience.
  std::chrono::milliseconds lease{3000};
  std::chrono::milliseconds command_timeout{2000};  // RedisOptions default
  int kafka_queue_max_messages = 100000;            // KafkaOptions default
  std::chrono::milliseconds kafka_message_timeout{5000};
  // The queue head's spinning (LockClientOptions default); 0: off, for the
  // tests that count Kafka's wake-ups.
  std::chrono::milliseconds spin_max_hold = LockClientOptions{}.spin_max_hold;
};

// One simulated lockfleet process.
class FaultNode {
 public:
  explicit FaultNode(const NodeConfig& config);
  // Unsubscribes the client from the notifier, then destroys both.
  ~FaultNode();
  FaultNode(const FaultNode&) = delete;
  FaultNode& operator=(const FaultNode&) = delete;

  LockClient& locks() { return *locks_; }
  const std::shared_ptr<RedisClient>& redis() { return redis_; }
  notifier::KafkaNotifier* notifier() { return notifier_.get(); }
  CountingObserver& observer() { return *observer_; }

 private:
  std::shared_ptr<RedisClient> redis_;
  std::shared_ptr<notifier::KafkaNotifier> notifier_;
  std::shared_ptr<CountingObserver> observer_;
  std::unique_ptr<LockClient> locks_;
};

struct HoldInterval {
  int lock = 0;
  // How much of the lock it took: 1 (a lock, a read, a permit) or
  // kWriteWeight (a write of a read-write lock: excludes everyone).
  int64_t weight = 1;
  int node = 0;
  int thread = 0;
  int64_t fence = 0;
  int64_t acquired_ns = 0;  // AcquireFor returned
  int64_t released_ns = 0;  // just before Release was called
  bool lost = false;        // lease.lost() at the end of the interval
  // A multi-lock's hold (Primitive::kMultiLock): its second lock, -1 if
  // none, and that lock's token; recorded as an interval of its own.
  int second_lock = -1;
  int64_t second_fence = 0;
};

struct SafetyReport {
  uint64_t intervals = 0;
  // The most holds of one name seen at once: 1 for a lock; more for reads
  // and permits, which shows the check had something to check.
  uint64_t max_concurrent = 0;
  // A holder beside others it excludes: two holders of a lock, a write
  // beside anyone, more holders of a semaphore than its permits.
  uint64_t overlaps = 0;
  // A later grant (lock or write) with a token not greater.
  uint64_t fence_regressions = 0;
  // The same owner re-entering its own grant (same token) after its release
  // failed: allowed, counted.
  uint64_t regrants = 0;
  uint64_t rejected_writes = 0;     // fenced writes refused (any holder)
  uint64_t rejected_current = 0;    // ... from a holder whose lease was valid
  uint64_t accepted_writes = 0;     // fenced writes the resource accepted
  uint64_t uncertain_writes = 0;    // fenced writes that threw (fault)
  int64_t counter_total = 0;        // the counters' values, summed
  bool counter_consistent = false;  // accepted <= total <= accepted+uncertain
  std::string detail;               // the first problems found, for messages
};

// What Contention's threads take.
enum class Primitive {
  kLock,       // LockClient::AcquireFor, a fenced write per hold
  kReadWrite,  // ReadWriteLock: 1 in 4 a write (fenced write), else a read
  kSemaphore,  // Semaphore of Options::permits permits, 1 per hold
  // A multi-lock (AcquireAllFor) of lock i and lock i + 1 (mod locks),
  // named in that order, a fenced write on each: one hold interval per lock
  kMultiLock,
};

// A write's weight in HoldInterval: more than all readers together.
inline constexpr int64_t kWriteWeight = int64_t{1} << 32;

class Contention {
 public:
  struct Options {
    Primitive primitive = Primitive::kLock;
    int permits = 2;  // kSemaphore: the permits of each semaphore
    int threads_per_node = 3;
    int locks = 2;
    std::chrono::microseconds hold{1000};
    std::chrono::milliseconds wait{10000};  // AcquireFor's bound
    std::string prefix = "chaos";           // lock names: prefix:<i>
  };
  // The most weight one name may have out at once: 1 for a lock, the
  // permits for a semaphore, kWriteWeight for a read-write lock (a write
  // alone, or any number of reads).
  int64_t Capacity() const;

  Contention(std::vector<FaultNode*> nodes, Options options);
  // Stops the threads if still running.
  ~Contention();
  Contention(const Contention&) = delete;
  Contention& operator=(const Contention&) = delete;

  void Start();
  // Cancels waits, joins every thread.
  void Stop();

  // Completed hold intervals so far (acquired and released).
  uint64_t acquisitions() const { return acquisitions_.load(); }
  uint64_t acquisitions(int node) const { return per_node_[node].load(); }
  uint64_t timeouts() const { return timeouts_.load(); }
  uint64_t release_failures() const { return release_failures_.load(); }
  // Errors thrown to the contending threads, by ErrorCode name.
  std::map<std::string, uint64_t> errors() const;
  uint64_t error_count() const;
  // SteadyNs() of the last completed acquisition, 0 if none.
  int64_t last_acquired_ns() const { return last_acquired_ns_.load(); }

  // After Stop(): checks safety; `redis` reads the fenced counters.
  SafetyReport Check(RedisClient& redis) const;
  std::string LockName(int lock) const;

 private:
  void Loop(int node, int thread, std::stop_token stop);
  // One hold of `lock` (acquire, fenced write if it has a token to write
  // with, hold, release); false when nothing was granted.
  bool HoldOnce(int node, int lock, bool write, std::stop_token stop,
                HoldInterval& interval);
  // The fenced INCR of a hold with token `fence`.
  void FencedWrite(int node, int lock, int64_t fence, bool lost_now);
  void CountError(ErrorCode code);

  std::vector<FaultNode*> nodes_;
  Options options_;
  std::vector<std::vector<std::unique_ptr<FencedResource>>> resources_;
  std::stop_source stop_;
  std::vector<std::thread> threads_;

  std::atomic<uint64_t> acquisitions_{0}, timeouts_{0}, release_failures_{0};
  std::atomic<uint64_t> accepted_{0}, rejected_{0}, rejected_current_{0},
      uncertain_{0};
  std::atomic<int64_t> last_acquired_ns_{0};
  std::unique_ptr<std::atomic<uint64_t>[]> per_node_;
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> errors_;  // guarded by mu_
  std::vector<HoldInterval> intervals_;     // guarded by mu_
};

// The holds of one name at once that a run of `options` under contention
// is expected to reach: 1 for a lock, 2 for a read-write lock (reads
// together), the permits for a semaphore. A run that never reached it did
// not test what its checker checks.
uint64_t SharedHoldsExpected(const Contention::Options& options);

// The common set-up of the fault scenarios: `count` FaultNodes wired from
// one NodeConfig and, once started, the Contention among them. Destruction
// stops the contention before the nodes go (its threads use them).
class ContendingNodes {
 public:
  ContendingNodes(int count, const NodeConfig& config);
  ContendingNodes(const ContendingNodes&) = delete;
  ContendingNodes& operator=(const ContendingNodes&) = delete;

  const std::vector<FaultNode*>& nodes() const { return nodes_; }

  // Waits for each node's notifier (if any) to be ready, up to `timeout`
  // each; false as soon as one is not.
  bool WaitUntilReady(std::chrono::milliseconds timeout);

  // Creates and starts the contention. REQUIRES: called once.
  Contention& StartContention(Contention::Options options = {});

 private:
  std::vector<std::unique_ptr<FaultNode>> owned_;
  std::vector<FaultNode*> nodes_;
  std::unique_ptr<Contention> contention_;  // declared last: destroyed first
};

// Sum of one counter over nodes.
uint64_t EventWakeups(const std::vector<FaultNode*>& nodes);
uint64_t BoundWakeups(const std::vector<FaultNode*>& nodes);

// "a=1 b=2" for a report line.
std::string Format(const std::map<std::string, uint64_t>& counts);

// The "safety: ..." line of a scenario's "measured:" output.
std::string FormatSafety(const SafetyReport& report);

}  // namespace lockfleet::testing
