// `lockfleet jobs produce`: feeds jobs into the jobs topic.
#pragma once

#include "command.h"

namespace lockfleet::cli {

Subcommand AddJobsCommand(CLI::App& parent, HelpFormatter& formatter);

}  // namespace lockfleet::cli
