#include "bench_report.h"

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <ostream>
#include <sstream>
#include <vector>

#include "supervised_process.h"

namespace lockfleet::cli {
namespace {

using nlohmann::json;

json ToJson(const Percentiles& p) {
  return {{"count", p.count},
          {"p50", p.p50},
          {"p90", p.p90},
          {"p99", p.p99},
          {"max", p.max}};
}

double PerAcquisition(double total, uint64_t acquisitions) {
  return acquisitions == 0 ? 0.0 : total / static_cast<double>(acquisitions);
}

json ToJson(const TripStats& t) {
  return {{"count", t.count},
          {"mean", t.mean},
          {"p50", t.p50},
          {"p99", t.p99},
          {"max", t.max}};
}

json OrNull(const auto& value) { return value ? json(*value) : json(nullptr); }

// "123 us p50, 456 p90, ..." from a percentile object.
std::string Gap(const json& p) {
  if (p.at("count").get<size_t>() == 0) return "none";
  char text[160];
  std::snprintf(text, sizeof(text),
                "p50 %8.0f  p90 %8.0f  p99 %8.0f  max %8.0f us  (%zu)",
                p.at("p50").get<double>(), p.at("p90").get<double>(),
                p.at("p99").get<double>(), p.at("max").get<double>(),
                p.at("count").get<size_t>());
  return text;
}

std::string Counts(const json& object) {
  std::string out;
  for (const auto& [key, value] : object.items()) {
    if (!out.empty()) out += ", ";
    out += key + " " + std::to_string(value.get<uint64_t>());
  }
  return out.empty() ? "none" : out;
}

// The figures --repeat summarizes: a JSON pointer into ToJson's object and
// the label and format of the summary table.
struct Figure {
  const char* pointer;
  const char* label;
  const char* format;
};
constexpr Figure kFigures[] = {
    {"/acquisitions_per_second", "acquisitions / s", "%.1f"},
    {"/handoff_us/p50", "hand-off p50 (us)", "%.0f"},
    {"/handoff_us/p99", "hand-off p99 (us)", "%.0f"},
    {"/cross_process_handoff_us/p50", "cross-process p50 (us)", "%.0f"},
    {"/cross_process_handoff_us/p99", "cross-process p99 (us)", "%.0f"},
    {"/same_process_handoff_us/p50", "same-process p50 (us)", "%.0f"},
    {"/same_process_handoff_us/p99", "same-process p99 (us)", "%.0f"},
    {"/redis_calls_per_acquisition", "redis round trips / acq", "%.2f"},
    {"/redis_commands_per_acquisition", "redis commands / acq", "%.2f"},
    {"/redis_cpu_percent", "redis cpu (% of a core)", "%.1f"},
    {"/host_cpu_percent", "host cpu (% of all cores)", "%.1f"},
    {"/jain_index", "fairness (Jain)", "%.3f"},
    {"/primitive/acquire_round_trips/all/mean", "acquire round trips (mean)",
     "%.2f"},
    {"/primitive/acquire_round_trips/waited/mean", "  ... that waited (mean)",
     "%.2f"},
    {"/primitive/acquire_round_trips/read_joining_readers/mean",
     "  ... reads joining readers", "%.2f"},
    {"/releaser_reacquire_share", "back to the releaser", "%.3f"},
    {"/events/consumed_share_mean", "events received / published", "%.3f"},
};

// The value at `pointer`, or nullopt when the run has none: null, or a
// percentile over no hand-offs.
std::optional<double> FigureOf(const json& run, const std::string& pointer) {
  const json::json_pointer at(pointer);
  if (!run.contains(at) || !run.at(at).is_number()) return std::nullopt;
  // A per-acquisition figure of a run without acquisitions is not a 0.
  if (pointer.find("per_acquisition") != std::string::npos &&
      run.value("acquisitions", uint64_t{1}) == 0) {
    return std::nullopt;
  }
  const json::json_pointer parent = at.parent_pointer();
  if (!parent.empty() && run.at(parent).contains("count") &&
      run.at(parent).at("count").get<uint64_t>() == 0) {
    return std::nullopt;
  }
  return run.at(at).get<double>();
}

}  // namespace

json SummarizeRuns(const std::vector<json>& runs) {
  json summary = json::object();
  for (const Figure& figure : kFigures) {
    std::vector<double> values;
    for (const json& run : runs) {
      if (const std::optional<double> v = FigureOf(run, figure.pointer)) {
        values.push_back(*v);
      }
    }
    if (values.empty()) continue;
    std::sort(values.begin(), values.end());
    const size_t n = values.size();
    const double median =
        n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
    summary[std::string(figure.pointer).substr(1)] = {{"median", median},
                                                      {"min", values.front()},
                                                      {"max", values.back()},
                                                      {"runs", n}};
  }
  uint64_t violations = 0;
  int failed = 0;
  for (const json& run : runs) {
    violations += run.at("violations").get<uint64_t>();
    failed += run.at("failed_processes").get<int>();
  }
  return {{"repeat", runs.size()},
          {"summary", summary},
          {"violations", violations},
          {"failed_processes", failed},
          {"runs", runs}};
}

void PrintSummary(const json& s, std::ostream& out) {
  const json& runs = s.at("runs");
  if (!runs.empty()) {
    // The configuration line of the first run stands for all.
    std::ostringstream first;
    PrintTable(runs.front(), first);
    const std::string text = first.str();
    out << text.substr(0, text.find("\n\n")) << "\n";
  }
  char line[256];
  std::snprintf(line, sizeof(line),
                "  %zu runs: median (min - max) of each figure\n\n",
                runs.size());
  out << line;
  for (const Figure& figure : kFigures) {
    const std::string key = std::string(figure.pointer).substr(1);
    if (!s.at("summary").contains(key)) continue;
    const json& f = s.at("summary").at(key);
    const auto format = [&](const char* name) {
      char text[64];
      std::snprintf(text, sizeof(text), figure.format,
                    f.at(name).get<double>());
      return std::string(text);
    };
    std::snprintf(
        line, sizeof(line), "  %-28s %s (%s - %s)%s\n", figure.label,
        format("median").c_str(), format("min").c_str(), format("max").c_str(),
        f.at("runs").get<size_t>() < runs.size()
            ? (" in " + std::to_string(f.at("runs").get<size_t>()) + " runs")
                  .c_str()
            : "");
    out << line;
  }
  std::snprintf(
      line, sizeof(line), "  %-28s %llu in all runs\n", "violations",
      static_cast<unsigned long long>(s.at("violations").get<uint64_t>()));
  out << line << std::flush;
}

bool ProcessResult::ok() const {
  return wait_status && WIFEXITED(*wait_status) &&
         WEXITSTATUS(*wait_status) == 0 && report.has_value();
}

json ToJson(const RunResult& r) {
  const BenchArgs& args = *r.args;
  const Analysis& a = r.analysis;
  uint64_t attempts = 0, round_trips = 0;
  uint64_t published = 0, consumed = 0, consumed_max = 0;
  int reporting = 0;
  std::map<std::string, uint64_t> wakeups, errors;
  json processes = json::array();
  long long rss_warm = 0, rss_end = 0, fds_warm = 0, fds_end = 0;
  int failed = 0;
  for (const ProcessResult& p : r.processes) {
    json entry = {
        {"index", p.index},
        {"pid", p.pid},
        {"exit", p.wait_status ? DescribeWaitStatus(*p.wait_status)
                               : std::string("killed (did not stop)")},
        {"ok", p.ok()}};
    if (!p.ok()) ++failed;
    if (p.report) {
      const ContenderReport& c = *p.report;
      attempts += c.attempts;
      round_trips += c.round_trips;
      published += c.events_published;
      consumed += c.events_consumed;
      consumed_max = std::max(consumed_max, c.events_consumed);
      ++reporting;
      for (const auto& [cause, n] : c.wakeups) wakeups[cause] += n;
      for (const auto& [code, n] : c.errors) errors[code] += n;
      rss_warm += c.warm.rss_kb;
      rss_end += c.end.rss_kb;
      fds_warm += c.warm.fds;
      fds_end += c.end.fds;
      entry.update({{"acquisitions", c.acquisitions},
                    {"rss_kb_warm", c.warm.rss_kb},
                    {"rss_kb_end", c.end.rss_kb},
                    {"fds_warm", c.warm.fds},
                    {"fds_end", c.end.fds},
                    {"events_consumed", c.events_consumed},
                    {"errors", c.errors}});
    }
    processes.push_back(entry);
  }
  const uint64_t n = a.acquisitions;
  json out = {
      {"config",
       {{"mode", args.mode_name},
        {"primitive", args.primitive_name},
        {"read_share", args.primitive == Primitive::kRwLock
                           ? json(args.read_share)
                           : json(nullptr)},
        {"permits", args.primitive == Primitive::kSemaphore ? json(args.permits)
                                                            : json(nullptr)},
        {"names", args.primitive == Primitive::kMultiLock ? json(args.names)
                                                          : json(nullptr)},
        {"processes", args.processes},
        {"threads", args.threads},
        {"locks", args.locks},
        {"seconds", args.seconds},
        {"hold_ms", args.hold_ms},
        {"think_ms", args.think_ms},
        {"fair", args.fair},
        {"poll_interval_ms", args.mode == BenchMode::kPoll
                                 ? json(args.poll_interval_ms)
                                 : json(nullptr)},
        {"fetch_wait_ms",
         args.fetch_wait_ms > 0 ? json(args.fetch_wait_ms) : json(nullptr)},
        {"park_cap_ms",
         args.park_cap_ms > 0 ? json(args.park_cap_ms) : json(nullptr)},
        {"spin_max_hold_ms", args.spin_max_hold_ms >= 0
                                 ? json(args.spin_max_hold_ms)
                                 : json(nullptr)},
        {"fan_out",
         args.mode == BenchMode::kKafka ? json(args.fan_out) : json(nullptr)},
        {"partitions",
         args.partitions > 0 ? json(args.partitions) : json(nullptr)},
        {"targeted_linger_ms", args.targeted_linger_ms >= 0
                                   ? json(args.targeted_linger_ms)
                                   : json(nullptr)},
        {"redis", r.redis},
        {"kafka", r.kafka}}},
      {"acquisitions", n},
      {"acquisitions_per_second",
       r.seconds > 0 ? static_cast<double>(n) / r.seconds : 0.0},
      {"violations", a.violations},
      {"lost_lease_overlaps", a.lost_lease_overlaps},
      {"handoffs", a.handoffs},
      {"handoff_us", ToJson(a.handoff_us)},
      {"cross_process_handoff_us", ToJson(a.cross_process_us)},
      {"same_process_handoff_us", ToJson(a.same_process_us)},
      {"releaser_handoff_us", ToJson(a.releaser_us)},
      {"parked_cross_process_handoff_us", ToJson(a.parked_cross_process_us)},
      {"attempts_per_acquisition",
       PerAcquisition(static_cast<double>(attempts), n)},
      {"redis_calls_per_acquisition",
       PerAcquisition(static_cast<double>(round_trips), n)},
      {"redis_commands_per_acquisition",
       r.redis_commands
           ? json(PerAcquisition(static_cast<double>(*r.redis_commands), n))
           : json(nullptr)},
      {"redis_commands", OrNull(r.redis_commands)},
      {"redis_cpu_seconds", OrNull(r.redis_cpu_seconds)},
      {"redis_cpu_percent", r.redis_cpu_seconds && r.seconds > 0
                                ? json(100.0 * *r.redis_cpu_seconds / r.seconds)
                                : json(nullptr)},
      {"host_cpu_percent", OrNull(r.host_cpu_percent)},
      {"jain_index", a.jain_index},
      {"releaser_reacquire_share", a.releaser_reacquire_share},
      {"wakeups", wakeups},
      // Kafka mode: every process's events published, and what each
      // received on average and at most, also as a share of all published
      // (broadcast: ~1; targeted: the share of the partitions it fetched).
      {"events",
       args.mode == BenchMode::kKafka && reporting > 0
           ? json{{"published", published},
                  {"consumed_per_process_mean",
                   static_cast<double>(consumed) / reporting},
                  {"consumed_per_process_max", consumed_max},
                  {"consumed_share_mean",
                   published > 0 ? json(static_cast<double>(consumed) /
                                        reporting / published)
                                 : json(nullptr)}}
           : json(nullptr)},
      {"errors", errors},
      {"failed_processes", failed},
      {"processes", processes},
      {"resources",
       {{"rss_kb_warm", rss_warm},
        {"rss_kb_end", rss_end},
        {"fds_warm", fds_warm},
        {"fds_end", fds_end}}},
      {"redis_connected_clients",
       {{"before", OrNull(r.clients_before)},
        {"during", OrNull(r.clients_during)},
        {"after", OrNull(r.clients_after)}}},
  };
  if (r.shared) {
    const SharedAnalysis& s = *r.shared;
    out["primitive"] = {{"name", args.primitive_name},
                        {"max_concurrent", s.max_concurrent},
                        {"waited_handoff_us", ToJson(s.waited_handoff_us)},
                        {"acquire_round_trips",
                         {{"all", ToJson(s.trips_all)},
                          {"not_waited", ToJson(s.trips_unwaited)},
                          {"waited", ToJson(s.trips_waited)}}}};
    if (args.primitive == Primitive::kRwLock) {
      out["primitive"]["reads"] = s.reads;
      out["primitive"]["writes"] = s.writes;
      out["primitive"]["waited_read_handoff_us"] =
          ToJson(s.waited_read_handoff_us);
      out["primitive"]["waited_write_handoff_us"] =
          ToJson(s.waited_write_handoff_us);
      out["primitive"]["acquire_round_trips"]["read_joining_readers"] =
          ToJson(s.trips_read_joining);
      out["primitive"]["acquire_round_trips"]["write"] = ToJson(s.trips_write);
    }
  }
  if (r.event_latency_us) {
    out["event_latency_us"] = ToJson(*r.event_latency_us);
    out["event_latency_us"]["sent"] = r.event_latency_sent;
  }
  return out;
}

void PrintTable(const json& j, std::ostream& out) {
  const json& c = j.at("config");
  char line[512];
  std::snprintf(
      line, sizeof(line),
      "lockfleet bench: mode %s%s, %d processes x %d threads on %d lock%s, "
      "hold %d ms, think %d ms, %d s\n",
      c.at("mode").get<std::string>().c_str(),
      c.at("mode") == "poll"
          ? (" every " + std::to_string(c.at("poll_interval_ms").get<int>()) +
             " ms")
                .c_str()
      : c.at("mode") == "floor"
          ? " (a token in a Redis list taken with BLPOP: the physical "
            "reference, NOT a lock: no lease, no owner, no fencing)"
          : (c.at("fair").get<bool>() ? " (fair)" : " (barging)"),
      c.at("processes").get<int>(), c.at("threads").get<int>(),
      c.at("locks").get<int>(), c.at("locks").get<int>() == 1 ? "" : "s",
      c.at("hold_ms").get<int>(), c.at("think_ms").get<int>(),
      c.at("seconds").get<int>());
  out << line;
  if (c.contains("primitive") && c.at("primitive") != "lock") {
    out << "  primitive " << c.at("primitive").get<std::string>();
    if (!c.at("read_share").is_null())
      out << ", " << c.at("read_share").get<int>() << "% reads";
    if (!c.at("permits").is_null())
      out << ", " << c.at("permits").get<int>() << " permits";
    if (!c.at("names").is_null())
      out << ", " << c.at("names").get<int>() << " names per acquisition";
    out << "\n";
  }
  out << "  redis " << c.at("redis").get<std::string>();
  if (!c.at("kafka").get<std::string>().empty()) {
    out << ", kafka " << c.at("kafka").get<std::string>();
  }
  out << "\n\n";
  const auto row = [&](const char* label, const std::string& value) {
    std::snprintf(line, sizeof(line), "  %-28s %s\n", label, value.c_str());
    out << line;
  };
  const auto number = [](const json& value, const char* format) {
    if (value.is_null()) return std::string("n/a");
    char text[64];
    std::snprintf(text, sizeof(text), format, value.get<double>());
    return std::string(text);
  };
  row("acquisitions",
      std::to_string(j.at("acquisitions").get<uint64_t>()) + " (" +
          number(j.at("acquisitions_per_second"), "%.1f") + "/s)");
  row("violations",
      std::to_string(j.at("violations").get<uint64_t>()) +
          (j.at("lost_lease_overlaps").get<uint64_t>() > 0
               ? " (+" +
                     std::to_string(
                         j.at("lost_lease_overlaps").get<uint64_t>()) +
                     " overlaps after a lost lease)"
               : ""));
  row("hand-off gap, all", Gap(j.at("handoff_us")));
  row("  to another process", Gap(j.at("cross_process_handoff_us")));
  row("  ... that had waited", Gap(j.at("parked_cross_process_handoff_us")));
  row("  to another thread", Gap(j.at("same_process_handoff_us")));
  row("  back to the releaser", Gap(j.at("releaser_handoff_us")));
  row("acquire attempts / acq",
      number(j.at("attempts_per_acquisition"), "%.2f"));
  row("redis round trips / acq",
      number(j.at("redis_calls_per_acquisition"), "%.2f"));
  row("redis commands / acq",
      number(j.at("redis_commands_per_acquisition"), "%.2f"));
  row("redis cpu", number(j.at("redis_cpu_percent"), "%.1f%% of a core"));
  row("host cpu", number(j.at("host_cpu_percent"), "%.1f%% of all cores"));
  row("fairness (Jain)", number(j.at("jain_index"), "%.3f"));
  row("back to the releaser",
      number(j.at("releaser_reacquire_share").get<double>() * 100, "%.1f%%") +
          " of " + std::to_string(j.at("handoffs").get<uint64_t>()) +
          " hand-offs");
  if (j.contains("primitive")) {
    const json& p = j.at("primitive");
    const auto trips = [&](const json& t) {
      if (t.at("count").get<uint64_t>() == 0) return std::string("none");
      char text[128];
      std::snprintf(
          text, sizeof(text), "mean %.2f  p50 %.0f  p99 %.0f  (%llu)",
          t.at("mean").get<double>(), t.at("p50").get<double>(),
          t.at("p99").get<double>(),
          static_cast<unsigned long long>(t.at("count").get<uint64_t>()));
      return std::string(text);
    };
    const json& rt = p.at("acquire_round_trips");
    row("acquire-call round trips", trips(rt.at("all")));
    row("  not waited", trips(rt.at("not_waited")));
    row("  waited", trips(rt.at("waited")));
    if (rt.contains("read_joining_readers")) {
      row("  reads joining readers", trips(rt.at("read_joining_readers")));
      row("  writes", trips(rt.at("write")));
      row("reads / writes", std::to_string(p.at("reads").get<uint64_t>()) +
                                " / " +
                                std::to_string(p.at("writes").get<uint64_t>()));
      row("waited hand-off, reads", Gap(p.at("waited_read_handoff_us")));
      row("waited hand-off, writes", Gap(p.at("waited_write_handoff_us")));
    }
    row("most held at once",
        std::to_string(p.at("max_concurrent").get<uint64_t>()));
  }
  row("wake-ups", Counts(j.at("wakeups")));
  row("errors", Counts(j.at("errors")));
  const json& res = j.at("resources");
  row("contenders' RSS",
      std::to_string(res.at("rss_kb_warm").get<long long>()) +
          " kB after warm-up, " +
          std::to_string(res.at("rss_kb_end").get<long long>()) +
          " kB at the end");
  row("contenders' open fds",
      std::to_string(res.at("fds_warm").get<long long>()) + " after warm-up, " +
          std::to_string(res.at("fds_end").get<long long>()) + " at the end");
  const json& clients = j.at("redis_connected_clients");
  const auto client_count = [](const json& v) {
    return v.is_null() ? std::string("n/a")
                       : std::to_string(v.get<long long>());
  };
  row("redis connected clients",
      client_count(clients.at("before")) + " before, " +
          client_count(clients.at("during")) + " during, " +
          client_count(clients.at("after")) + " after");
  if (j.contains("event_latency_us")) {
    row("one-way event latency", Gap(j.at("event_latency_us")));
  }
  const int failed = j.at("failed_processes").get<int>();
  if (failed > 0) {
    for (const json& p : j.at("processes")) {
      if (!p.at("ok").get<bool>()) {
        row("FAILED contender", std::to_string(p.at("index").get<int>()) +
                                    " (pid " +
                                    std::to_string(p.at("pid").get<int>()) +
                                    "): " + p.at("exit").get<std::string>());
      }
    }
  }
  out << std::flush;
}

}  // namespace lockfleet::cli
