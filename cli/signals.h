// SignalWatcher: SIGINT, SIGTERM and SIGHUP delivered as calls on one thread.
//
// The CLI must react to termination signals by doing real work — cancel a
// lock acquisition, forward the signal to a child, release a lock — none of
// which is async-signal-safe. So main() blocks these signals before any
// thread exists (every thread created later inherits the mask), and one
// dedicated thread takes them with sigwaitinfo() and calls the installed
// handler in ordinary thread context.
//
// Until a handler is installed (and after it is removed) a watched signal
// ends the process at once with exit status 128 + signal, as a shell reports
// a process killed by that signal.
//
// SIGTTOU is blocked too (in every thread) but not handled: `lockfleet lock`
// may hand the terminal to COMMAND's process group and take it back, and a
// process outside the terminal's foreground group may do that, or write to
// the terminal under `stty tostop`, only with SIGTTOU blocked or ignored.
//
// Children must reset the mask themselves (see child_process.h), or they
// would start with these signals blocked.
//
// Thread-safety: SetHandler / ClearHandler may be called from any thread;
// the handler runs on the watcher thread, one signal at a time.
#pragma once

#include <csignal>
#include <functional>
#include <mutex>
#include <thread>

namespace lockfleet::cli {

class SignalWatcher {
 public:
  using Handler = std::function<void(int signal)>;

  // The watched signals: SIGINT, SIGTERM, SIGHUP.
  static sigset_t Signals();

  // Blocks Signals() in the calling thread and starts the watcher thread.
  // REQUIRES: no other thread exists yet (else a signal may be delivered to a
  // thread that does not block it, with its default action).
  SignalWatcher();
  // Stops the watcher thread. The signals stay blocked.
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

  // Replaces the handler. It must be short and must not call SetHandler or
  // ClearHandler itself.
  void SetHandler(Handler handler);

  // Removes the handler. On return the handler is not running and will not
  // be called again, so whatever it refers to may be destroyed.
  void ClearHandler();

 private:
  void Loop();

  std::mutex mu_;
  Handler handler_;        // guarded by mu_; held while it runs
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

// Installs a handler for its lifetime.
class ScopedSignalHandler {
 public:
  ScopedSignalHandler(SignalWatcher& watcher, SignalWatcher::Handler handler)
      : watcher_(watcher) {
    watcher_.SetHandler(std::move(handler));
  }
  ~ScopedSignalHandler() { watcher_.ClearHandler(); }
  ScopedSignalHandler(const ScopedSignalHandler&) = delete;
  ScopedSignalHandler& operator=(const ScopedSignalHandler&) = delete;

 private:
  SignalWatcher& watcher_;
};

}  // namespace lockfleet::cli
