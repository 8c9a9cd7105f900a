#include "config_options.h"

namespace lockfleet::cli {

RedisOptions RedisOptionsFrom(const config::RedisConfig& redis) {
  // TLS is on for a rediss:// url (the config allows redis.tls only then),
  // so `enabled` stays false: the URL says it.
  return RedisOptions{.url = redis.url,
                      .pool_size = redis.pool_size,
                      .connect_timeout = redis.connect_timeout,
                      .command_timeout = redis.command_timeout,
                      .tls = TlsOptions{redis.tls, /*enabled=*/false},
                      .sentinel_auth = redis.sentinel};
}

LockClientOptions LockOptionsFrom(const config::Config& config) {
  return LockClientOptions{.key_prefix = config.redis.key_prefix,
                           .default_lease = config.locks.lease,
                           .park_cap = config.locks.park_cap,
                           .fair = config.locks.fair,
                           .presence_window = config.locks.presence_window,
                           .claim_window = config.locks.claim_window,
                           .min_replicas = config.redis.min_replicas,
                           .replica_timeout = config.redis.replica_timeout,
                           .spin_max_hold = config.locks.spin_max_hold};
}

notifier::KafkaOptions KafkaOptionsFrom(const config::KafkaConfig& kafka) {
  return notifier::KafkaOptions{
      .bootstrap = kafka.bootstrap,
      .topic = kafka.unlock_topic,
      .fetch_wait = kafka.fetch_wait,
      .fan_out = kafka.fan_out == config::FanOut::kTargeted
                     ? notifier::FanOut::kTargeted
                     : notifier::FanOut::kBroadcast,
      .targeted_replay = kafka.targeted_replay,
      .targeted_linger = kafka.targeted_linger,
      .message_timeout = kafka.message_timeout,
      .queue_max_messages = kafka.queue_max_messages,
      .properties = kafka.properties,
      .client_id = kafka.client_id,
      .event_keys = kafka.event_keys};
}

notifier::JobProducerOptions JobProducerOptionsFrom(
    const config::KafkaConfig& kafka) {
  return notifier::JobProducerOptions{.bootstrap = kafka.bootstrap,
                                      .topic = kafka.jobs_topic,
                                      .client_id = kafka.client_id,
                                      .properties = kafka.properties};
}

}  // namespace lockfleet::cli
