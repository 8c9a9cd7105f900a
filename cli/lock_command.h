// `lockfleet lock`: run a command while holding a distributed lock.
//
//   lockfleet lock [--redis URL] [--wait DURATION] [--lease DURATION]
//                  [--kafka BOOTSTRAP] [--kill-after DURATION] [-v]
//                  [--park-cap DURATION] [--read|--write]
//                  NAME [NAME...] -- COMMAND [ARGS...]
//
// flock(1) across machines, like `etcdctl lock` or `consul lock`: waits for
// lock NAME, runs COMMAND with LOCKFLEET_NAME and LOCKFLEET_FENCE in its
// environment while the lease watchdog keeps the lock alive, then releases
// the lock and exits with COMMAND's status. Several NAMEs are taken
// all-or-nothing (a multi-lock; COMMAND gets LOCKFLEET_LOCKS,
// LOCKFLEET_NAME_<i> and LOCKFLEET_FENCE_<i>). With --read or --write (one
// NAME), COMMAND runs under the read-write lock NAME (lockcore's
// ReadWriteLock) in that mode instead: readers side by side, a writer alone
// (COMMAND gets LOCKFLEET_MODE and LOCKFLEET_TOKEN, and LOCKFLEET_FENCE only
// as a writer). With Kafka (--kafka), releases
// wake waiters in other processes at once (see kafka_wakeups.h). The help
// text (LockFooter() in the .cc) lists every exit status.
#pragma once

#include <CLI/CLI.hpp>

#include "command.h"

namespace lockfleet::cli {

// Declares `lock` on `parent` and returns how to run it.
Subcommand AddLockCommand(CLI::App& parent, HelpFormatter& formatter);

// `lockfleet semaphore [OPTIONS] NAME [--permits N] [--take K] -- COMMAND`:
// the same run under K permits of semaphore NAME (lockcore's Semaphore)
// instead of a lock; the same options but --no-fair.
Subcommand AddSemaphoreCommand(CLI::App& parent, HelpFormatter& formatter);

}  // namespace lockfleet::cli
