// `lockfleet jobs status`: how far the fleet is behind on the jobs topic —
// per partition the workers' committed offset, the end of the partition and
// the lag; the consumer group's state and members when the broker says; the
// jobs running now (from the workers' /metrics); the dead letters; the done
// markers.
#pragma once

#include "command.h"

namespace lockfleet::cli {

Subcommand AddStatusCommand(CLI::App& jobs, HelpFormatter& formatter);

}  // namespace lockfleet::cli
