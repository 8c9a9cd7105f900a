#include "connection_options.h"

#include <cstdlib>

#include "config_options.h"

namespace lockfleet::cli {

void AddConnectionOptions(CLI::App& app, ConnectionArgs& args, bool kafka) {
  args.config_option =
      app.add_option("--config", args.config_path,
                     "Read Redis (URL, timeouts, key_prefix) and Kafka "
                     "settings from the deployment's config file, as "
                     "'lockfleet worker' does; the options below override it")
          ->type_name("FILE");
  args.redis_option =
      app.add_option("--redis", args.redis_url,
                     "Redis server: redis://[[user]:password@]host[:port][/db]"
                     " or unix:///path/to/redis.sock. Default: the config's "
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

Connection ResolveConnection(const ConnectionArgs& args) {
  Connection c;
  if (args.config_option != nullptr && args.config_option->count() > 0) {
    c.config = config::LoadFile(args.config_path);  // ConfigErrors
    c.redis = RedisOptionsFrom(c.config->redis);
    c.redis_source = args.config_path + ": redis.url";
    c.locks = LockOptionsFrom(*c.config);
    if (c.config->kafka) {
      c.kafka = KafkaOptionsFrom(*c.config->kafka);
      c.kafka_source = args.config_path + ": kafka";
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
  if (args.redis_option != nullptr && args.redis_option->count() > 0) {
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
  const bool key_option = (args.event_key.env_option != nullptr &&
                           args.event_key.env_option->count() > 0) ||
                          (args.event_key.file_option != nullptr &&
                           args.event_key.file_option->count() > 0);
  if (c.kafka && (key_option || !c.config)) {
    c.kafka->event_keys = ResolveEventKeys(args.event_key);
  }
  return c;
}

}  // namespace lockfleet::cli
