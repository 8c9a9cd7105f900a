// The result of one `lockfleet bench` run: everything the parent gathered,
// turned into the JSON object of --json, and the human-readable table
// (printed from that same object, so the two never disagree).
#pragma once

#include <iosfwd>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench_analysis.h"
#include "bench_options.h"
#include "bench_records.h"

namespace lockfleet::cli {

struct ProcessResult {
  int index = 0;
  int pid = 0;
  std::optional<int> wait_status;         // nullopt: had to be killed
  std::optional<ContenderReport> report;  // nullopt: none written (died)

  bool ok() const;  // exited 0 and wrote its report
};

struct RunResult {
  const BenchArgs* args = nullptr;
  std::string redis;   // "private redis-server" or the URL (redacted)
  std::string kafka;   // "embedded broker (...)", the bootstrap, or ""
  double seconds = 0;  // the timed window
  Analysis analysis;
  // --primitive other than lock: the per-primitive figures (for rwlock and
  // semaphore, `analysis` is its base).
  std::optional<SharedAnalysis> shared;
  std::vector<ProcessResult> processes;
  std::optional<long long> redis_commands;  // INFO commandstats delta
  std::optional<double> redis_cpu_seconds;  // INFO cpu delta (user+sys)
  // The whole host's busy CPU over the timed window (/proc/stat), in % of
  // all its cores: contenders, Redis, brokers and anything else running.
  std::optional<double> host_cpu_percent;
  std::optional<long long> clients_before, clients_during, clients_after;
  std::optional<Percentiles> event_latency_us;  // --event-latency probe
  uint64_t event_latency_sent = 0;
};

nlohmann::json ToJson(const RunResult& result);

// The table, from ToJson's object.
void PrintTable(const nlohmann::json& report, std::ostream& out);

// --repeat: the figures of several runs of one configuration (ToJson's
// objects), each as {"median", "min", "max", "runs"} over the runs that
// have it (a percentile of no hand-offs counts as absent), and the
// violations and failed contenders summed:
//   {"repeat": N, "summary": {"acquisitions_per_second": {...}, ...},
//    "violations": V, "failed_processes": F, "runs": [...]}
nlohmann::json SummarizeRuns(const std::vector<nlohmann::json>& runs);

// The summary table, from SummarizeRuns' object.
void PrintSummary(const nlohmann::json& summary, std::ostream& out);

}  // namespace lockfleet::cli
