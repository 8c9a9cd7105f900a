// `lockfleet top`: a live terminal view of a fleet's locks and workers (see
// top_model.h for what it shows and how it is computed).
#pragma once

#include <CLI/CLI.hpp>

#include "command.h"

namespace lockfleet::cli {

Subcommand AddTopCommand(CLI::App& parent, HelpFormatter& formatter);

}  // namespace lockfleet::cli
