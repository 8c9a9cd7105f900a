// `lockfleet bench`: the contention benchmark. P contender processes (this
// binary again, see bench_contender.h) x T threads compete for K locks; the
// parent starts them on a common barrier, merges their critical sections and
// reports violations, hand-off gaps, Redis cost, fairness, wake-ups, errors
// and resource use (bench_analysis.h, bench_report.h).
#pragma once

#include "command.h"

namespace lockfleet::cli {

Subcommand AddBenchCommand(CLI::App& parent, HelpFormatter& formatter);

}  // namespace lockfleet::cli
