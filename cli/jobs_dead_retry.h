// `lockfleet jobs dead retry`: runs dead-lettered jobs again by producing
// their records, unchanged (same id), to the jobs topic, and removes each
// dead letter once the broker has acknowledged its job.
//
// Why it is safe to repeat: a job's id is its identity, and a worker skips a
// job whose done marker exists (docs/worker.md). A crash between the
// acknowledgement and the removal leaves the dead letter; retrying it again
// then finds the job done (or produces it once more, which the workers
// dedup) — never runs it twice.
#pragma once

#include "command.h"

namespace lockfleet::cli {

// Declares `retry` under `jobs dead`.
Subcommand AddRetryCommand(CLI::App& dead, HelpFormatter& formatter);

}  // namespace lockfleet::cli
