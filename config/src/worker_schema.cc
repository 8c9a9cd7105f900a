// The worker section of the schema (schema.h): job sources, schedules,
// handler settings.
#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "checks.h"
#include "lockfleet/config/cron.h"
#include "reader.h"
#include "schema.h"

namespace lockfleet::config::internal {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr size_t kMaxLockNameBytes = 1024;  // lockcore's limit
constexpr size_t kMaxScheduleNameBytes = 128;
constexpr int kMaxCatchUp = 1000;

std::string CheckScheduleName(std::string_view text) {
  if (text.empty()) return "it is empty";
  if (text.size() > kMaxScheduleNameBytes) return "longer than 128 bytes";
  const bool legal = std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '.' || c == '_' || c == ':' ||
           c == '-';
  });
  return legal ? "" : "only letters, digits, '.', '_', ':' and '-'";
}

std::string CheckLockName(std::string_view text) {
  if (text.empty()) return "it is empty";
  if (text.size() > kMaxLockNameBytes) return "longer than 1024 bytes";
  return "";
}

std::string CheckSemaphoreName(std::string_view text) {
  if (std::string problem = CheckLockName(text); !problem.empty())
    return problem;
  return text.front() == '}' ? "it starts with '}'" : "";
}

constexpr int kMaxLimitPermits = 1'000'000;

// `*permits_at`: where a valid `permits` is (for the consistency check).
LimitConfig ReadLimit(Context& context, const Value& value,
                      std::optional<Value>* permits_at) {
  LimitConfig limit;
  bool permits_ok = false;
  MapReader map(context, value,
                "a limit: a mapping with name, permits and optionally take");
  if (std::optional<Value> name =
          map.Require("name", "the name of the limit's semaphore")) {
    auto parse = Checked("a semaphore name", CheckSemaphoreName);
    if (auto parsed = parse(context, *name)) limit.name = *parsed;
  }
  if (std::optional<Value> permits =
          map.Require("permits", "how many runs at once (1..1000000)")) {
    if (auto parsed = ParseInt(context, *permits, 1, kMaxLimitPermits)) {
      limit.permits = *parsed;
      permits_ok = true;
      *permits_at = permits;
    }
  }
  if (std::optional<Value> take = map.Get("take")) {
    if (auto parsed = ParseInt(context, *take, 1, kMaxLimitPermits)) {
      limit.take = *parsed;
      if (permits_ok && limit.take > limit.permits) {
        context.Error(*take, "take " + std::to_string(limit.take) +
                                 " is more than the limit's " +
                                 std::to_string(limit.permits) + " permits");
      }
    }
  }
  map.Finish();
  return limit;
}

Settings ReadSettings(Context& context, const Value& value,
                      std::string_view expected) {
  Settings out;
  MapReader map(context, value, expected);
  for (const MapReader::Entry& entry : map.entries()) {
    if (entry.key.empty()) {
      context.Error(entry.value.key_mark, entry.value.path,
                    "expected a setting name, found an empty key");
      continue;
    }
    if (std::optional<Scalar> scalar = ParseScalar(context, entry.value)) {
      out[entry.key] = std::move(*scalar);
    }
  }
  return out;
}

// A schedule and where its name is, for the uniqueness check.
struct ReadScheduleResult {
  ScheduleConfig schedule;
  std::optional<Value> name;           // set when the name is valid
  std::optional<Value> limit_permits;  // set when the limit's permits are
  // Where the lock is chosen (for the lock_mode consistency check): its
  // lock_mode when given, else its lock, else its name; unset when the lock
  // (or the lock_mode) is not valid.
  std::optional<Value> lock_at;
};

// `lock_mode:` of a schedule: "write", or an error ("read" explained).
std::optional<LockMode> ReadScheduleLockMode(Context& context,
                                             const Value& value) {
  const std::optional<size_t> index =
      ParseChoice(context, value, {"read", "write"});
  if (!index) return std::nullopt;
  if (*index == 0) {
    context.Error(value,
                  "expected write (or no lock_mode) for a schedule, found "
                  "'read': an occurrence runs once, under a lock one worker "
                  "holds, and a read lock is shared by every worker that "
                  "asks for it (lock_mode: read is for Kafka jobs)");
    return std::nullopt;
  }
  return LockMode::kWrite;
}

ReadScheduleResult ReadSchedule(Context& context, const Value& value) {
  ReadScheduleResult out;
  ScheduleConfig& schedule = out.schedule;
  MapReader map(context, value, "a schedule");  // a mapping: ReadSchedules
  if (std::optional<Value> name = map.Require("name", "a schedule name")) {
    auto parse = Checked("a schedule name", CheckScheduleName);
    if (auto parsed = parse(context, *name)) {
      schedule.name = *parsed;
      out.name = name;
    }
  }
  schedule.lock = schedule.name;
  bool lock_ok = out.name.has_value();
  std::optional<Value> lock_at = out.name;
  if (std::optional<Value> lock = map.Get("lock")) {
    auto parse = Checked("a lock name", CheckLockName);
    const std::optional<std::string> parsed = parse(context, *lock);
    if (parsed) schedule.lock = *parsed;
    lock_ok = parsed.has_value();
    lock_at = lock;
  }
  if (std::optional<Value> lock_mode = map.Get("lock_mode")) {
    schedule.lock_mode = ReadScheduleLockMode(context, *lock_mode);
    lock_ok = lock_ok && schedule.lock_mode.has_value();
    lock_at = lock_mode;
  }
  if (lock_ok) out.lock_at = lock_at;
  std::optional<Value> every = map.Get("every");
  if (every) schedule.every = ParseDurationValue(context, *every, seconds(1));
  std::optional<Value> cron = map.Get("cron");
  if (cron) {
    if (std::optional<std::string> text =
            context.Text(*cron, "a cron expression such as \"0 3 * * *\"")) {
      try {
        schedule.cron = CronSchedule::Parse(*text);
      } catch (const ConfigError& e) {
        context.Error(*cron, e.what());
      }
    }
  }
  if (every && cron) {
    context.Error(cron->key_mark, cron->path,
                  "expected either 'every' or 'cron', found both");
  } else if (!every && !cron) {
    context.Error(value.key_mark, ChildPath(value.path, "every"),
                  "missing required key; expected 'every' (an interval such "
                  "as 1h) or 'cron' (such as \"0 3 * * *\")");
  }
  map.Read("catch_up", schedule.catch_up, Int(0, kMaxCatchUp));
  if (std::optional<Value> limit = map.Get("limit")) {
    schedule.limit = ReadLimit(context, *limit, &out.limit_permits);
  }
  if (std::optional<Value> handler =
          map.Require("handler", "the name of the handler that runs the job")) {
    auto parse = Checked("a handler name", CheckNonEmpty);
    if (auto parsed = parse(context, *handler)) schedule.handler = *parsed;
  }
  if (std::optional<Value> payload = map.Get("payload")) {
    schedule.payload =
        ReadSettings(context, *payload, "a mapping of payload fields");
  }
  map.Finish();
  return out;
}

std::vector<ScheduleConfig> ReadSchedules(Context& context,
                                          const Value& value) {
  std::vector<ScheduleConfig> out;
  const YAML::Node& node = value.node;
  if (!node.IsDefined() || node.IsNull()) return out;
  if (!node.IsSequence()) {
    context.Error(value, "expected a list of schedules, found " + Found(node));
    return out;
  }
  std::map<std::string, int> first_line;  // by schedule name
  // By limit name: its permits, and where they were first given. A limit is
  // one semaphore: two numbers would reset it back and forth.
  std::map<std::string, std::pair<int, int>> limits;
  // By lock name: whether its first schedule takes the read-write lock
  // (gives lock_mode), and on which line. The plain lock and the read-write
  // lock of one name do not exclude each other.
  std::map<std::string, std::pair<bool, int>> lock_kinds;
  for (size_t i = 0; i < node.size(); ++i) {
    const Value item_value = Item(value, i);
    const YAML::Node& item = item_value.node;
    if (!item.IsMap()) {
      context.Error(item_value,
                    "expected a schedule: a mapping with name, every or "
                    "cron, handler; found " +
                        Found(item));
      continue;
    }
    ReadScheduleResult read = ReadSchedule(context, item_value);
    if (read.name) {
      const auto [it, inserted] =
          first_line.emplace(read.schedule.name, read.name->mark.line + 1);
      if (!inserted) {
        context.Error(*read.name, "duplicate schedule name '" +
                                      read.schedule.name +
                                      "' (first used on line " +
                                      std::to_string(it->second) + ")");
      }
    }
    if (read.limit_permits && !read.schedule.limit->name.empty()) {
      const LimitConfig& limit = *read.schedule.limit;
      const auto [it, inserted] = limits.emplace(
          limit.name,
          std::pair{limit.permits, read.limit_permits->mark.line + 1});
      if (!inserted && it->second.first != limit.permits) {
        context.Error(*read.limit_permits,
                      "limit '" + limit.name + "' has " +
                          std::to_string(it->second.first) +
                          " permits on line " +
                          std::to_string(it->second.second) +
                          ": one limit, one number of permits");
      }
    }
    if (read.lock_at) {
      const ScheduleConfig& schedule = read.schedule;
      const bool rw = schedule.lock_mode.has_value();
      const auto [it, inserted] = lock_kinds.emplace(
          schedule.lock, std::pair{rw, read.lock_at->mark.line + 1});
      if (!inserted && it->second.first != rw) {
        const std::string line = std::to_string(it->second.second);
        context.Error(
            *read.lock_at,
            "lock '" + schedule.lock + "' is " +
                (rw ? "the plain lock (no lock_mode) on line " + line +
                          " and the read-write lock (lock_mode) here"
                    : "the read-write lock (lock_mode) on line " + line +
                          " and the plain lock (no lock_mode) here") +
                ": the two are different locks that do not exclude each "
                "other; give every schedule on one lock lock_mode, or none");
      }
    }
    out.push_back(std::move(read.schedule));
  }
  return out;
}

SourcesConfig ReadSources(Context& context, const Value& value,
                          bool has_kafka) {
  SourcesConfig out;
  MapReader map(context, value, "a mapping of job sources");
  const Value kafka_jobs =
      map.Get("kafka_jobs").value_or(Absent(value, "kafka_jobs"));
  MapReader jobs(context, kafka_jobs, "a mapping with enabled, group");
  if (std::optional<Value> enabled = jobs.Get("enabled")) {
    if (std::optional<bool> parsed = ParseBool(context, *enabled)) {
      out.kafka_jobs.enabled = *parsed;
      if (*parsed && !has_kafka) {
        context.Error(*enabled,
                      "expected false without a kafka section, found true "
                      "(jobs arrive on kafka.jobs_topic: add kafka.bootstrap)");
      }
    }
  }
  jobs.Read("group", out.kafka_jobs.group,
            Checked("a Kafka consumer group", CheckNonEmpty));
  jobs.Finish();
  if (std::optional<Value> schedules = map.Get("schedules")) {
    out.schedules = ReadSchedules(context, *schedules);
  }
  map.Finish();
  return out;
}

}  // namespace

WorkerConfig ReadWorker(Context& context, const Value& value, bool has_kafka) {
  WorkerConfig out;
  MapReader map(context, value, "a mapping of worker settings");
  map.Read("threads", out.threads, Int(1, 1024));
  map.Read("grace_period", out.grace_period, Duration(milliseconds(0)));
  map.Read("max_attempts", out.max_attempts, Int(1, 100));
  map.Read("dedup_ttl", out.dedup_ttl, Duration(seconds(1)));
  map.Read("health_listen", out.health_listen,
           Checked(kListenExpected, CheckListen));
  map.Read("state_dir", out.state_dir,
           Checked("a directory path, or \"\" for none", CheckOptionalPath));
  out.sources = ReadSources(
      context, map.Get("sources").value_or(Absent(value, "sources")),
      has_kafka);
  if (std::optional<Value> handlers = map.Get("handlers")) {
    MapReader by_name(context, *handlers,
                      "a mapping of handler names to their settings");
    for (const MapReader::Entry& entry : by_name.entries()) {
      out.handlers[entry.key] = ReadSettings(
          context, entry.value, "a mapping of settings for this handler");
    }
  }
  map.Finish();
  return out;
}

}  // namespace lockfleet::config::internal
