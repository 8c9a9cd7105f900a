// `lockfleet jobs dead list|show|retry|purge`: the dead-letter list
// (jobs_dead_letters.h) for the on-call engineer — what failed and why, the
// whole record, running a job again through the jobs topic, and clearing
// entries that were dealt with.
#pragma once

#include <vector>

#include "command.h"

namespace lockfleet::cli {

// Declares `dead` and its four subcommands under `jobs`; one Subcommand for
// each of the four.
std::vector<Subcommand> AddDeadCommands(CLI::App& jobs,
                                        HelpFormatter& formatter);

}  // namespace lockfleet::cli
