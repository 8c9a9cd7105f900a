// A WorkerObserver that counts finished jobs by result (the worker tests').
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <map>
#include <mutex>
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

 private:
  std::mutex mu_;
  std::map<JobResult, int> counts_;
};

}  // namespace lockfleet::testing
