// Internal: the notifier's counters, read at scrape time.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "lockfleet/notifier/kafka_notifier.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace lockfleet::metrics::internal {

// A prometheus Collectable that reads every registered NotifierStats source
// (and Redis round-trip source)
// at each Collect() and exports their sum as the lockfleet_unlock_events_*
// and lockfleet_kafka_* families (none while no source is registered).
//
// Thread-safety: Add and Collect may be called from any thread concurrently.
class NotifierCollector final : public prometheus::Collectable {
 public:
  void Add(std::function<notifier::NotifierStats()> read);
  // Redis round-trip counters (lockfleet_redis_round_trips_total).
  void AddRoundTrips(std::function<uint64_t()> read);
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  void CollectRoundTrips(std::vector<prometheus::MetricFamily>& out) const;

  mutable std::mutex mu_;
  std::vector<std::function<notifier::NotifierStats()>> sources_;
  std::vector<std::function<uint64_t()>> round_trips_;
};

}  // namespace lockfleet::metrics::internal
