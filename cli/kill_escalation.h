// KillEscalation: SIGKILL for a child that ignores being asked to stop.
//
// `lockfleet lock` asks COMMAND to stop with SIGTERM when the lock is lost,
// and forwards SIGINT/SIGTERM it receives itself. A COMMAND that ignores
// them would keep running without the lock (or keep lockfleet from exiting),
// so once Arm() is called, a COMMAND still running `grace` later gets SIGKILL,
// as with timeout(1)'s --kill-after. Only COMMAND itself is killed, not
// processes it started.
//
// Lifecycle: Track(pid) after spawning; Arm() any number of times from any
// thread (the first call starts the grace period); Untrack() after the child
// exited and before it is reaped, so the pid is never signalled once it may
// have been reused.
//
// Thread-safety: Arm() and killed() may be called from any thread
// concurrently with everything; Track() and Untrack() from one thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

namespace lockfleet::cli {

class KillEscalation {
 public:
  // `grace` of zero disables escalation: Arm() then does nothing.
  explicit KillEscalation(std::chrono::milliseconds grace);
  // Untrack()s.
  ~KillEscalation();
  KillEscalation(const KillEscalation&) = delete;
  KillEscalation& operator=(const KillEscalation&) = delete;

  // Starts watching child `pid`. REQUIRES: nothing tracked.
  void Track(pid_t pid);

  // Starts the grace period, unless it already started, escalation is
  // disabled or no child is tracked.
  void Arm();

  // Stops watching. On return no signal is being or will be sent.
  // REQUIRES: the child has exited (or the caller accepts a late SIGKILL
  // up to this call).
  void Untrack();

  // Whether SIGKILL was sent.
  bool killed() const;

  std::chrono::milliseconds grace() const { return grace_; }

 private:
  void Loop();

  const std::chrono::milliseconds grace_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  pid_t pid_ = 0;  // guarded by mu_; > 0 while tracked
  std::optional<std::chrono::steady_clock::time_point>
      deadline_;         // guarded by mu_
  bool killed_ = false;  // guarded by mu_
  std::thread thread_;   // runs Loop() while a child is tracked
};

}  // namespace lockfleet::cli
