// Metrics: lockfleet's Prometheus metrics and the observers that feed them.
//
// One Metrics object per process, made in main() and handed to whatever
// reports into it. It owns its registry (there is no global one) and gives
// out the observer objects that LockClient and the worker call:
//
//   auto metrics = std::make_shared<metrics::Metrics>();
//   LockClient locks(redis, {.observer = metrics->lock_observer()});
//   metrics->AddNotifierStats([notifier] { return notifier->stats(); });
//   metrics::MetricsServer server(metrics, "127.0.0.1:9464");  // http.h
//
// The observers share ownership of the metric state, so an observer that
// outlives its Metrics (a LockClient destroyed last) stays safe to call.
//
// Cardinality. Lock names are unbounded ("product:12345"), so they are never
// label values. A lock is counted under its *class* (LockClass: the name up
// to its first ':'); once max_lock_classes distinct classes have been seen,
// further ones are counted under "other". Job types are bounded the same
// way. With the defaults a process exports at most about 5,600 lock series
// (about 55 per class, most of them histogram buckets) plus 26 per job
// type.
//
// Every series whose label set is known up front is created at zero as soon
// as it can be (each class's acquisition results, release results and
// wake-up causes on the class's first event; error codes at construction),
// so dashboards see a 0 rather than no data. The families and their labels
// are listed in metrics/README.md.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "lockfleet/lockcore/observer.h"
#include "lockfleet/notifier/kafka_notifier.h"
#include "lockfleet/worker/observer.h"

namespace lockfleet::metrics {

namespace internal {
class MetricsState;
}  // namespace internal

// Longest label value made from a lock name or a job type, in bytes.
inline constexpr size_t kMaxLabelValueBytes = 64;

// The label value every lock class (or job type) beyond the configured bound
// is counted under.
inline constexpr std::string_view kOtherLabelValue = "other";

// The class a lock name is counted under: the name up to its first ':' (the
// whole name if it has none), cut to at most kMaxLabelValueBytes bytes. The
// result is always a valid label value: bytes that are not valid UTF-8 and
// control characters become '_', a cut never splits a UTF-8 character, and
// an empty class (a name starting with ':') is "none".
//   LockClass("product:12345") == "product"; LockClass("jobs") == "jobs".
std::string LockClass(std::string_view name);

struct MetricsOptions {
  // Distinct lock classes labelled by name; later ones count as "other".
  size_t max_lock_classes = 100;
  // Distinct job types labelled by name, per job source; later: "other".
  size_t max_job_types = 100;
  // Maps a lock name to its class. Its result is made a valid label value
  // and cut like LockClass's. Default: LockClass. Must be thread-safe.
  std::function<std::string(std::string_view name)> lock_class;
};

// Thread-safety: all methods may be called from any thread concurrently,
// and the observers it hands out may be called from any thread.
class Metrics {
 public:
  explicit Metrics(MetricsOptions options = {});
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // The observer to put in LockClientOptions::observer. Implements every
  // hook; any number of LockClients may share it (their counts add up).
  std::shared_ptr<LockObserver> lock_observer() const;

  // The observer the worker reports its jobs to.
  std::shared_ptr<worker::WorkerObserver> worker_observer() const;

  // One unlock event's delay from its release (in the publishing process) to
  // its receipt here. A negative delay (clock skew between hosts) counts as
  // 0. Call it from the notifier's per-event hook (KafkaOptions::on_delay).
  void ObserveNotificationDelay(std::chrono::nanoseconds delay);

  // Registers a source of notifier counters. `read` is called at every
  // scrape (Exposition()), on the scraping thread; it must be thread-safe
  // and stay callable as long as this Metrics exists (capture a shared_ptr,
  // or a weak_ptr and return {} once it has expired). Several sources add
  // up. A source that throws is skipped for that scrape. Without any source
  // the unlock_events and kafka families are not exported.
  void AddNotifierStats(std::function<notifier::NotifierStats()> read);

  // Registers a source of the Redis client's round trips
  // (RedisClient::round_trips()), read at every scrape like AddNotifierStats
  // and exported, summed, as lockfleet_redis_round_trips_total: with the
  // acquisitions it gives Redis round trips per acquisition.
  void AddRedisRoundTrips(std::function<uint64_t()> read);

  // Every family in the Prometheus text exposition format (version 0.0.4).
  std::string Exposition() const;

 private:
  std::shared_ptr<internal::MetricsState> state_;
};

}  // namespace lockfleet::metrics
