// Running `lockfleet lock` once its command line is validated: acquire the
// lock, run COMMAND under it while the watchdog renews the lease, release.
//
// Three threads meet here: the main thread (acquire, spawn, waitpid,
// release), the signal watcher (SIGINT/SIGTERM/SIGHUP cancel the wait, or are
// forwarded to COMMAND) and the lease watchdog (a lost lock sends COMMAND
// SIGTERM). A Ctrl-C at a terminal reaches COMMAND directly as well, since it
// shares lockfleet's process group; COMMAND then sees SIGINT twice.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "command.h"

namespace lockfleet::cli {

// What the command line asked for, validated.
struct LockRequest {
  std::string name;
  std::vector<std::string> command;
  std::optional<std::chrono::milliseconds> wait;   // nullopt: no limit
  std::optional<std::chrono::milliseconds> lease;  // nullopt: the default
  std::string redis_url;
  std::string redis_url_source;  // "--redis" or "$LOCKFLEET_REDIS"
};

// Runs `request` and returns the exit status documented in `lockfleet lock
// --help`. Every failure is reported as one "lockfleet: ..." line on stderr;
// nothing throws except a lockfleet bug. Handles context.signals while it
// runs.
int RunLock(const LockRequest& request, const Context& context);

}  // namespace lockfleet::cli
