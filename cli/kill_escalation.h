// KillEscalation: SIGKILL for a process group that ignores being asked to
// stop.
//
// `lockfleet lock` asks COMMAND's process group to stop with SIGTERM when the
// lock is lost, forwards SIGINT/SIGTERM it receives itself, and terminates
// what COMMAND left behind when it exits. Processes that ignore that would
// keep running without the lock (or keep lockfleet from exiting), so once
// Arm() is called, whatever still runs in the group `grace` later gets
// SIGKILL, as with timeout(1)'s --kill-after. The whole group is killed:
// COMMAND and every process it started that did not leave the group.
//
// Lifecycle: Track(pgid) after spawning the group's leader; Arm() any number
// of times from any thread (the first call starts the grace period);
// Untrack() before the leader is reaped, so the group id (the leader's pid)
// is never signalled once it may have been reused.
//
// Thread-safety: Arm(), killed() and killed_processes() may be called from
// any thread concurrently with everything; Track() and Untrack() from one
// thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
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

  // Starts watching the process group `pgid` (its leader is our child).
  // REQUIRES: nothing tracked.
  void Track(pid_t pgid);

  // Starts the grace period, unless it already started, escalation is
  // disabled or no child is tracked.
  void Arm();

  // Stops watching. On return no signal is being or will be sent.
  // REQUIRES: the leader is not reaped yet.
  void Untrack();

  // Whether SIGKILL was sent, and to how many live processes.
  bool killed() const;
  size_t killed_processes() const;

  std::chrono::milliseconds grace() const { return grace_; }

 private:
  void Loop();

  const std::chrono::milliseconds grace_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  pid_t pgid_ = 0;  // guarded by mu_; > 0 while tracked
  std::optional<std::chrono::steady_clock::time_point>
      deadline_;                 // guarded by mu_
  bool killed_ = false;          // guarded by mu_
  size_t killed_processes_ = 0;  // guarded by mu_
  std::thread thread_;           // runs Loop() while a child is tracked
};

}  // namespace lockfleet::cli
