// The config schema: turns the document's top-level mapping into a Config.
// Private to the config module. schema.cc reads the sections, except the
// worker's, which worker_schema.cc reads.
#pragma once

#include "lockfleet/config/config.h"
#include "reader.h"

namespace lockfleet::config::internal {

inline constexpr char kListenExpected[] =
    "HOST:PORT to listen on, or \"\" for none";
inline constexpr char kTargetExpected[] =
    "HOST:PORT of a worker's /metrics endpoint";

// Reads every section of `root` (a mapping), recording each problem in
// `context` and leaving defaults where a value is wrong or absent.
Config ReadConfig(Context& context, const Value& root);

// The `worker:` section. `has_kafka`: whether the config has a kafka section
// (kafka_jobs needs one).
WorkerConfig ReadWorker(Context& context, const Value& value, bool has_kafka);

}  // namespace lockfleet::config::internal
