// What the on-call subcommands of `lockfleet jobs` (`dead ...`, `status`)
// share: where the deployment's Redis and jobs topic are, how failures map to
// messages and exit statuses, and Redis-style globs for --reason.
//
// Thread-safety: none needed; used while one command runs.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "connection_options.h"
#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/redis_client.h"
#include "redis_glob.h"

namespace lockfleet::cli {

// The jobs topic as --bootstrap/--topic/--group or the config name it.
struct JobsKafka {
  std::string bootstrap;  // "" when neither names one: no Kafka
  std::string topic = "lockfleet.jobs";
  std::string group = "lockfleet-workers";
  std::string client_id = "lockfleet";
  std::map<std::string, std::string> properties;  // kafka.properties
  std::string source;  // "--bootstrap" or "FILE: kafka.bootstrap"
};

// Raw option values: the connection options (--config, --redis) and the
// jobs topic's (--bootstrap, --topic, --group when `group`).
struct JobsArgs {
  ConnectionArgs connection;
  std::string bootstrap;
  std::string topic;
  std::string group;
  CLI::Option* bootstrap_option = nullptr;
  CLI::Option* topic_option = nullptr;
  CLI::Option* group_option = nullptr;
};

// Declares --config and --redis (a running `lockfleet demo` is found without
// them) and, with `kafka`, --bootstrap and --topic, and, with `group`,
// --group.
void AddJobsOptions(CLI::App& app, JobsArgs& args, bool kafka, bool group);

struct JobsConnection {
  Connection connection;  // Redis, the key prefix, the config if any
  JobsKafka kafka;
};

// Resolves the options against the config (if any). Prints a bad config
// file's errors and returns nullopt with *status = 2. Throws UsageError for
// a malformed --bootstrap.
std::optional<JobsConnection> ResolveJobsConnection(const JobsArgs& args,
                                                    int* status);

// The frame of the dead-letter commands: resolves the options (a bad config
// file: its errors, status 2) and runs `body` with the connection, a Redis
// client and the dead-letter list's key, Redis errors reported as Guarded
// reports them.
int WithDeadLetters(
    const JobsArgs& args,
    const std::function<int(const JobsConnection& c, RedisClient& redis,
                            const std::string& key)>& body);

// `text` for one line of a table: control bytes and '\' escaped (\t, \n,
// \xNN), at most `max` bytes of it shown, "..." after a cut.
std::string Printable(std::string_view text, size_t max = 80);

}  // namespace lockfleet::cli
