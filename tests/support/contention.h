// Contention: threads that take and release locks while a test changes the
// Redis beneath them (a failover, a migration), checking the lock's promise
// throughout: never two holders of one lock (an in-process count every
// holder raises and lowers) and fencing tokens strictly increasing per lock.
//
// One thread per RedisClient given, each with its own LockClient (its own
// owner token, as separate processes have). Each loops over `names`: waits
// up to `wait` for one, holds it 1 ms, releases it. A failed call is counted
// and tried again after `error_pause`; a release that failed (the master
// down) is retried until it goes through, as an application would — left
// held, that thread's next acquisition would re-enter its own grant.
//
// Thread-safety: the accessors may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/redis_client.h"

namespace lockfleet::testing {

class Contention {
 public:
  struct Options {
    LockClientOptions locks;
    std::chrono::milliseconds wait{1000};
    std::chrono::milliseconds error_pause{50};
  };

  Contention(std::vector<std::shared_ptr<RedisClient>> clients,
             std::vector<std::string> names, Options options)
      : clients_(std::move(clients)),
        names_(std::move(names)),
        options_(std::move(options)) {
    for (size_t i = 0; i < clients_.size(); ++i)
      threads_.emplace_back([this, i] { Run(i); });
  }
  ~Contention() { Stop(); }
  Contention(const Contention&) = delete;
  Contention& operator=(const Contention&) = delete;

  void Stop() {
    stop_.store(true);
    for (std::thread& t : threads_)
      if (t.joinable()) t.join();
  }

  int acquired() const { return acquired_.load(); }
  int errors() const { return errors_.load(); }
  int overlaps() const { return overlaps_.load(); }
  int regressions() const { return regressions_.load(); }
  // The clients' redirects and map reads, summed.
  RedisClient::ClusterStats cluster_stats() const {
    RedisClient::ClusterStats sum;
    for (const auto& c : clients_) {
      const RedisClient::ClusterStats s = c->cluster_stats();
      sum.moved += s.moved;
      sum.asked += s.asked;
      sum.tryagain += s.tryagain;
      sum.refreshes += s.refreshes;
    }
    return sum;
  }

 private:
  void Run(size_t index) {
    LockClient locks(clients_[index], options_.locks);
    for (size_t n = index; !stop_.load(); ++n) {
      const std::string& name = names_[n % names_.size()];
      try {
        AcquireResult got = locks.AcquireFor(name, options_.wait);
        if (!got) continue;
        {
          std::lock_guard lock(mu_);
          if (inside_[name]++ != 0) overlaps_.fetch_add(1);
          if (got.lease.fence() <= fences_[name]) regressions_.fetch_add(1);
          fences_[name] = got.lease.fence();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        {
          std::lock_guard lock(mu_);
          --inside_[name];
        }
        acquired_.fetch_add(1);
        for (int tries = 0; tries < 100 && !stop_.load(); ++tries) {
          try {
            got.lease.Release();
            break;
          } catch (const Error&) {
            errors_.fetch_add(1);
            std::this_thread::sleep_for(options_.error_pause);
          }
        }
      } catch (const Error&) {
        errors_.fetch_add(1);
        std::this_thread::sleep_for(options_.error_pause);
      }
    }
  }

  std::vector<std::shared_ptr<RedisClient>> clients_;
  std::vector<std::string> names_;
  Options options_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::atomic<int> acquired_{0}, errors_{0}, overlaps_{0}, regressions_{0};
  std::mutex mu_;
  std::map<std::string, int> inside_;      // guarded by mu_
  std::map<std::string, int64_t> fences_;  // guarded by mu_
};

}  // namespace lockfleet::testing
