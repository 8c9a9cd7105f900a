#include "kill_escalation.h"

#include <csignal>

#include "lock_process_group.h"

namespace lockfleet::cli {

KillEscalation::KillEscalation(std::chrono::milliseconds grace)
    : grace_(grace) {}

KillEscalation::~KillEscalation() { Untrack(); }

void KillEscalation::Track(pid_t pgid) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pgid_ = pgid;
    deadline_.reset();
  }
  // No thread when disabled: Arm() is then a no-op.
  if (grace_ > std::chrono::milliseconds(0)) {
    thread_ = std::thread([this] { Loop(); });
  }
}

void KillEscalation::Arm() {
  std::lock_guard<std::mutex> lock(mu_);
  if (grace_ <= std::chrono::milliseconds(0) || pgid_ <= 0 || deadline_) {
    return;
  }
  deadline_ = std::chrono::steady_clock::now() + grace_;
  changed_.notify_all();
}

void KillEscalation::Untrack() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pgid_ = 0;
    changed_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

bool KillEscalation::killed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return killed_;
}

size_t KillEscalation::killed_processes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return killed_processes_;
}

void KillEscalation::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (pgid_ > 0) {
    if (!deadline_) {
      changed_.wait(lock);
    } else if (std::chrono::steady_clock::now() < *deadline_) {
      changed_.wait_until(lock, *deadline_);
    } else {
      // pgid_ is still ours: Untrack() (which runs before the leader is
      // reaped) has not cleared it. Count first: a zombie leader is not a
      // process to report as killed.
      const size_t live = LiveProcessesInGroup(pgid_).size();
      if (live > 0) {
        ::kill(-pgid_, SIGKILL);
        killed_ = true;
        killed_processes_ = live;
      }
      return;
    }
  }
}

}  // namespace lockfleet::cli
