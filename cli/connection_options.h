// Where a subcommand that talks to a deployment finds its Redis, its lock
// settings and its Kafka (`lock`, `locks`, `inspect`, `unlock`): an option,
// else the deployment's config file (--config, the worker's own loader and
// mapping), else the environment ($LOCKFLEET_REDIS, $LOCKFLEET_KAFKA,
// $LOCKFLEET_EVENT_KEY; not read with --config), else the defaults.
//
// Thread-safety: none needed; used while the command line is handled.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "event_key_options.h"
#include "lockfleet/config/config.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/redis_client.h"
#include "lockfleet/notifier/kafka_notifier.h"

namespace lockfleet::cli {

inline constexpr char kRedisUrlVariable[] = "LOCKFLEET_REDIS";
inline constexpr char kKafkaVariable[] = "LOCKFLEET_KAFKA";
inline constexpr char kDefaultRedisUrl[] = "redis://127.0.0.1:6379";

// Raw option values as CLI11 stores them. The options are declared by the
// subcommand (its own help texts) or by AddConnectionOptions.
struct ConnectionArgs {
  std::string config_path;
  std::string redis_url;
  std::string kafka;
  EventKeyArgs event_key;
  CLI::Option* config_option = nullptr;
  CLI::Option* redis_option = nullptr;
  CLI::Option* kafka_option = nullptr;  // null: the command has no Kafka
  // With neither --config, --redis nor $LOCKFLEET_REDIS: use a running
  // `lockfleet demo`'s config when there is one (demo_support.h).
  bool discover_demo = false;
};

// Declares --config, --redis and (with `kafka`) --kafka and the event-key
// options, with help texts for a tool that inspects or changes locks. Set
// args.discover_demo before.
void AddConnectionOptions(CLI::App& app, ConnectionArgs& args, bool kafka);

struct Connection {
  std::optional<config::Config> config;  // with --config
  RedisOptions redis;
  // Where redis.url came from, for messages: "--redis", "$LOCKFLEET_REDIS",
  // "FILE: redis.url" (also the running demo's FILE) or "default Redis URL".
  std::string redis_source;
  // The config's key prefix, lease, park cap, fairness and windows (the
  // defaults without a config); no publisher.
  LockClientOptions locks;
  // Unlock events; nullopt: no Kafka. event_keys is a SECRET.
  std::optional<notifier::KafkaOptions> kafka;
  // "--kafka", "$LOCKFLEET_KAFKA" or "FILE: kafka".
  std::string kafka_source;
  // The running demo's config file, when the connection came from it (with
  // discover_demo), or when a demo runs but this command, given no
  // connection, did not look for it (then `demo_ignored`).
  std::string demo_config;
  bool demo_ignored = false;
};

// Throws config::ConfigErrors for a bad --config file, UsageError for a bad
// event key.
Connection ResolveConnection(const ConnectionArgs& args);

// ResolveConnection, or std::nullopt with *status set to kExitUsage after
// printing what is wrong with the --config file. Says on stderr when the
// connection is a running demo's, or when a demo runs that it is not.
std::optional<Connection> Connect(const ConnectionArgs& args, int* status);

// A client for the connection's Redis. Throws UsageError for a bad URL
// (named with where it came from; its password redacted).
std::shared_ptr<RedisClient> NewRedis(const Connection& connection);

// One line for a Redis failure: the server's redacted URL (never the
// password), what failed, the error code and where the URL came from.
std::string DescribeRedisError(const Connection& connection,
                               const Error& error);

// Runs `body`, mapping what it throws to a message and an exit status:
// Error(kInvalidArgument) → kExitUsage; any other lockfleet Error (Redis
// unreachable, timed out, refused authentication) → kExitUnavailable,
// naming the server (redacted) and where its URL came from.
int Guarded(const Connection& connection, const std::function<int()>& body);

}  // namespace lockfleet::cli
