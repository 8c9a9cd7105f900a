// `lockfleet completion bash`: prints a bash completion script generated
// from the command line's own definitions (every subcommand, its options,
// which options take a value, which values are files), so it never falls
// behind the CLI.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "command.h"

namespace lockfleet::cli {

// `root` must outlive the returned subcommand's run.
Subcommand AddCompletionCommand(CLI::App& root, HelpFormatter& formatter);

// The bash completion script for `root`'s command tree.
std::string BashCompletion(const CLI::App& root);

}  // namespace lockfleet::cli
