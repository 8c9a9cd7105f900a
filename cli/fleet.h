// Fleet: one `lockfleet worker` process, built from a Config — the
// composition root that maps the config's structs onto each module's own
// options and wires the modules together:
//
//   RedisClient ← LockClient (observer: metrics, publisher: KafkaNotifier)
//   KafkaNotifier → LockClient (incoming unlock events), → metrics (delay)
//   JobRunner(LockClient, handlers) ← Worker(JobConsumer on the jobs topic)
//   MetricsServer (/metrics), HealthServer (/healthz ← Worker::Health)
//
// Construction connects to nothing it cannot do without: Redis must answer
// (a PING, or Error(kRedis...) is thrown); Kafka may be down (the notifier
// and the consumer retry in the background and count their errors).
#pragma once

#include <memory>
#include <string>

#include "config_options.h"
#include "lockfleet/config/config.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/metrics/http.h"
#include "lockfleet/metrics/metrics.h"
#include "lockfleet/notifier/kafka_notifier.h"
#include "lockfleet/worker/handler.h"
#include "lockfleet/worker/hold_journal.h"
#include "lockfleet/worker/worker.h"
#include "logger.h"

namespace lockfleet::cli {

struct FleetOverrides {
  std::string worker_id;       // Default: host:pid
  std::string metrics_listen;  // non-empty: replaces metrics.listen
  std::string health_listen;   // non-empty: replaces worker.health_listen
};

class Fleet {
 public:
  // Throws config::ConfigError for handler settings the registry refuses,
  // lockfleet::Error for Redis / Kafka / listen-address failures.
  Fleet(const config::Config& config, const FleetOverrides& overrides,
        std::shared_ptr<const worker::HandlerRegistry> handlers,
        const Logger& logger);
  // Shutdown(), then tears down in dependency order.
  ~Fleet();

  void Start();
  void Shutdown();  // graceful, see Worker::Shutdown

  std::string metrics_url() const;  // "" when not served
  std::string health_url() const;   // "" when not served
  const std::string& worker_id() const { return worker_id_; }

 private:
  void BuildWorker(const config::Config& config,
                   const FleetOverrides& overrides,
                   std::shared_ptr<const worker::HandlerRegistry> handlers);

  Logger logger_;
  std::string worker_id_;
  std::shared_ptr<metrics::Metrics> metrics_;
  std::shared_ptr<worker::HoldJournal> journal_;  // worker.state_dir
  std::shared_ptr<RedisClient> redis_;
  std::shared_ptr<notifier::KafkaNotifier> notifier_;
  std::shared_ptr<LockClient> locks_;
  std::shared_ptr<worker::JobRunner> runner_;
  std::unique_ptr<worker::Worker> worker_;
  std::unique_ptr<metrics::MetricsServer> metrics_server_;
  std::unique_ptr<metrics::HealthServer> health_server_;
};

}  // namespace lockfleet::cli
