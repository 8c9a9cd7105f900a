// `lockfleet demo`: the flash sale on an embedded broker, a private
// redis-server and N worker processes; exits 0 only if every invariant holds.
#pragma once

#include "command.h"

namespace lockfleet::cli {

Subcommand AddDemoCommand(CLI::App& parent, HelpFormatter& formatter);

}  // namespace lockfleet::cli
