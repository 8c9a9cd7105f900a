// The module options a deployment config describes, for every subcommand
// that reads one with --config (`worker`, `lock`, `jobs ...`): one
// mapping, so a tool and the fleet it shares locks with agree on the key
// prefix, the windows and the Kafka settings (kafka.properties: SASL/SSL).
//
// Thread-safety: plain functions of their arguments.
#pragma once

#include "lockfleet/config/config.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/redis_client.h"
#include "lockfleet/notifier/job_topic.h"
#include "lockfleet/notifier/kafka_notifier.h"

namespace lockfleet::cli {

RedisOptions RedisOptionsFrom(const config::RedisConfig& redis);
// Everything but the publisher, clock, observer and client id.
LockClientOptions LockOptionsFrom(const config::Config& config);
// Everything but the log sink and on_delay.
notifier::KafkaOptions KafkaOptionsFrom(const config::KafkaConfig& kafka);
// The jobs topic (kafka.bootstrap, kafka.jobs_topic, the client id and
// properties): everything but the message timeout and the log sink.
notifier::JobProducerOptions JobProducerOptionsFrom(
    const config::KafkaConfig& kafka);

}  // namespace lockfleet::cli
