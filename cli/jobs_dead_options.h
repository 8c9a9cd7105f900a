// What `lockfleet jobs dead list|show|retry|purge` share on the command
// line: the --reason/--lock filters, how entries are named in messages.
//
// Thread-safety: none needed; used while one command runs.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "jobs_dead_letters.h"

namespace lockfleet::cli {

struct FilterArgs {
  std::string reason;
  std::string lock;
  CLI::Option* reason_option = nullptr;
  CLI::Option* lock_option = nullptr;
};

// Declares --reason GLOB and --lock NAME.
void AddFilterOptions(CLI::App& app, FilterArgs& args);

// The filter for `ids` and the options; UsageError for a bad glob or an
// empty lock.
DeadLetterFilter MakeFilter(const FilterArgs& args,
                            std::vector<std::string> ids);

// "job 'ID' (lock 'L')", or "the entry at index N (no job id)".
std::string Name(const DeadLetter& d);

// Prints "no dead letter with job id ..." for each of `ids` that no entry of
// `selected` (chosen by `filter`) has; true if there was one.
bool ReportMissingIds(const DeadLetterFilter& filter,
                      const std::vector<DeadLetter>& selected,
                      const std::string& key);

}  // namespace lockfleet::cli
