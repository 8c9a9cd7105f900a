#include "jobs_status_command.h"

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include "jobs_dead_letters.h"
#include "jobs_support.h"
#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/fenced_resource.h"
#include "lockfleet/metrics/scrape.h"
#include "lockfleet/notifier/job_topic_status.h"
#include "metrics_targets.h"
#include "option_range.h"
#include "redis_scan.h"

namespace lockfleet::cli {
namespace {

using json = nlohmann::json;
using std::chrono::milliseconds;

constexpr int kScanCount = 1000;  // keys one SCAN call looks at
constexpr std::chrono::seconds kScrapeTimeout{2};

constexpr char kStatusFooter[] =
    R"(The jobs topic: per partition the committed offset of the workers'
consumer group (the next record it will consume; '-' none yet: it starts at
the earliest), the partition's end (high watermark) and the lag, the records
not consumed yet. The group's state and members, and which member owns which
partition, when the broker describes groups (a real Kafka does, the embedded
broker does not). Read without joining the group: nothing is committed and
no rebalance is triggered.

Running jobs: lockfleet_jobs_running summed over the workers' /metrics
(--metrics, else the config's metrics.targets). Dead letters: the length of
<prefix>:jobs:dead. Done markers: counted with SCAN in batches (never KEYS);
exact when the scan finished, else a lower bound (--scan-limit). Markers
expire after worker.dedup_ttl.

Kafka comes from --config (kafka.bootstrap, kafka.jobs_topic, properties;
worker.sources.kafka_jobs.group) or --bootstrap/--topic/--group; without
either, the jobs topic is left out.

Exit status:
  0   shown
  2   bad arguments or --config file
  69  Redis unreachable, or Kafka did not answer within --timeout (what
      could be read is shown all the same))";

struct StatusArgs {
  JobsArgs jobs;
  TargetArgs targets;
  bool json = false;
  int timeout_s = 10;
  long long scan_limit = 1'000'000;
};

struct MarkerCount {
  long long count = 0;
  bool exact = false;
  long long examined = 0;  // about: SCAN calls times their COUNT
  long long keys = 0;      // DBSIZE
};

// Done markers are FencedResource keys "<prefix>:res:{<lock>}:job:<id>" with
// lock and id encoded (no '{', '}' in the lock; no ':' in the id), so the
// glob finds every one of them; ParseKey then drops keys that only look
// alike (another prefix that starts the same, other parts).
MarkerCount CountDoneMarkers(RedisClient& redis, const std::string& prefix,
                             long long limit) {
  const std::string match = EscapeGlob(prefix) + ":res:{*}:job:*";
  std::unordered_set<std::string> seen;  // SCAN may return a key twice
  const ScanEnd end = ForEachScannedKey(
      redis, match, kScanCount,
      [&](const std::string& key) {
        const std::optional<ResourceKey> parsed = FencedResource::ParseKey(key);
        if (parsed && parsed->prefix == prefix && parsed->parts.size() == 2 &&
            parsed->parts[0] == "job") {
          seen.insert(key);
        }
        return true;
      },
      [&](long long calls) { return calls * kScanCount >= limit; });
  MarkerCount out;
  out.examined = end.calls * kScanCount;
  out.exact = end.complete;
  out.count = static_cast<long long>(seen.size());
  out.keys = 0;  // every master's (a cluster's keys are spread over them)
  for (const RedisNode& master : redis.Masters())
    out.keys += Checked(redis.ExecuteOn(master, {"DBSIZE"}), "DBSIZE").integer;
  return out;
}

std::string OrDash(int64_t value) {
  return value < 0 ? "-" : std::to_string(value);
}

json NullIfNegative(int64_t value) {
  return value < 0 ? json(nullptr) : json(value);
}

json KafkaJson(const JobsKafka& kafka,
               const std::optional<notifier::JobTopicStatus>& topic,
               const std::string& error) {
  json out = {{"bootstrap", kafka.bootstrap},
              {"topic", kafka.topic},
              {"group", kafka.group},
              {"error", error.empty() ? json(nullptr) : json(error)}};
  if (!topic) return out;
  out["topic_exists"] = topic->topic_exists;
  out["lag"] = NullIfNegative(topic->lag);
  json partitions = json::array();
  for (const notifier::PartitionStatus& p : topic->partitions) {
    partitions.push_back(
        {{"partition", p.partition},
         {"committed", p.committed ? json(*p.committed) : json(nullptr)},
         {"low", NullIfNegative(p.low)},
         {"high", NullIfNegative(p.high)},
         {"lag", NullIfNegative(p.lag)},
         {"owner", p.owner.empty() ? json(nullptr) : json(p.owner)},
         {"error", p.error.empty() ? json(nullptr) : json(p.error)}});
  }
  out["partitions"] = partitions;
  out["group_state"] =
      topic->group_state ? json(*topic->group_state) : json(nullptr);
  json members = json::array();
  for (const notifier::GroupMember& m : topic->members) {
    members.push_back({{"member_id", m.member_id},
                       {"client_id", m.client_id},
                       {"client_host", m.client_host},
                       {"partitions", m.partitions}});
  }
  out["members"] = topic->group_state ? members : json(nullptr);
  out["group_error"] =
      topic->group_error.empty() ? json(nullptr) : json(topic->group_error);
  return out;
}

std::string KafkaText(const JobsKafka& kafka,
                      const notifier::JobTopicStatus& topic) {
  std::ostringstream out;
  if (!topic.topic_exists) {
    out << "  the topic does not exist (no job was produced yet?)\n";
    return out.str();
  }
  out << "group        " << kafka.group << ": ";
  if (topic.group_state) {
    out << *topic.group_state << ", " << topic.members.size()
        << (topic.members.size() == 1 ? " member\n" : " members\n");
    for (const notifier::GroupMember& m : topic.members) {
      out << "  member " << m.member_id << " " << m.client_host
          << " partitions ";
      for (size_t i = 0; i < m.partitions.size(); ++i) {
        out << (i ? "," : "") << m.partitions[i];
      }
      out << (m.partitions.empty() ? "none\n" : "\n");
    }
  } else {
    out << "state unknown (" << topic.group_error << ")\n";
  }
  out << "PARTITION\tCOMMITTED\tEND\tLAG\tOWNER\n";
  for (const notifier::PartitionStatus& p : topic.partitions) {
    out << p.partition << "\t"
        << (p.committed ? std::to_string(*p.committed) : "-") << "\t"
        << OrDash(p.high) << "\t" << OrDash(p.lag) << "\t"
        << (p.owner.empty() ? "-" : p.owner)
        << (p.error.empty() ? "" : "\t(" + p.error + ")") << "\n";
  }
  out << "lag          "
      << (topic.lag < 0 ? "unknown (see the partitions)"
                        : std::to_string(topic.lag) +
                              (topic.lag == 1 ? " record" : " records"))
      << "\n";
  return out.str();
}

int RunStatus(const StatusArgs& args) {
  CheckRange("--timeout", args.timeout_s, 1, 600);
  if (args.scan_limit < 1) {
    throw UsageError("--scan-limit " + std::to_string(args.scan_limit) +
                     ": must be >= 1");
  }
  int status = kExitOk;
  const std::optional<JobsConnection> c =
      ResolveJobsConnection(args.jobs, &status);
  if (!c) return status;
  const std::vector<Endpoint> targets =
      ResolveTargets(args.targets, c->connection.config);
  const std::string& prefix = c->connection.locks.key_prefix;
  const std::string dead_key = worker::JobRunner::DeadLetterKey(prefix);

  // Redis: the dead letters and the done markers.
  std::optional<long long> dead;
  std::optional<MarkerCount> markers;
  std::string redis_error;
  try {
    auto redis = NewRedis(c->connection);
    dead =
        Checked(redis->Execute({"LLEN", dead_key}), "LLEN " + dead_key).integer;
    markers = CountDoneMarkers(*redis, prefix, args.scan_limit);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kInvalidArgument) throw UsageError(e.what());
    redis_error = DescribeRedisError(c->connection, e);
  }

  // Kafka: the jobs topic and its group.
  std::optional<notifier::JobTopicStatus> topic;
  std::string kafka_error;
  if (!c->kafka.bootstrap.empty()) {
    try {
      topic =
          notifier::ReadJobTopicStatus({.bootstrap = c->kafka.bootstrap,
                                        .topic = c->kafka.topic,
                                        .group = c->kafka.group,
                                        .client_id = c->kafka.client_id,
                                        .properties = c->kafka.properties},
                                       std::chrono::seconds(args.timeout_s));
    } catch (const Error& e) {
      if (e.code() == ErrorCode::kInvalidArgument) {
        throw UsageError(c->kafka.source + ": " + e.what());
      }
      kafka_error = std::string(e.what()) + " (from " + c->kafka.source + ")";
    }
  }

  // The workers: jobs running now.
  std::optional<double> running;
  std::vector<Scrape> scrapes;
  int answered = 0;
  if (!targets.empty()) {
    scrapes = ScrapeEach(targets, kScrapeTimeout);
    double sum = 0;
    for (const Scrape& s : scrapes) {
      if (!s.ok) continue;
      ++answered;
      sum += metrics::SumSamples(s.samples, "lockfleet_jobs_running");
    }
    if (answered > 0) running = sum;
  }

  if (args.json) {
    json out;
    out["kafka"] = c->kafka.bootstrap.empty()
                       ? json(nullptr)
                       : KafkaJson(c->kafka, topic, kafka_error);
    out["running_jobs"] = running ? json(*running) : json(nullptr);
    json workers = json::array();
    for (size_t i = 0; i < scrapes.size(); ++i) {
      workers.push_back(
          {{"target", targets[i].url},
           {"ok", scrapes[i].ok},
           {"running", scrapes[i].ok
                           ? json(metrics::SumSamples(scrapes[i].samples,
                                                      "lockfleet_jobs_running"))
                           : json(nullptr)},
           {"error", scrapes[i].ok ? json(nullptr) : json(scrapes[i].error)}});
    }
    out["workers"] = workers;
    out["dead_letters"] = dead ? json(*dead) : json(nullptr);
    out["done_markers"] = markers ? json{{"count", markers->count},
                                         {"exact", markers->exact},
                                         {"examined", markers->examined},
                                         {"keys", markers->keys}}
                                  : json(nullptr);
    out["redis_error"] =
        redis_error.empty() ? json(nullptr) : json(redis_error);
    std::cout << out.dump(-1, ' ', false, json::error_handler_t::replace)
              << "\n";
  } else {
    std::ostringstream out;
    if (c->kafka.bootstrap.empty()) {
      out << "jobs topic   not configured (give --config FILE with a kafka "
             "section, or --bootstrap HOST:PORT)\n";
    } else {
      out << "jobs topic   " << c->kafka.topic << " at " << c->kafka.bootstrap
          << " (from " << c->kafka.source << ")\n";
      if (topic) {
        out << KafkaText(c->kafka, *topic);
      } else {
        out << "  unavailable (see below)\n";
      }
    }
    out << "running jobs ";
    if (targets.empty()) {
      out << "unknown: no metrics targets (give --metrics HOST:PORT, or "
             "metrics.targets in the config)\n";
    } else if (!running) {
      out << "unknown: no worker's /metrics answered\n";
    } else {
      out << *running << " (" << answered << " of " << targets.size()
          << " workers answered)\n";
    }
    for (size_t i = 0; i < scrapes.size(); ++i) {
      if (!scrapes[i].ok) {
        out << "  " << targets[i].url << ": " << scrapes[i].error << "\n";
      }
    }
    out << "dead letters ";
    if (dead) {
      out << *dead << " (" << dead_key << ")\n";
    } else {
      out << "unknown (see below)\n";
    }
    out << "done markers ";
    if (markers) {
      out << (markers->exact ? "" : "at least ") << markers->count
          << (markers->exact
                  ? " (exact: a full SCAN of " + std::to_string(markers->keys) +
                        " keys)"
                  : " (the SCAN stopped after about " +
                        std::to_string(markers->examined) + " of " +
                        std::to_string(markers->keys) +
                        " keys: raise --scan-limit for the exact count)")
          << "\n";
    } else {
      out << "unknown (see below)\n";
    }
    std::cout << out.str();
  }
  if (!kafka_error.empty()) PrintError(kafka_error);
  if (!redis_error.empty()) PrintError(redis_error);
  return kafka_error.empty() && redis_error.empty() ? kExitOk
                                                    : kExitUnavailable;
}

}  // namespace

Subcommand AddStatusCommand(CLI::App& jobs, HelpFormatter& formatter) {
  CLI::App* app = jobs.add_subcommand(
      "status",
      "How the fleet stands on its jobs: consumer-group lag per partition "
      "of the jobs topic, jobs running, dead letters, done markers.");
  formatter.SetSynopsis(app,
                        "[--metrics HOST:PORT]... [--timeout S] "
                        "[--scan-limit N] [--json]");
  app->footer(kStatusFooter);
  auto args = std::make_shared<StatusArgs>();
  AddJobsOptions(*app, args->jobs, /*kafka=*/true, /*group=*/true);
  AddTargetOption(*app, args->targets);
  app->add_option("--timeout", args->timeout_s,
                  "Seconds to wait for Kafka (1..600). Default: 10")
      ->type_name("S");
  app->add_option("--scan-limit", args->scan_limit,
                  "Examine about N keys at most to count done markers. "
                  "Default: 1000000")
      ->type_name("N");
  app->add_flag("--json", args->json, "One JSON object");
  Subcommand subcommand;
  subcommand.app = app;
  subcommand.run = [args](const Context&) { return RunStatus(*args); };
  return subcommand;
}

}  // namespace lockfleet::cli
