// `lockfleet broker`: a throwaway Kafka broker for development, demos and
// tests.
//
//   lockfleet broker [--port P] [--partitions N] [--topic NAME ...]
//
// Serves notifier::EmbeddedBroker (librdkafka's mock cluster) on 127.0.0.1
// until SIGINT or SIGTERM. The first line on stdout is exactly
// "bootstrap: 127.0.0.1:PORT" and is flushed at once, so a script or test can
// start it in the background and read the address. It keeps everything in
// memory, in one process, with no replication: production points
// `lockfleet lock --kafka` at a real Kafka cluster instead.
#pragma once

#include <CLI/CLI.hpp>

#include "command.h"

namespace lockfleet::cli {

// Declares `broker` on `parent` and returns how to run it.
Subcommand AddBrokerCommand(CLI::App& parent, HelpFormatter& formatter);

}  // namespace lockfleet::cli
