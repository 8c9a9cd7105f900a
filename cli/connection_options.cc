#include "connection_options.h"

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>

#include "command.h"
#include "config_options.h"
#include "demo_support.h"
#include "lockfleet/config/error.h"
#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/redis_url.h"

namespace lockfleet::cli {

void AddConnectionOptions(CLI::App& app, ConnectionArgs& args, bool kafka) {
  args.config_option =
      app.add_option("--config", args.config_path,
                     "Read Redis (URL, timeouts, key_prefix) and Kafka "
                     "settings from the deployment's config file, as "
                     "'lockfleet worker' does; the options below override "
                     "it" +
                         std::string(args.discover_demo
                                         ? ". Default: the config of a "
                                           "running 'lockfleet demo', unless "
                                           "--redis or $LOCKFLEET_REDIS is "
                                           "given"
                                         : ""))
          ->type_name("FILE");
  args.redis_option =
      app.add_option("--redis", args.redis_url,
                     "Redis server: redis://[[user]:password@]host[:port][/db]"
                     ", rediss://... (TLS), unix:///path/to/redis.sock, "
                     "redis+sentinel://host:port[,host:port...]/MASTER or "
                     "redis+cluster://host:port[,host:port...]. "
                     "Default: the config's "
                     "redis.url, else $LOCKFLEET_REDIS, else " +
                         std::string(kDefaultRedisUrl))
          ->type_name("URL");
  if (!kafka) return;
  args.kafka_option =
      app.add_option("--kafka", args.kafka,
                     "Kafka bootstrap servers for the unlock event that wakes "
                     "waiters elsewhere at once. Default: the config's "
                     "kafka.bootstrap, else $LOCKFLEET_KAFKA, else no Kafka "
                     "(waiters notice within their park cap); '' turns it off")
          ->type_name("BOOTSTRAP");
  AddEventKeyOptions(app, args.event_key);
}

namespace {

// Whether the command line and environment name no Redis at all.
bool NoConnectionGiven(const ConnectionArgs& args) {
  if (Given(args.config_option) || Given(args.redis_option)) return false;
  const char* env = std::getenv(kRedisUrlVariable);
  return env == nullptr || *env == '\0';
}

}  // namespace

Connection ResolveConnection(const ConnectionArgs& args) {
  Connection c;
  std::string path = Given(args.config_option) ? args.config_path : "";
  if (NoConnectionGiven(args)) {
    if (const std::optional<std::filesystem::path> demo = FindRunningDemo()) {
      c.demo_config = demo->string();
      c.demo_ignored = !args.discover_demo;
      if (args.discover_demo) path = c.demo_config;
    }
  }
  if (!path.empty()) {
    c.config = config::LoadFile(path);  // ConfigErrors
    c.redis = RedisOptionsFrom(c.config->redis);
    c.redis_source = path + ": redis.url";
    c.locks = LockOptionsFrom(*c.config);
    if (c.config->kafka) {
      c.kafka = KafkaOptionsFrom(*c.config->kafka);
      c.kafka_source = path + ": kafka";
    }
  } else {
    if (const char* env = std::getenv(kRedisUrlVariable);
        env != nullptr && *env != '\0') {
      c.redis.url = env;
      c.redis_source = std::string("$") + kRedisUrlVariable;
    } else {
      c.redis.url = kDefaultRedisUrl;
      c.redis_source = "default Redis URL";
    }
    if (const char* env = std::getenv(kKafkaVariable);
        args.kafka_option != nullptr && env != nullptr && *env != '\0') {
      c.kafka = notifier::KafkaOptions{.bootstrap = env};
      c.kafka_source = std::string("$") + kKafkaVariable;
    }
  }
  if (Given(args.redis_option)) {
    c.redis.url = args.redis_url;
    c.redis_source = "--redis";
  }
  if (args.kafka_option == nullptr) {
    c.kafka.reset();  // the command publishes nothing
    return c;
  }
  if (args.kafka_option->count() > 0) {
    if (args.kafka.empty()) {
      c.kafka.reset();  // '' turns Kafka off
    } else {
      // Over a config: its other Kafka settings (properties) still apply.
      if (!c.kafka) c.kafka.emplace();
      c.kafka->bootstrap = args.kafka;
      c.kafka_source = "--kafka";
    }
  }
  // Keys: an option names them; without one, the config's (its
  // event_key_env / event_key_file), else $LOCKFLEET_EVENT_KEY.
  const bool key_option =
      Given(args.event_key.env_option) || Given(args.event_key.file_option);
  if (c.kafka && (key_option || !c.config)) {
    c.kafka->event_keys = ResolveEventKeys(args.event_key);
  }
  return c;
}

// One line for a Redis failure, naming the server (redacted) and where its
// URL came from.
std::string DescribeRedisError(const Connection& connection,
                               const Error& error) {
  // lockcore's connection errors name the server already (redacted).
  std::string url;
  try {
    url = ParseRedisUrl(connection.redis.url).Redacted();
  } catch (const Error&) {
  }
  const std::string what = error.what();
  return (url.empty() || what.find(url) != std::string::npos
              ? what
              : "Redis at " + url + ": " + what) +
         " (" + std::string(ErrorCodeName(error.code())) + "; from " +
         connection.redis_source + ")";
}

int Guarded(const Connection& connection, const std::function<int()>& body) {
  try {
    return body();
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kInvalidArgument) {
      PrintError(e.what());
      return kExitUsage;
    }
    PrintError(DescribeRedisError(connection, e));
    return kExitUnavailable;
  }
}

// The connection, or an exit status for a bad file or option.
std::optional<Connection> Connect(const ConnectionArgs& args, int* status) {
  try {
    Connection connection = ResolveConnection(args);
    if (connection.demo_ignored) {
      PrintError("note: a 'lockfleet demo' is running; this acts on " +
                 connection.redis_source + ", not on it (--config " +
                 connection.demo_config + " would)");
    } else if (!connection.demo_config.empty()) {
      PrintError("using the running demo's config " + connection.demo_config);
    }
    return connection;
  } catch (const config::ConfigErrors& e) {
    for (const config::Diagnostic& d : e.errors()) PrintError(d.ToString());
    *status = kExitUsage;
    return std::nullopt;
  }
}

std::shared_ptr<RedisClient> NewRedis(const Connection& connection) {
  try {
    return std::make_shared<RedisClient>(connection.redis);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kInvalidArgument) throw;
    throw UsageError(connection.redis_source + ": " + e.what());
  }
}

}  // namespace lockfleet::cli
