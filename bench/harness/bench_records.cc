#include "bench_records.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace lockfleet::cli {
namespace {

// On-disk layout of one critical section.
struct Record {
  int64_t acquire_ns;
  int64_t release_ns;
  int32_t lock;
  uint8_t waited;
  uint8_t lost;
  uint8_t write;          // --primitive rwlock: a write
  uint8_t acquire_trips;  // capped at 255
};
static_assert(sizeof(Record) == 24);

}  // namespace

std::string RecordPath(const std::string& run_dir, int process, int thread) {
  return run_dir + "/p" + std::to_string(process) + "-t" +
         std::to_string(thread) + ".rec";
}

std::string ReportPath(const std::string& run_dir, int process) {
  return run_dir + "/p" + std::to_string(process) + ".json";
}

std::string GoPath(const std::string& run_dir) { return run_dir + "/go"; }

RecordWriter::RecordWriter(const std::string& path)
    : file_(std::fopen(path.c_str(), "wbe")) {
  if (file_ == nullptr) throw std::runtime_error("cannot write " + path);
}

RecordWriter::~RecordWriter() { Close(); }

void RecordWriter::Write(const Section& section) {
  if (file_ == nullptr) return;
  const Record record{.acquire_ns = section.acquire_ns,
                      .release_ns = section.release_ns,
                      .lock = section.lock,
                      .waited = section.waited ? uint8_t{1} : uint8_t{0},
                      .lost = section.lost ? uint8_t{1} : uint8_t{0},
                      .write = section.write ? uint8_t{1} : uint8_t{0},
                      .acquire_trips = static_cast<uint8_t>(
                          std::clamp(section.acquire_trips, 0, 255))};
  std::fwrite(&record, sizeof(record), 1, file_);
}

void RecordWriter::Close() {
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
}

std::vector<Section> ReadRecords(const std::string& path, int process,
                                 int thread) {
  std::vector<Section> out;
  std::FILE* file = std::fopen(path.c_str(), "rbe");
  if (file == nullptr) return out;
  Record record{};
  while (std::fread(&record, sizeof(record), 1, file) == 1) {
    out.push_back(Section{.acquire_ns = record.acquire_ns,
                          .release_ns = record.release_ns,
                          .process = process,
                          .thread = thread,
                          .lock = record.lock,
                          .waited = record.waited != 0,
                          .lost = record.lost != 0,
                          .write = record.write != 0,
                          .acquire_trips = record.acquire_trips});
  }
  std::fclose(file);
  return out;
}

int64_t WallClockNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

ResourceSample SampleResources() {
  ResourceSample sample;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) {
      sample.rss_kb = std::stoll(line.substr(6));
      break;
    }
  }
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++sample.fds;
  }
  // The iterator's own descriptor on /proc/self/fd was counted too.
  if (sample.fds > 0) --sample.fds;
  return sample;
}

nlohmann::json ToJson(const ContenderReport& r) {
  return {{"index", r.index},
          {"acquisitions", r.acquisitions},
          {"attempts", r.attempts},
          {"round_trips", r.round_trips},
          {"wakeups", r.wakeups},
          {"errors", r.errors},
          {"events_published", r.events_published},
          {"events_consumed", r.events_consumed},
          {"rss_kb_warm", r.warm.rss_kb},
          {"rss_kb_end", r.end.rss_kb},
          {"fds_warm", r.warm.fds},
          {"fds_end", r.end.fds}};
}

ContenderReport ContenderReportFromJson(const nlohmann::json& json) {
  ContenderReport r;
  r.index = json.at("index").get<int>();
  r.acquisitions = json.at("acquisitions").get<uint64_t>();
  r.attempts = json.at("attempts").get<uint64_t>();
  r.round_trips = json.at("round_trips").get<uint64_t>();
  r.wakeups = json.at("wakeups").get<std::map<std::string, uint64_t>>();
  r.errors = json.at("errors").get<std::map<std::string, uint64_t>>();
  r.events_published = json.value("events_published", uint64_t{0});
  r.events_consumed = json.value("events_consumed", uint64_t{0});
  r.warm.rss_kb = json.at("rss_kb_warm").get<long long>();
  r.end.rss_kb = json.at("rss_kb_end").get<long long>();
  r.warm.fds = json.at("fds_warm").get<long long>();
  r.end.fds = json.at("fds_end").get<long long>();
  return r;
}

bool WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << text;
    out.flush();
    if (!out) return false;
  }
  return std::rename(temporary.c_str(), path.c_str()) == 0;
}

std::optional<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace lockfleet::cli
