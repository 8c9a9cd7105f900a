#include "jobs_support.h"

#include <cstdio>
#include <filesystem>

#include "command.h"
#include "config_options.h"
#include "demo_support.h"
#include "kafka_wakeups.h"
#include "lockfleet/config/error.h"
#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/redis_url.h"
#include "lockfleet/worker/runner.h"

namespace lockfleet::cli {

void AddJobsOptions(CLI::App& app, JobsArgs& args, bool kafka, bool group) {
  args.connection.discover_demo = true;
  AddConnectionOptions(app, args.connection, /*kafka=*/false);
  if (!kafka) return;
  args.bootstrap_option =
      app.add_option("--bootstrap", args.bootstrap,
                     "Kafka bootstrap servers of the jobs topic. Default: the "
                     "config's kafka.bootstrap")
          ->type_name("HOST:PORT");
  args.topic_option =
      app.add_option("--topic", args.topic,
                     "The jobs topic. Default: the config's kafka.jobs_topic, "
                     "else lockfleet.jobs")
          ->type_name("T");
  if (!group) return;
  args.group_option =
      app.add_option("--group", args.group,
                     "The workers' consumer group. Default: the config's "
                     "worker.sources.kafka_jobs.group, else lockfleet-workers")
          ->type_name("G");
}

std::optional<JobsConnection> ResolveJobsConnection(const JobsArgs& args,
                                                    int* status) {
  JobsConnection c;
  std::optional<Connection> connection = Connect(args.connection, status);
  if (!connection) return std::nullopt;
  c.connection = std::move(*connection);
  const std::optional<config::Config>& config = c.connection.config;
  if (config) {
    c.kafka.group = config->worker.sources.kafka_jobs.group;
    if (config->kafka) {
      notifier::JobProducerOptions jobs =
          JobProducerOptionsFrom(*config->kafka);
      c.kafka.bootstrap = std::move(jobs.bootstrap);
      c.kafka.topic = std::move(jobs.topic);
      c.kafka.client_id = std::move(jobs.client_id);
      c.kafka.properties = std::move(jobs.properties);
      c.kafka.source =
          (Given(args.connection.config_option) ? args.connection.config_path
                                                : c.connection.demo_config) +
          ": kafka.bootstrap";
    }
  }
  if (Given(args.bootstrap_option)) {
    if (const std::string problem = CheckBootstrap(args.bootstrap);
        !problem.empty()) {
      throw UsageError("--bootstrap " + Quoted(args.bootstrap) + ": " +
                       problem);
    }
    c.kafka.bootstrap = args.bootstrap;
    c.kafka.source = "--bootstrap";
  }
  if (Given(args.topic_option)) {
    if (args.topic.empty()) throw UsageError("--topic: must not be empty");
    c.kafka.topic = args.topic;
  }
  if (Given(args.group_option)) {
    if (args.group.empty()) throw UsageError("--group: must not be empty");
    c.kafka.group = args.group;
  }
  return c;
}

int WithDeadLetters(
    const JobsArgs& args,
    const std::function<int(const JobsConnection& c, RedisClient& redis,
                            const std::string& key)>& body) {
  int status = kExitOk;
  const std::optional<JobsConnection> c = ResolveJobsConnection(args, &status);
  if (!c) return status;
  return Guarded(c->connection, [&] {
    auto redis = NewRedis(c->connection);
    return body(
        *c, *redis,
        worker::JobRunner::DeadLetterKey(c->connection.locks.key_prefix));
  });
}

std::string Printable(std::string_view text, size_t max) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < max; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > max) out += "...";
  return out;
}

}  // namespace lockfleet::cli
