// Chaos scenario 5: a `lockfleet worker` is SIGTERMed or SIGKILLed while it
// runs several jobs, each holding its lock (docs/RELIABILITY.md).
//
// Two workers share a one-partition jobs topic: the one that has the
// partition runs the jobs, the other stands by. The jobs are long `sleep`s
// on locks of their own, interleaved with inventory purchases: the
// purchases after the first long job finish, but their offsets cannot be
// committed past it, so a crash redelivers them too.
//
// Safety is checked independently of the worker's bookkeeping:
//   - the inventory: stock + sold = initial and the sales hash holds exactly
//     the jobs sold, each once (one fenced script does both);
//   - an owner timeline sampled from Redis every few ms by the test: after
//     a SIGKILL no other owner appears on a lock before the dead holder's
//     lease (its PTTL read right after the kill) has run out.
// Liveness: every produced job is done, none dead-lettered, within
// generous bounds; the recovery times are printed (RecordProperty too).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "chaos/worker_fleet.h"
#include "lockfleet/worker/builtin_handlers.h"

namespace lockfleet::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kSlowJobs = 3;    // long jobs in flight at the signal
constexpr int kPurchases = 20;  // 10 finish before the signal, 10 after
constexpr int kProducts = 2;
constexpr int kUnits = 100;

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Samples the owner of each lock from Redis every ~2 ms on its own
// connection; keeps, per lock, when each owner was first and last seen.
class OwnerTimeline {
 public:
  struct Span {
    std::string owner;
    Clock::time_point first;
    Clock::time_point last;
  };

  OwnerTimeline(const std::string& url, std::vector<std::string> locks)
      : redis_(RedisOptions{.url = url}), locks_(std::move(locks)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~OwnerTimeline() { Stop(); }

  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

  std::map<std::string, std::vector<Span>> spans() {
    std::lock_guard lock(mu_);
    return spans_;
  }

 private:
  void Run() {
    while (!stop_) {
      for (const std::string& name : locks_) {
        try {
          const Reply reply = redis_.Execute(
              {"HGET", "lockfleet:{" + name + "}:lock", "owner"});
          const Clock::time_point now = Clock::now();
          const std::string owner =
              reply.type == Reply::Type::kString ? reply.str : "";
          std::lock_guard lock(mu_);
          std::vector<Span>& spans = spans_[name];
          if (spans.empty() || spans.back().owner != owner) {
            spans.push_back({owner, now, now});
          } else {
            spans.back().last = now;
          }
        } catch (const std::exception&) {
          // A slow answer on a loaded machine: just a gap in the samples.
        }
      }
      std::this_thread::sleep_for(milliseconds(2));
    }
  }

  RedisClient redis_;
  std::vector<std::string> locks_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::map<std::string, std::vector<Span>> spans_;
  std::thread thread_;
};

class WorkerChaosTest : public WorkerFleet {
 protected:
  // slow0, 5 purchases, slow1, 5 purchases, slow2, 10 purchases.
  void ProduceMix(int slow_ms) {
    for (int p = 0; p < kProducts; ++p) {
      worker::SeedStock(*redis_, "lockfleet", "product:" + std::to_string(p),
                        kUnits);
    }
    int purchase = 1;
    for (int s = 0; s < kSlowJobs; ++s) {
      const worker::Job slow = Sleep("slow-" + std::to_string(s),
                                     "slow:" + std::to_string(s), slow_ms);
      slow_.push_back(slow);
      jobs_.push_back(slow);
      const int batch = s + 1 < kSlowJobs ? 5 : kPurchases - 10;
      for (int i = 0; i < batch; ++i) {
        purchases_.push_back(Purchase(purchase++, kProducts));
        jobs_.push_back(purchases_.back());
      }
    }
    Produce(jobs_);
  }

  std::vector<std::string> SlowLocks() const {
    std::vector<std::string> locks;
    for (const worker::Job& job : slow_) locks.push_back(job.lock);
    return locks;
  }

  // Waits until one of `workers` holds every slow lock and the 10 purchases
  // before the last slow job are sold; returns that worker's index.
  int WaitForJobsInFlight(std::vector<std::unique_ptr<CliProcess>>& workers,
                          const std::vector<std::string>& ids) {
    int holder = -1;
    const bool ready = WaitUntil(
        [&] {
          int sold = 0;
          for (int p = 0; p < kProducts; ++p) {
            sold += static_cast<int>(
                worker::AuditStock(*redis_, "lockfleet",
                                   "product:" + std::to_string(p))
                    .sold);
          }
          if (sold < 10) return false;
          for (size_t w = 0; w < ids.size(); ++w) {
            bool all = true;
            for (const worker::Job& job : slow_) {
              all = all && Owner(job.lock).rfind(ids[w] + "/", 0) == 0;
            }
            if (all) holder = static_cast<int>(w);
          }
          return holder >= 0;
        },
        kChaosLong);
    EXPECT_TRUE(ready) << workers[0]->Stderr() << workers[1]->Stderr();
    return holder;
  }

  // Waits until worker `id` owns one of the slow locks; when it first did,
  // or nullopt if it did not within `bound`.
  std::optional<Clock::time_point> WaitForSlowLockOwnedBy(
      const std::string& id, std::chrono::milliseconds bound = kChaosLong) {
    std::optional<Clock::time_point> owned;
    WaitUntil(
        [&] {
          for (const worker::Job& job : slow_) {
            if (Owner(job.lock).rfind(id + "/", 0) == 0) {
              owned = Clock::now();
              return true;
            }
          }
          return false;
        },
        bound);
    return owned;
  }

  // Waits until every produced job is done; false if not within kChaosLong.
  bool WaitForAllJobsDone() {
    return WaitUntil(
        [&] {
          return std::all_of(jobs_.begin(), jobs_.end(),
                             [&](const worker::Job& job) { return Done(job); });
        },
        kChaosLong);
  }

  // After a takeover: `standby` ran each slow job once, skipped the 10
  // purchases the victim had finished and ran the other ones. Counted just
  // after each job's marker, so waits for the counts.
  void ExpectStandbyRanTheRest(CliProcess& standby) {
    EXPECT_TRUE(WaitUntil(
        [&] { return Jobs(standby, "ok", "sleep") == kSlowJobs; }, kChaosLong))
        << Jobs(standby, "ok", "sleep");
    EXPECT_TRUE(WaitUntil(
        [&] { return Jobs(standby, "duplicate", "inventory.purchase") == 10; },
        kChaosLong))
        << Jobs(standby, "duplicate", "inventory.purchase");
    EXPECT_TRUE(WaitUntil(
        [&] {
          return Jobs(standby, "ok", "inventory.purchase") == kPurchases - 10;
        },
        kChaosLong))
        << Jobs(standby, "ok", "inventory.purchase");
  }

  // Waits until every slow lock is free (released just after each job's
  // done marker); false if not within kChaosLong.
  bool WaitForSlowLocksFree() {
    return WaitUntil(
        [&] {
          return Owner("slow:0") + Owner("slow:1") + Owner("slow:2") == "";
        },
        kChaosLong);
  }

  // The invariants that hold whatever happened: every job done once, the
  // inventory consistent, nothing dead-lettered.
  void ExpectNothingLostNothingDoubled() {
    for (const worker::Job& job : jobs_) EXPECT_TRUE(Done(job)) << job.id;
    int64_t sold = 0;
    std::set<std::string> sales;
    for (int p = 0; p < kProducts; ++p) {
      const std::string product = "product:" + std::to_string(p);
      const worker::StockAudit audit =
          worker::AuditStock(*redis_, "lockfleet", product);
      EXPECT_TRUE(audit.consistent())
          << product << " stock " << audit.stock << " sold " << audit.sold;
      EXPECT_EQ(audit.oversold(), 0);
      sold += audit.sold;
      const Reply keys = redis_->Execute(
          {"HKEYS", FencedResource::KeyOf("lockfleet", product, "sales")});
      for (const Reply& key : keys.elements) {
        EXPECT_TRUE(sales.insert(key.str).second) << key.str;
      }
    }
    EXPECT_EQ(sold, kPurchases);
    std::set<std::string> expected;
    for (const worker::Job& job : purchases_) expected.insert(job.id);
    EXPECT_EQ(sales, expected);
    EXPECT_EQ(DeadLetters(), 0);
  }

  std::vector<worker::Job> jobs_;
  std::vector<worker::Job> slow_;
  std::vector<worker::Job> purchases_;
};

std::string WorkerSection(int threads, const std::string& grace) {
  return "worker:\n  threads: " + std::to_string(threads) +
         "\n  grace_period: " + grace +
         "\n  sources:\n    kafka_jobs: {enabled: true, group: chaos}\n";
}

// SIGKILL with 3 long jobs running, each holding its lock, and 10 finished
// purchases whose offsets were not yet committable: the standby worker gets
// the partition after the rebalance, waits out the dead worker's leases
// (they expire: nobody releases them), runs the 3 long jobs and the 10
// remaining purchases, and skips the 10 finished ones.
TEST_F(WorkerChaosTest, SigkillMidJobRedeliversAfterTheLeaseExpires) {
  const std::string config = WriteConfig(WorkerSection(3, "5s"), "2s");
  const std::vector<std::string> ids{"a", "b"};
  std::vector<std::unique_ptr<CliProcess>> workers;
  for (const std::string& id : ids) workers.push_back(StartWorker(config, id));
  OwnerTimeline timeline(server_.url(), {"slow:0", "slow:1", "slow:2"});
  ProduceMix(/*slow_ms=*/5000);
  const int victim = WaitForJobsInFlight(workers, ids);
  ASSERT_GE(victim, 0);
  const int survivor = 1 - victim;
  const std::string dead_prefix = ids[victim] + "/";

  // Kill, then read each lease's remaining time: no one may own the lock
  // before it runs out.
  const Clock::time_point killed = Clock::now();
  workers[victim]->Signal(SIGKILL);
  std::map<std::string, Clock::time_point> expires;
  for (const worker::Job& job : slow_) {
    const Clock::time_point asked = Clock::now();
    const long long pttl =
        redis_->Execute({"PTTL", "lockfleet:{" + job.lock + "}:lock"}).integer;
    ASSERT_GT(pttl, 0) << job.lock << " lost its lease already";
    expires[job.lock] = asked + milliseconds(pttl);
  }
  EXPECT_EQ(workers[victim]->Wait(kChaosLong), 128 + SIGKILL);

  CliProcess& standby = *workers[survivor];
  // Recovery: the standby holds a slow lock (redelivered, lease expired).
  // Bounded at twice the usual wait: the embedded broker's group
  // coordinator, killed-member edge cases included, has once kept the
  // standby out of the group for about a minute on a loaded machine (the
  // time is printed below; safety is checked whatever it is).
  const std::optional<Clock::time_point> recovered =
      WaitForSlowLockOwnedBy(ids[survivor], 2 * kChaosLong);
  ASSERT_TRUE(recovered) << "standby:\n"
                         << standby.Stderr() << "\nkilled worker:\n"
                         << workers[victim]->Stderr();
  ASSERT_TRUE(WaitForAllJobsDone()) << standby.Stderr();
  const Clock::time_point all_done = Clock::now();
  timeline.Stop();

  // Each long job ran to completion once, on the standby; the purchases the
  // victim finished were redelivered and skipped, the others ran once.
  ExpectStandbyRanTheRest(standby);
  ExpectNothingLostNothingDoubled();

  // The timeline: the dead worker's hold ended by expiry, and its token
  // never came back once gone.
  for (const auto& [lock, spans] : timeline.spans()) {
    bool ended = false;  // the dead worker's hold is over
    for (const OwnerTimeline::Span& span : spans) {
      if (span.owner.rfind(dead_prefix, 0) == 0) {
        EXPECT_FALSE(ended) << lock << ": the dead owner came back";
        continue;
      }
      if (span.first < killed) continue;  // before the victim took it
      ended = true;
      if (span.owner.empty()) continue;
      EXPECT_GE(span.first, expires[lock] - milliseconds(2))
          << lock << ": " << span.owner << " got it "
          << Seconds(expires[lock] - span.first)
          << " s before the dead holder's lease ran out";
    }
    EXPECT_TRUE(ended) << lock;
  }
  EXPECT_TRUE(WaitForSlowLocksFree());

  const double recovery = Seconds(*recovered - killed);
  const double total = Seconds(all_done - killed);
  std::cout << "[chaos] SIGKILL mid-job: " << kSlowJobs
            << " long jobs + 20 purchases redelivered; first lock re-taken "
               "after "
            << recovery << " s, all jobs done " << total
            << " s after the kill (long jobs run 5 s)\n";
  RecordProperty("recovery_s", std::to_string(recovery));
  RecordProperty("all_done_s", std::to_string(total));
  EXPECT_LT(recovery, 45.0);

  standby.Signal(SIGTERM);
  EXPECT_EQ(standby.Wait(kChaosLong), 0) << standby.Stderr();
}

// SIGTERM with 3 long jobs running and a grace period shorter than they
// take: the worker cancels them, releases their locks (the lease is 20 s, so
// a free lock right after the exit was released, not expired), hands them
// back and exits 0; the standby runs each once; nothing is lost.
TEST_F(WorkerChaosTest, SigtermMidJobHandsBackAndReleasesTheLocks) {
  const std::string config = WriteConfig(WorkerSection(3, "1s"), "20s");
  const std::vector<std::string> ids{"a", "b"};
  std::vector<std::unique_ptr<CliProcess>> workers;
  for (const std::string& id : ids) workers.push_back(StartWorker(config, id));
  ProduceMix(/*slow_ms=*/8000);
  const int victim = WaitForJobsInFlight(workers, ids);
  ASSERT_GE(victim, 0);
  const int survivor = 1 - victim;
  const std::string dead_prefix = ids[victim] + "/";

  const Clock::time_point signalled = Clock::now();
  workers[victim]->Signal(SIGTERM);
  EXPECT_EQ(workers[victim]->Wait(kChaosLong), 0) << workers[victim]->Stderr();
  const Clock::time_point exited = Clock::now();
  for (const worker::Job& job : slow_) {
    EXPECT_NE(Owner(job.lock).rfind(dead_prefix, 0), 0u)
        << job.lock << " still held by the stopped worker";
    EXPECT_FALSE(Done(job)) << job.id << " was cancelled, not finished";
  }

  CliProcess& standby = *workers[survivor];
  const std::optional<Clock::time_point> taken_over =
      WaitForSlowLockOwnedBy(ids[survivor]);
  ASSERT_TRUE(taken_over) << standby.Stderr();
  ASSERT_TRUE(WaitForAllJobsDone()) << standby.Stderr();
  const Clock::time_point all_done = Clock::now();

  ExpectStandbyRanTheRest(standby);
  ExpectNothingLostNothingDoubled();
  EXPECT_TRUE(WaitForSlowLocksFree());

  const double shutdown = Seconds(exited - signalled);
  const double handback = Seconds(*taken_over - signalled);
  std::cout << "[chaos] SIGTERM mid-job (grace 1 s): exited 0 after "
            << shutdown << " s, locks released; standby re-took a long job "
            << handback << " s after the signal; all done "
            << Seconds(all_done - signalled)
            << " s after it (long jobs run 8 s)\n";
  RecordProperty("shutdown_s", std::to_string(shutdown));
  RecordProperty("handback_s", std::to_string(handback));
  // Grace 1 s plus commit, leave, flush: far under the 30 s backstop.
  EXPECT_LT(shutdown, 25.0);

  standby.Signal(SIGTERM);
  EXPECT_EQ(standby.Wait(kChaosLong), 0) << standby.Stderr();
}

}  // namespace
}  // namespace lockfleet::testing
