// The parent side of `lockfleet bench`: starts Redis (unless --redis) and the
// embedded broker (unless --kafka, kafka mode), the contender processes
// (bench_contender.h), releases them on a common start barrier, waits for
// them, merges their records (bench_analysis.h) and prints the report
// (bench_report.h).
#pragma once

#include <atomic>
#include <nlohmann/json.hpp>

#include "bench_options.h"

namespace lockfleet::cli {

// Exit status when a contender process failed or had to be killed.
inline constexpr int kExitContenderFailed = 3;

// The exit status a report (ToJson's, or SummarizeRuns') calls for: 1 with
// violations (printed), kExitContenderFailed with a failed contender, else 0.
int ExitStatus(const nlohmann::json& report);

// Runs the benchmark (--repeat times); returns the exit status (see the
// --help footer).
// `interrupted` turning true stops everything it started (status 130).
// REQUIRES: CheckBenchArgs(args) passed; args is not a child's.
int RunBench(const BenchArgs& args, const std::atomic<bool>& interrupted);

}  // namespace lockfleet::cli
