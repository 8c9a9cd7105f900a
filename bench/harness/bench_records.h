// What a `lockfleet bench` contender process hands its parent, through files
// in the run directory:
//   p<P>-t<T>.rec  its critical sections, fixed-size binary records appended
//                  as they happen (buffered; a contender that dies leaves the
//                  whole records it flushed), read back as Sections;
//   p<P>.json      its counters and resource samples (ContenderReport),
//                  written once at the end (write + rename).
// Both ends are the same binary on the same machine, so the record layout is
// the host's.
//
// Thread-safety: a RecordWriter belongs to one thread; the free functions are
// thread-safe.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench_analysis.h"

namespace lockfleet::cli {

std::string RecordPath(const std::string& run_dir, int process, int thread);
std::string ReportPath(const std::string& run_dir, int process);
std::string GoPath(const std::string& run_dir);

class RecordWriter {
 public:
  // Opens (truncates) `path`. Throws std::runtime_error if it cannot.
  explicit RecordWriter(const std::string& path);
  ~RecordWriter();  // flushes and closes
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;

  void Write(const Section& section);
  void Close();

 private:
  std::FILE* file_ = nullptr;
};

// The whole records of `path`, stamped with `process` and `thread`; empty if
// the file is missing.
std::vector<Section> ReadRecords(const std::string& path, int process,
                                 int thread);

// Now, CLOCK_REALTIME in ns: the clock of every record (comparable across
// the processes of one machine).
int64_t WallClockNs();

// This process's resident set (kB, VmRSS) and open file descriptors.
struct ResourceSample {
  long long rss_kb = 0;
  long long fds = 0;
};
ResourceSample SampleResources();

// One contender process's counters over the timed run (deltas from the start
// barrier to the end) and its resource samples.
struct ContenderReport {
  int index = 0;
  uint64_t acquisitions = 0;
  uint64_t attempts = 0;     // acquire scripts run (LockStats::attempts)
  uint64_t round_trips = 0;  // Redis round trips, counted by the client
  std::map<std::string, uint64_t> wakeups;  // cause -> count
  std::map<std::string, uint64_t> errors;   // error code -> count
  // Kafka mode: unlock events this process published and received.
  uint64_t events_published = 0;
  uint64_t events_consumed = 0;
  ResourceSample warm;  // after warm-up
  ResourceSample end;   // after the last critical section
};

nlohmann::json ToJson(const ContenderReport& report);
// Throws nlohmann::json::exception on a malformed document.
ContenderReport ContenderReportFromJson(const nlohmann::json& json);

// Writes `text` to `path` atomically (a temporary file, then rename).
// Returns false if it could not.
bool WriteFileAtomically(const std::string& path, const std::string& text);

// The contents of `path`, or std::nullopt if it cannot be read.
std::optional<std::string> ReadWholeFile(const std::string& path);

}  // namespace lockfleet::cli
