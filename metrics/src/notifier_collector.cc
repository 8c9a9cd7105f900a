#include "notifier_collector.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "lockfleet/notifier/unlock_codec.h"
#include "prometheus/client_metric.h"
#include "prometheus/metric_type.h"

namespace lockfleet::metrics::internal {
namespace {

using prometheus::MetricFamily;
using prometheus::MetricType;

// Every reason the codec can report, so each has a (zero) series.
constexpr notifier::DecodeError kDecodeErrors[] = {
    notifier::DecodeError::kTooLarge,     notifier::DecodeError::kNotJson,
    notifier::DecodeError::kNotObject,    notifier::DecodeError::kWrongVersion,
    notifier::DecodeError::kMissingField, notifier::DecodeError::kBadField,
    notifier::DecodeError::kUnsigned,     notifier::DecodeError::kBadSignature,
};

MetricFamily& Begin(std::vector<MetricFamily>& out, const char* name,
                    const char* help, MetricType type) {
  MetricFamily family;
  family.name = name;
  family.help = help;
  family.type = type;
  out.push_back(std::move(family));
  return out.back();
}

void AddSample(MetricFamily& family, double value,
               std::vector<prometheus::ClientMetric::Label> labels = {}) {
  prometheus::ClientMetric metric;
  metric.label = std::move(labels);
  if (family.type == MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  family.metric.push_back(std::move(metric));
}

// A family with one unlabelled sample.
void Emit(std::vector<MetricFamily>& out, const char* name, const char* help,
          MetricType type, uint64_t value) {
  AddSample(Begin(out, name, help, type), static_cast<double>(value));
}

// A counter family with one sample per value of `label`.
void Emit(std::vector<MetricFamily>& out, const char* name, const char* help,
          const char* label, const std::map<std::string, uint64_t>& values) {
  MetricFamily& family = Begin(out, name, help, MetricType::Counter);
  for (const auto& [label_value, value] : values)
    AddSample(family, static_cast<double>(value), {{label, label_value}});
}

void Accumulate(notifier::NotifierStats& sum,
                const notifier::NotifierStats& s) {
  sum.published += s.published;
  sum.publish_dropped += s.publish_dropped;
  sum.delivered += s.delivered;
  sum.delivery_failed += s.delivery_failed;
  sum.consumed += s.consumed;
  for (const auto& [reason, count] : s.malformed_by_reason)
    sum.malformed_by_reason[reason] += count;
  sum.consumer_errors += s.consumer_errors;
  sum.transport_errors += s.transport_errors;
  sum.partitions += s.partitions;
  sum.fetched_partitions += s.fetched_partitions;
  sum.partition_assigns += s.partition_assigns;
  sum.partition_unassigns += s.partition_unassigns;
}

}  // namespace

void NotifierCollector::Add(std::function<notifier::NotifierStats()> read) {
  std::lock_guard lock(mu_);
  sources_.push_back(std::move(read));
}

void NotifierCollector::AddRoundTrips(std::function<uint64_t()> read) {
  std::lock_guard lock(mu_);
  round_trips_.push_back(std::move(read));
}

void NotifierCollector::CollectRoundTrips(
    std::vector<MetricFamily>& out) const {
  std::vector<std::function<uint64_t()>> sources;
  {
    std::lock_guard lock(mu_);
    sources = round_trips_;
  }
  if (sources.empty()) return;
  uint64_t sum = 0;
  for (const auto& read : sources) {
    try {
      sum += read();
    } catch (...) {  // left out of this scrape, as notifier sources are
    }
  }
  Emit(out, "lockfleet_redis_round_trips_total",
       "Requests (commands, scripts and pipelines) sent to Redis and answered.",
       MetricType::Counter, sum);
}

std::vector<MetricFamily> NotifierCollector::Collect() const {
  std::vector<MetricFamily> out;
  CollectRoundTrips(out);
  std::vector<std::function<notifier::NotifierStats()>> sources;
  {
    std::lock_guard lock(mu_);
    sources = sources_;
  }
  if (sources.empty()) return out;

  // Sources are read outside the lock: a slow one must not block Add().
  notifier::NotifierStats sum;
  uint64_t ready = 0;
  for (const auto& read : sources) {
    try {
      const notifier::NotifierStats s = read();
      Accumulate(sum, s);
      if (s.assigned) ++ready;
    } catch (...) {
      // Documented: a failing source is left out of this scrape.
    }
  }
  std::map<std::string, uint64_t> malformed;
  for (notifier::DecodeError e : kDecodeErrors)
    malformed[notifier::DecodeErrorName(e)] = 0;
  for (const auto& [reason, count] : sum.malformed_by_reason)
    malformed[reason] += count;

  Emit(out, "lockfleet_unlock_events_published_total",
       "Unlock events handed to the Kafka producer.", MetricType::Counter,
       sum.published);
  Emit(out, "lockfleet_unlock_events_delivered_total",
       "Unlock events the Kafka broker acknowledged.", MetricType::Counter,
       sum.delivered);
  Emit(out, "lockfleet_unlock_events_publish_failures_total",
       "Unlock events not delivered, by reason: dropped (refused at once: "
       "producer queue full, bad topic) or delivery (not delivered within "
       "message_timeout).",
       "reason",
       {{"dropped", sum.publish_dropped}, {"delivery", sum.delivery_failed}});
  Emit(out, "lockfleet_unlock_events_consumed_total",
       "Well-formed unlock events received from Kafka.", MetricType::Counter,
       sum.consumed);
  Emit(out, "lockfleet_unlock_events_malformed_total",
       "Unlock event records dropped as malformed, by reason; unsigned and "
       "bad_signature: failed authentication (kafka.event_key_*).",
       "reason", malformed);
  Emit(
      out, "lockfleet_kafka_errors_total",
      "Kafka errors, by kind: consumer (fetch and transport errors the "
      "unlock-event consumer saw) or transport (broker connection failures, "
      "producer and consumer).",
      "client",
      {{"consumer", sum.consumer_errors}, {"transport", sum.transport_errors}});
  Emit(out, "lockfleet_kafka_consumer_assigned",
       "Notifiers whose unlock-event consumer has its partitions assigned (1 "
       "per ready notifier).",
       MetricType::Gauge, ready);
  Emit(out, "lockfleet_kafka_consumer_partitions",
       "Unlock-topic partitions the consumer fetches: all of them when "
       "broadcasting, those of the names waited on in targeted fan-out.",
       MetricType::Gauge,
       static_cast<uint64_t>(std::max(0, sum.fetched_partitions)));
  Emit(out, "lockfleet_kafka_consumer_partition_changes_total",
       "Targeted fan-out: unlock-topic partitions added to the fetch "
       "(assigned: a name of theirs waited on) or dropped from it "
       "(unassigned: nobody waited on them for kafka.targeted_linger).",
       "change",
       {{"assigned", sum.partition_assigns},
        {"unassigned", sum.partition_unassigns}});
  return out;
}

}  // namespace lockfleet::metrics::internal
