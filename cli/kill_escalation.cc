#include "kill_escalation.h"

#include <csignal>

namespace lockfleet::cli {

KillEscalation::KillEscalation(std::chrono::milliseconds grace)
    : grace_(grace) {}

KillEscalation::~KillEscalation() { Untrack(); }

void KillEscalation::Track(pid_t pid) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pid_ = pid;
    deadline_.reset();
  }
  // No thread when disabled: Arm() is then a no-op.
  if (grace_ > std::chrono::milliseconds(0)) {
    thread_ = std::thread([this] { Loop(); });
  }
}

void KillEscalation::Arm() {
  std::lock_guard<std::mutex> lock(mu_);
  if (grace_ <= std::chrono::milliseconds(0) || pid_ <= 0 || deadline_) {
    return;
  }
  deadline_ = std::chrono::steady_clock::now() + grace_;
  changed_.notify_all();
}

void KillEscalation::Untrack() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    pid_ = 0;
    changed_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

bool KillEscalation::killed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return killed_;
}

void KillEscalation::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (pid_ > 0) {
    if (!deadline_) {
      changed_.wait(lock);
    } else if (std::chrono::steady_clock::now() < *deadline_) {
      changed_.wait_until(lock, *deadline_);
    } else {
      // pid_ is still ours: Untrack() (which runs before the reap) has not
      // cleared it.
      ::kill(pid_, SIGKILL);
      killed_ = true;
      return;
    }
  }
}

}  // namespace lockfleet::cli
