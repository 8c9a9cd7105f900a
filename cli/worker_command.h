// `lockfleet worker --config FILE`: one process of the job-worker fleet.
#pragma once

#include "command.h"

namespace lockfleet::cli {

Subcommand AddWorkerCommand(CLI::App& parent, HelpFormatter& formatter);

}  // namespace lockfleet::cli
