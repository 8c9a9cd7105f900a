// Running `lockfleet lock` once its command line is validated: acquire the
// lock (or, with several NAMEs, all of them: a multi-lock, see
// lockfleet/lockcore/multi_lock.h; with --read or --write, the read-write
// lock NAME in that mode, see lockfleet/lockcore/rwlock.h), run COMMAND under
// it while the watchdog renews the lease(s), release.
//
// Several threads meet here: the main thread (acquire, spawn, waitpid,
// release), the signal watcher (SIGINT/SIGTERM/SIGHUP cancel the wait, or are
// forwarded to COMMAND's process group), the lease watchdog (a lost lock
// sends the group SIGTERM), the kill escalation timer (SIGKILL for the group
// when it outlives --kill-after after being asked to stop) and, with Kafka,
// the notifier's consumer (wakes the waiting main thread on an unlock event).
//
// No process of COMMAND's tree outlives the lock (see lock_process_group.h):
// COMMAND leads its own process group and every signal goes to the group;
// when COMMAND exits, what it left in the group is stopped before the lock
// is released; if lockfleet dies, PR_SET_PDEATHSIG kills COMMAND and a guard
// process kills the group. Processes that leave the group (setsid, as
// daemons do) are out of reach.
//
// Terminal: when lockfleet runs in the foreground of the terminal on stdin,
// COMMAND's group is made the foreground group, so COMMAND can read the
// terminal and Ctrl-C reaches it once, from the terminal, and not lockfleet;
// Ctrl-Z stops COMMAND and then lockfleet. Otherwise a Ctrl-C reaches
// lockfleet only, which forwards it once.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "command.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/redis_client.h"
#include "lockfleet/lockcore/rwlock.h"
#include "lockfleet/notifier/kafka_notifier.h"

namespace lockfleet::cli {

// `lockfleet semaphore`: the permits to take instead of locks.
struct SemaphoreRequest {
  // The semaphore's permits (SetPermits); nullopt: it must exist.
  std::optional<int64_t> permits;
  int64_t take = 1;  // 1..kMaxSemaphorePermits
};

// What the command line (and --config) asked for, validated.
struct LockRequest {
  // The locks, as given: at least one, none empty, no two the same, at most
  // kMaxMultiLockNames. One name is an ordinary lock; several are taken
  // all-or-nothing (in sorted order, whatever order they were given in).
  std::vector<std::string> names;
  std::vector<std::string> command;
  std::optional<std::chrono::milliseconds> wait;  // nullopt: no limit
  RedisOptions redis;
  // Where redis.url came from, for messages: "--redis", "$LOCKFLEET_REDIS",
  // "FILE: redis.url" or "default Redis URL".
  std::string redis_source;
  // The lock client's settings: key prefix, lease, park cap, windows and
  // fairness (the publisher is set when Kafka starts).
  LockClientOptions locks;
  // Unlock events; nullopt: no Kafka. event_keys is a SECRET: never print
  // them.
  std::optional<notifier::KafkaOptions> kafka;
  // Where kafka's bootstrap came from: "--kafka", "$LOCKFLEET_KAFKA" or
  // "FILE: kafka".
  std::string kafka_source;
  // SIGKILL COMMAND's group this long after asking it to stop; 0: never.
  std::chrono::milliseconds kill_after{10000};
  bool verbose = false;  // report waiting and acquiring on stderr
  // Set: `lockfleet semaphore` — names holds the semaphore's name (one),
  // and COMMAND runs under its permits instead of a lock.
  std::optional<SemaphoreRequest> semaphore;
  // Set: `lockfleet lock --read|--write` — names holds one name, and COMMAND
  // runs under the read-write lock of that name, in this mode, instead of
  // the plain lock.
  std::optional<RwMode> rw_mode;
};

// Runs `request` and returns the exit status documented in `lockfleet lock
// --help`. Every failure is reported as one "lockfleet: ..." line on stderr;
// nothing throws except a lockfleet bug. Handles context.signals while it
// runs.
int RunLock(const LockRequest& request, const Context& context);

}  // namespace lockfleet::cli
