// `lockfleet config`: work with the deployment config file.
//
//   lockfleet config check FILE   validate FILE ("-": standard input)
//   lockfleet config example      print a complete, commented config
//
// `check` loads FILE exactly as a lockfleet process would (config.h),
// including ${VAR} expansion from the current environment, and prints "ok"
// on stdout and exits 0, or prints every problem on stderr, one per line as
// FILE:LINE:COLUMN: key.path: message (the form editors jump to), and exits
// 2 — also when FILE is missing, empty or not YAML.
//
// `example` prints config::ExampleConfig() on stdout and exits 0; its
// output passes `check`.
#pragma once

#include <CLI/CLI.hpp>

#include "command.h"

namespace lockfleet::cli {

// Declares `config` (with `check` and `example`) on `parent` and returns how
// to run it.
Subcommand AddConfigCommand(CLI::App& parent, HelpFormatter& formatter);

}  // namespace lockfleet::cli
