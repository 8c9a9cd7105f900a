// `lockfleet latch`: countdown latches from the shell, against the
// deployment's Redis (--config, or --redis; see connection_options.h):
//
//   lockfleet latch set NAME COUNT [--open-ttl D]
//   lockfleet latch count-down NAME [--id ID]
//   lockfleet latch wait NAME [--timeout D]
//   lockfleet latch count NAME
//
// A coordinator sets the count, each piece of work counts down (with its own
// id, a repeated report counts once), and whatever waits for all of them
// runs `lockfleet latch wait NAME && next-step`. With Kafka, the count-down
// that opens the latch publishes an `opened` event that wakes every waiter
// at once; without, a waiter notices within its park cap. See
// lockfleet/lockcore/latch.h and docs/lockcore.md, "Countdown latches".
#pragma once

#include <CLI/CLI.hpp>

#include "command.h"

namespace lockfleet::cli {

Subcommand AddLatchCommand(CLI::App& parent, HelpFormatter& formatter);

}  // namespace lockfleet::cli
