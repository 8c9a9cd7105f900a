// TimedMutex: a mutex whose lock can wait until a deadline, for
// std::unique_lock(mutex, deadline). Internal.
//
// Not std::timed_mutex: libstdc++ 12 implements its try_lock_until on
// pthread_mutex_clocklock, which GCC 12's ThreadSanitizer does not
// intercept, so every unlock after a timed lock is reported as the unlock
// of an unlocked mutex and the sanitizer builds fail. A mutex, a flag and a
// condition variable say the same, and every sanitizer sees all of it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace lockfleet::internal {

class TimedMutex {
 public:
  void lock() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return !locked_; });
    locked_ = true;
  }
  bool try_lock() {
    std::lock_guard lock(mu_);
    if (locked_) return false;
    locked_ = true;
    return true;
  }
  template <typename Clock, typename Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& until) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_until(lock, until, [&] { return !locked_; })) return false;
    locked_ = true;
    return true;
  }
  void unlock() {
    {
      std::lock_guard lock(mu_);
      locked_ = false;
    }
    cv_.notify_one();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool locked_ = false;  // guarded by mu_
};

}  // namespace lockfleet::internal
