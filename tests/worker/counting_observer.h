// A WorkerObserver that counts finished jobs by result (the worker tests').
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "lockfleet/worker/observer.h"

namespace lockfleet::testing {

using worker::JobResult;

class CountingObserver : public worker::WorkerObserver {
 public:
  void OnJob(worker::JobSource, std::string_view, JobResult result,
             Clock::Duration) noexcept override {
    std::lock_guard lock(mu_);
    ++counts_[result];
  }
  int count(JobResult result) {
    std::lock_guard lock(mu_);
    return counts_[result];
  }

  // The last sample of each limit: {in_use, available, waiters}.
  struct LimitSample {
    int64_t in_use = 0, available = 0, waiters = 0;
    bool operator==(const LimitSample&) const = default;
  };
  void OnLimitSampled(std::string_view name, int64_t in_use, int64_t available,
                      int64_t waiters) noexcept override {
    std::lock_guard lock(mu_);
    limits_[std::string(name)] = {in_use, available, waiters};
  }
  void OnLimitUnknown(std::string_view name) noexcept override {
    std::lock_guard lock(mu_);
    limits_.erase(std::string(name));
    ++unknown_;
  }
  int unknown() {
    std::lock_guard lock(mu_);
    return unknown_;
  }
  std::map<std::string, LimitSample> limits() {
    std::lock_guard lock(mu_);
    return limits_;
  }

 private:
  std::mutex mu_;
  std::map<JobResult, int> counts_;
  std::map<std::string, LimitSample> limits_;
  int unknown_ = 0;
};

}  // namespace lockfleet::testing
