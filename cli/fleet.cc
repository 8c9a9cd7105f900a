#include "fleet.h"

#include <utility>

#include "lockfleet/config/duration.h"
#include "lockfleet/config/error.h"
#include "lockfleet/config/event_keys.h"
#include "lockfleet/lockcore/error.h"
#include "lockfleet/notifier/event_auth.h"
#include "lockfleet/notifier/job_topic.h"

namespace lockfleet::cli {

using config::LogLevel;
using std::chrono::milliseconds;

namespace {

// The config module cannot see the notifier's minimum: keep them one.
static_assert(config::kMinEventKeyBytes == notifier::kMinEventKeyBytes);

}  // namespace

Fleet::Fleet(const config::Config& config, const FleetOverrides& overrides,
             std::shared_ptr<const worker::HandlerRegistry> handlers,
             const Logger& logger)
    : logger_(logger),
      worker_id_(overrides.worker_id.empty() ? worker::DefaultWorkerId()
                                             : overrides.worker_id),
      metrics_(std::make_shared<metrics::Metrics>()) {
  if (const std::vector<std::string> problems =
          handlers->Validate(config.worker.handlers);
      !problems.empty()) {
    std::string message;
    for (const std::string& problem : problems) {
      message += (message.empty() ? "" : "; ") + problem;
    }
    throw config::ConfigError(message);
  }

  if (!config.worker.state_dir.empty()) {
    try {
      journal_ = worker::HoldJournal::Open(config.worker.state_dir);
    } catch (const std::runtime_error& e) {
      throw config::ConfigError(std::string("worker.state_dir: ") + e.what());
    }
  }
  redis_ = std::make_shared<RedisClient>(RedisOptionsFrom(config.redis));
  redis_->Execute({"PING"});  // fail fast: Redis must be there to start
  metrics_->AddRedisRoundTrips(
      [weak = std::weak_ptr<RedisClient>(redis_)]() -> uint64_t {
        const auto redis = weak.lock();
        return redis ? redis->round_trips() : 0;
      });

  LockClientOptions lock_options = LockOptionsFrom(config);
  lock_options.observer = metrics_->lock_observer();
  // Not the worker id alone: lock owner tokens derive from the client id, so
  // two processes given the same --id (a copied template, a restarted
  // container with the same hostname and pid) would share holds. The worker
  // id stays readable in front.
  lock_options.client_id_prefix = worker_id_ + "/";
  if (config.kafka) {
    notifier::KafkaOptions kafka = KafkaOptionsFrom(*config.kafka);
    kafka.log = logger_.NotifierSink("kafka");
    kafka.on_delay = [metrics = metrics_](std::chrono::nanoseconds delay) {
      metrics->ObserveNotificationDelay(delay);
    };
    notifier_ = std::make_shared<notifier::KafkaNotifier>(std::move(kafka));
    // Weak: the notifier holds the metrics (on_delay); no cycle.
    metrics_->AddNotifierStats(
        [weak = std::weak_ptr<notifier::KafkaNotifier>(notifier_)] {
          const auto notifier = weak.lock();
          return notifier ? notifier->stats() : notifier::NotifierStats{};
        });
    lock_options.publisher = notifier_;
  }
  locks_ = std::make_shared<LockClient>(redis_, std::move(lock_options));
  if (notifier_) notifier_->Subscribe(locks_.get());
  if (journal_) {
    // The previous process of this state directory is gone (the journal's
    // flock says so): its grants need not wait out their lease.
    for (const worker::GiveBack& g : GiveBackLeftHolds(*journal_, *locks_)) {
      logger_.Log(g.outcome == worker::GiveBack::Outcome::kFailed
                      ? LogLevel::kWarning
                      : LogLevel::kInfo,
                  "worker", g.message);
    }
  }
  try {
    BuildWorker(config, overrides, std::move(handlers));
  } catch (...) {
    // REQUIRED before locks_ goes: no event may reach a destroyed client.
    if (notifier_) notifier_->Unsubscribe(locks_.get());
    throw;
  }
}

void Fleet::BuildWorker(
    const config::Config& config, const FleetOverrides& overrides,
    std::shared_ptr<const worker::HandlerRegistry> handlers) {
  runner_ = std::make_shared<worker::JobRunner>(
      locks_, redis_, std::move(handlers),
      worker::RunnerOptions{
          .key_prefix = config.redis.key_prefix,
          .lock_wait = config.locks.wait,
          .max_attempts = config.worker.max_attempts,
          .dedup_ttl = config.worker.dedup_ttl,
          .handler_settings = config.worker.handlers,
          .worker_id = worker_id_,
          .observer = metrics_->worker_observer(),
          .journal = journal_,
          .log = [logger = logger_](LogLevel level, std::string_view message) {
            logger.Log(level, "worker", message);
          }});

  std::unique_ptr<notifier::JobConsumer> jobs;
  if (config.worker.sources.kafka_jobs.enabled && config.kafka) {
    const config::KafkaConfig& kafka = *config.kafka;
    // Crash-looping: stay out of the jobs group for a while (each join and
    // each death of a member rebalances the whole group).
    const milliseconds join_delay =
        journal_ ? worker::JoinDelay(journal_->RecentCrashes())
                 : milliseconds(0);
    if (join_delay > milliseconds(0)) {
      logger_.Log(
          LogLevel::kWarning, "worker",
          "crash loop: the last " + std::to_string(journal_->RecentCrashes()) +
              " start(s) of this state directory ended within " +
              std::to_string(worker::HoldJournal::kCrashWindow.count()) +
              " s without a clean shutdown; joining the jobs group in " +
              config::FormatDuration(join_delay));
    }
    jobs = std::make_unique<notifier::JobConsumer>(notifier::JobConsumerOptions{
        .bootstrap = kafka.bootstrap,
        .topic = kafka.jobs_topic,
        .group = config.worker.sources.kafka_jobs.group,
        .client_id = kafka.client_id,
        .fetch_wait = kafka.fetch_wait,
        .join_delay = join_delay,
        .properties = kafka.properties,
        .log = logger_.NotifierSink("jobs")});
  }
  worker_ = std::make_unique<worker::Worker>(
      runner_,
      worker::WorkerOptions{.threads = config.worker.threads,
                            .grace_period = config.worker.grace_period,
                            .schedules = config.worker.sources.schedules},
      std::move(jobs));

  const std::string metrics_listen = overrides.metrics_listen.empty()
                                         ? config.metrics.listen
                                         : overrides.metrics_listen;
  if (!metrics_listen.empty()) {
    metrics_server_ =
        std::make_unique<metrics::MetricsServer>(metrics_, metrics_listen);
  }
  const std::string health_listen = overrides.health_listen.empty()
                                        ? config.worker.health_listen
                                        : overrides.health_listen;
  if (!health_listen.empty()) {
    health_server_ = std::make_unique<metrics::HealthServer>(
        [worker = worker_.get()] {
          const worker::HealthReport report = worker->Health();
          return metrics::HealthReport{report.healthy, report.detail};
        },
        health_listen);
  }
}

Fleet::~Fleet() {
  Shutdown();
  metrics_server_.reset();  // a scrape reads the notifier and Redis stats
  health_server_.reset();   // it calls into worker_
  worker_.reset();
  runner_.reset();
  if (notifier_) notifier_->Unsubscribe(locks_.get());
  locks_.reset();     // releases nothing: every job has ended
  notifier_.reset();  // flushes queued unlock events
}

void Fleet::Start() {
  worker_->Start();
  // Serving: from now on, an end without a graceful shutdown is a crash.
  if (journal_) journal_->MarkRunning();
}

void Fleet::Shutdown() {
  if (worker_) worker_->Shutdown();
  // Graceful: the next start on this state directory is no crash.
  if (journal_) journal_->MarkCleanExit();
}

std::string Fleet::metrics_url() const {
  return metrics_server_ ? metrics_server_->url() : "";
}

std::string Fleet::health_url() const {
  return health_server_ ? health_server_->url() : "";
}

}  // namespace lockfleet::cli
