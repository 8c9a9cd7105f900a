#include "signals.h"

#include <pthread.h>

#include <cerrno>
#include <cstdlib>
#include <system_error>

namespace lockfleet::cli {

sigset_t SignalWatcher::Signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  return set;
}

SignalWatcher::SignalWatcher() {
  sigset_t set = Signals();
  // Not waited for, only blocked: see signals.h.
  sigaddset(&set, SIGTTOU);
  if (int rc = pthread_sigmask(SIG_BLOCK, &set, nullptr); rc != 0) {
    throw std::system_error(rc, std::generic_category(), "pthread_sigmask");
  }
  thread_ = std::thread([this] { Loop(); });
}

SignalWatcher::~SignalWatcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  // A thread-directed signal from the watched set wakes sigwaitinfo(); the
  // loop then sees stopping_ and returns.
  pthread_kill(thread_.native_handle(), SIGTERM);
  thread_.join();
}

void SignalWatcher::SetHandler(Handler handler) {
  std::lock_guard<std::mutex> lock(mu_);
  handler_ = std::move(handler);
}

void SignalWatcher::ClearHandler() {
  // Taking mu_ waits for a running handler to return.
  Handler old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    old.swap(handler_);
  }
}

void SignalWatcher::Loop() {
  const sigset_t set = Signals();
  while (true) {
    const int signal = sigwaitinfo(&set, nullptr);
    if (signal < 0) {
      if (errno == EINTR) continue;
      std::abort();  // EINVAL: the set is fixed and valid; cannot happen
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    if (!handler_) std::_Exit(128 + signal);
    handler_(signal);
  }
}

}  // namespace lockfleet::cli
