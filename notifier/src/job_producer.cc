#include <librdkafka/rdkafkacpp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "lockfleet/notifier/job_topic.h"
#include "rate_limited_log.h"
#include "rdkafka_common.h"

namespace lockfleet::notifier {
namespace {

constexpr int kQueueFullWaitMs = 100;  // between retries of a full queue
constexpr int kCloseFlushMs = 5000;

}  // namespace

class JobProducer::Impl final : public RdKafka::DeliveryReportCb,
                                public RdKafka::EventCb {
 public:
  explicit Impl(JobProducerOptions o)
      : options(std::move(o)), log(SinkOrStderr(options.log)) {
    Require(!options.bootstrap.empty(), "Kafka bootstrap servers are required");
    Require(!options.topic.empty(), "Kafka jobs topic is required");
    Require(options.message_timeout.count() > 0,
            "jobs message_timeout must be > 0");
    Properties props = CommonProperties(options.bootstrap, options.client_id);
    props.insert({
        // Acknowledged means on every in-sync replica; retries (after a
        // lost acknowledgement) cannot duplicate or reorder a record. The
        // embedded broker supports both (InitProducerId included).
        {"acks", "all"},
        {"enable.idempotence", "true"},
        {"message.timeout.ms", Millis(options.message_timeout)},
    });
    auto conf = MakeConf(props, options.properties, this);
    SetCallback(*conf, "dr_cb", static_cast<RdKafka::DeliveryReportCb*>(this));
    std::string err;
    producer.reset(RdKafka::Producer::create(conf.get(), err));
    if (!producer)
      throw Error(ErrorCode::kKafka, "cannot create Kafka producer: " + err);
  }

  ~Impl() override {
    producer->flush(kCloseFlushMs);
    uint64_t missing = Undelivered();
    if (missing > 0) {
      log(LogLevel::kWarning, std::to_string(missing) +
                                  " job record(s) not delivered to '" +
                                  options.topic + "'");
    }
  }

  void Produce(std::string_view key, std::string_view value) {
    // Counted first, so that `delivered` never overtakes `produced`.
    produced.fetch_add(1);
    while (true) {
      RdKafka::ErrorCode rc = producer->produce(
          options.topic, RdKafka::Topic::PARTITION_UA,
          RdKafka::Producer::RK_MSG_COPY, const_cast<char*>(value.data()),
          value.size(), key.empty() ? nullptr : key.data(), key.size(), 0,
          nullptr);
      if (rc == RdKafka::ERR_NO_ERROR) {
        producer->poll(0);  // serve delivery reports
        return;
      }
      if (rc == RdKafka::ERR__QUEUE_FULL) {
        producer->poll(kQueueFullWaitMs);  // deliveries make room
        continue;
      }
      produced.fetch_sub(1);
      throw Error(ErrorCode::kKafka, "cannot queue a job record for '" +
                                         options.topic +
                                         "': " + RdKafka::err2str(rc));
    }
  }

  uint64_t Undelivered() const {
    uint64_t d = delivered.load();  // before produced: never above it
    return produced.load() - d;
  }

  // Served by poll()/flush() on the calling thread.
  void dr_cb(RdKafka::Message& message) override {
    if (message.err() == RdKafka::ERR_NO_ERROR) {
      delivered.fetch_add(1);
      return;
    }
    failed.fetch_add(1);
    logs.Log("delivery", LogLevel::kWarning,
             "job record not delivered to '" + options.topic +
                 "': " + message.errstr(),
             log);
  }

  void event_cb(RdKafka::Event& event) override {
    LogClientEvent(event, logs, log,
                   "job records wait in the queue up to message_timeout");
  }

  JobProducerOptions options;
  LogSink log;
  RateLimitedLog logs;
  std::atomic<uint64_t> produced{0}, delivered{0}, failed{0};
  // Last: destroyed first, while everything its callbacks use still exists.
  std::unique_ptr<RdKafka::Producer> producer;
};

JobProducer::JobProducer(JobProducerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

JobProducer::~JobProducer() = default;

void JobProducer::Produce(std::string_view key, std::string_view value) {
  impl_->Produce(key, value);
}

uint64_t JobProducer::Flush(std::chrono::milliseconds timeout) {
  impl_->producer->flush(
      static_cast<int>(std::clamp<int64_t>(timeout.count(), 0, INT32_MAX)));
  return impl_->Undelivered();
}

JobProducerStats JobProducer::stats() const {
  impl_->producer->poll(0);  // serve pending delivery reports
  return {impl_->produced.load(), impl_->delivered.load(),
          impl_->failed.load()};
}

}  // namespace lockfleet::notifier
