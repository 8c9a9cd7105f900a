// The on-call tools for locks, against the deployment's Redis (--config, or
// --redis; see connection_options.h):
//
//   lockfleet locks [--match GLOB | --prefix P] [--limit N] [--json]
//   lockfleet inspect NAME [--json]
//   lockfleet unlock --force NAME [--expect-owner O] [--expect-fence F]
//
// `locks` lists the locks held now (SCAN in batches, never KEYS), most
// waiters first; `inspect` shows one lock in full, its queue included;
// `unlock --force` removes a grant (only the expected one when told which,
// retry-safe) and publishes the force event. Each help text lists the exit
// statuses.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "command.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/redis_client.h"

namespace lockfleet::cli {

struct HeldLocks {
  std::vector<std::pair<std::string, LockInfo>> locks;  // in SCAN order
  bool truncated = false;  // more than `limit` lock keys matched
};

// The locks held now whose names match `glob` (Redis MATCH syntax; "*" for
// all): SCAN over "<key_prefix>:{<glob>}:lock" in batches (never KEYS) and
// Inspect of each key found, up to `limit` keys; keys no lock name could
// make are skipped. SCAN walks the whole keyspace (MATCH filters after), so
// this costs one round trip per 1000 keys plus one per lock. Returns what
// it has as soon as `stopped` (checked between round trips) says so.
// Throws lockfleet Error when Redis fails.
HeldLocks ScanHeldLocks(RedisClient& redis, LockClient& locks,
                        const std::string& key_prefix, const std::string& glob,
                        size_t limit,
                        const std::function<bool()>& stopped = nullptr);

Subcommand AddLocksCommand(CLI::App& parent, HelpFormatter& formatter);
Subcommand AddInspectCommand(CLI::App& parent, HelpFormatter& formatter);
Subcommand AddUnlockCommand(CLI::App& parent, HelpFormatter& formatter);

}  // namespace lockfleet::cli
