// One contender process of `lockfleet bench` (the hidden child mode,
// `lockfleet bench --child-index N --run-dir DIR ...`).
//
// It builds the clients exactly as a production process does — one
// RedisClient and one LockClient, and in kafka mode one KafkaNotifier that
// publishes its unlock events and delivers everyone else's — warms them up
// (connections, scripts, the consumer's partitions), prints "ready" on
// stdout and waits for the parent's start file (run_dir/go: start and end,
// wall-clock ns). Its --threads threads then loop from the start time to the
// end: pick a lock, wait for it, hold it --hold-ms, release, think
// --think-ms, recording each critical section (see bench_records.h).
//
// A Redis or Kafka error inside the loop is counted by its error code and
// retried after a short backoff; it never ends the run. SIGINT/SIGTERM
// cancel the waits and end the run early (the report is still written).
//
// Exit status: 0 run completed (also with errors counted), 69 Redis or
// Kafka not reachable during setup, 70 the run directory is unusable.
#pragma once

#include "bench_options.h"
#include "command.h"

namespace lockfleet::cli {

int RunContender(const BenchArgs& args, const Context& context);

}  // namespace lockfleet::cli
