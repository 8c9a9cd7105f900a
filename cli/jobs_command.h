// `lockfleet jobs`: `produce` feeds jobs into the jobs topic; `status`
// (jobs_status_command.h) and `dead list|show|retry|purge`
// (jobs_dead_command.h) are the on-call tools.
#pragma once

#include "command.h"

namespace lockfleet::cli {

Subcommand AddJobsCommand(CLI::App& parent, HelpFormatter& formatter);

}  // namespace lockfleet::cli
