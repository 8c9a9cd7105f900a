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

#include "command.h"

namespace lockfleet::cli {

Subcommand AddLocksCommand(CLI::App& parent, HelpFormatter& formatter);
Subcommand AddInspectCommand(CLI::App& parent, HelpFormatter& formatter);
Subcommand AddUnlockCommand(CLI::App& parent, HelpFormatter& formatter);

}  // namespace lockfleet::cli
