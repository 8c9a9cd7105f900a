// KafkaNotifier: carries unlock events between processes over Kafka.
//
// It is the UnlockPublisher of a LockClient (publishing side) and the one
// Kafka consumer of its process (receiving side):
//
//   auto notifier = std::make_shared<KafkaNotifier>(kafka_options);
//   LockClient locks(redis, {.publisher = notifier});
//   notifier->Subscribe(&locks);      // deliver incoming events to `locks`
//   ...
//   notifier->Unsubscribe(&locks);    // REQUIRED before `locks` is destroyed
//
// Publishing never blocks: the event is queued in librdkafka's producer
// (linger.ms=0 unless overridden) and sent by its threads; a full queue or a
// failed delivery is counted and logged, never thrown (the lock was released
// regardless, and waiters elsewhere fall back on their park bound).
//
// Publishing puts each event on the partition of its lock name (librdkafka's
// consistent partitioner: CRC32 of the name modulo the partition count), so
// a lock's events stay in order and a process can tell which partition
// carries the events of a name.
//
// Receiving, FanOut::kBroadcast (the default): the consumer assign()s every
// partition of the topic at its end offset, with no consumer-group
// membership, so every process sees every unlock from the moment it
// started. The end offsets are looked up before the assignment (tried again
// until the broker answers them), so ready means that no later event is
// missed. Partitions added to the topic are assigned the same way at the
// next metadata refresh (every 10 s); the others keep their positions.
// FanOut::kTargeted, for large fleets: the consumer fetches only the partitions
// of the names its subscribed clients are waiting on right now. A client's
// waiting call tells the notifier (UnlockInterest) before its first park, after
// an attempt that did not get the lock; a partition not fetched yet is assigned
// then, targeted_replay records before its end (OFFSET_TAIL), so the events
// published between that attempt and the broker resolving the start offset are
// read too (an event already read wakes nobody: a hint, and the waiter asks
// Redis); a partition nobody waits on any more stays assigned for
// targeted_linger, then is dropped. Holders are not waiters: a force-unlock
// event for a lock held here reaches the holder only if its partition is
// fetched (else its next renewal or release tells it). Either way each event is
// decoded once and handed to every subscribed LockClient, which wakes at most
// one of its waiters on that lock. Malformed records are counted and dropped.
//
// Authentication (optional): with event_keys set, every published event is
// signed with HMAC-SHA256 under the first key, and a received event that is
// unsigned or signed under none of the keys is counted as malformed
// ("unsigned", "bad_signature") and never delivered. Every process of a
// deployment must share the keys (event_auth.h, docs/unlock-events.md).
//
// Outages: with the broker unreachable, publishes fail after
// message_timeout (counted), the consumer keeps retrying, and locks keep
// working on their park bounds. When the broker returns — including a broker
// that restarted with an empty log — consumption resumes from the new end
// without a restart (auto.offset.reset=latest).
//
// Thread-safety: all methods may be called from any thread concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/unlock_event.h"
#include "lockfleet/notifier/log.h"
#include "lockfleet/notifier/unlock_codec.h"

namespace lockfleet::notifier {

// How the unlock-event consumer chooses what to fetch (see above).
enum class FanOut {
  kBroadcast,  // every partition: every event reaches every process
  kTargeted,   // the partitions of the names this process waits on
};

// "broadcast" / "targeted".
const char* FanOutName(FanOut fan_out) noexcept;

// The fetch wait an unset KafkaOptions::fetch_wait becomes on the broker
// whose cluster id is `cluster_id` (empty: a broker too old to tell, not the
// mock; see kMockFetchWait below).
std::chrono::milliseconds FetchWaitFor(std::string_view cluster_id,
                                       FanOut fan_out);

// The partition, among `partitions` (>= 1), that carries the unlock events
// of `lock`: librdkafka's consistent partitioner (CRC32 of the name).
int32_t UnlockPartition(std::string_view lock, int partitions);

// KafkaOptions::fetch_wait when unset (FetchWaitFor):
// - kMockFetchWait on librdkafka's mock cluster (the embedded broker; its
//   cluster id begins with kMockClusterIdPrefix), which answers a fetch
//   only when its wait runs out;
// - on any other broker, which long-polls: kRealFetchWait (librdkafka's and
//   the Java client's default) when broadcasting; kRealTargetedFetchWait in
//   targeted fan-out, where a partition assigned while a fetch of others is
//   in flight joins only the next fetch, so the wait bounds that delay.
inline constexpr std::string_view kMockClusterIdPrefix = "mockCluster";
inline constexpr std::chrono::milliseconds kMockFetchWait{1};
inline constexpr std::chrono::milliseconds kRealFetchWait{500};
inline constexpr std::chrono::milliseconds kRealTargetedFetchWait{100};

struct KafkaOptions {
  std::string bootstrap;  // "host:port[,host:port...]", required
  std::string topic = "lockfleet.unlock";
  // How long a fetch waits for data on an empty partition. Unset, the
  // default: chosen for the broker when it first answers (FetchWaitFor: 1 ms
  // on the embedded broker, 500 ms on a real one, 100 ms there in targeted
  // fan-out). The mock does not long-poll, so the wait is the wake-up
  // latency floor there: 1 ms gives a one-way p50 of about 1.4 ms
  // (bench/fairness.md) at about 2% of a core per idle consumer. A real
  // broker long-polls (answers a fetch as soon as an event arrives), so a
  // long wait costs no latency there and saves the idle fetches: with 1 ms,
  // 32 parked processes kept a 2-core host 82% busy (bench/REPORT.md).
  // Set: that wait, whatever the broker. A `fetch.wait.max.ms` in
  // `properties` wins over both.
  std::optional<std::chrono::milliseconds> fetch_wait;
  FanOut fan_out = FanOut::kBroadcast;
  // Targeted fan-out: how many records before a partition's end a new
  // assignment starts (the events published since the waiter's refused
  // attempt; the older ones cost a decode each and at most one needless
  // attempt). More than that many events on one partition in the few ms
  // between the attempt and the assignment, and a wake-up may come from the
  // park bound instead.
  int targeted_replay = 64;
  // Targeted fan-out: how long a partition stays assigned after the last
  // wait on its names ended (checked every 250 ms). 0, the default, was
  // best in bench/targeted.md: fewer events received and hand-offs no
  // slower than with 2 s; a longer linger saves re-assigning partitions
  // whose names are waited on again and again within it.
  std::chrono::milliseconds targeted_linger{0};
  // A publish that cannot be delivered within this is dropped and counted.
  std::chrono::milliseconds message_timeout{5000};
  int queue_max_messages = 100000;  // producer queue bound; beyond: dropped
  // Passed to librdkafka verbatim, producer and consumer alike, after the
  // defaults above (so they override them): security.protocol, sasl.*,
  // ssl.*, ... An unknown property is an Error(kInvalidArgument).
  std::map<std::string, std::string> properties;
  std::string client_id = "lockfleet";
  // HMAC-SHA256 keys for unlock events, each at least kMinEventKeyBytes: the
  // first signs, every one verifies (rotation: see event_auth.h). SECRET:
  // never logged, never in an error message or a metric. Default: none —
  // events are sent unsigned and any signature on a received one is ignored.
  std::vector<std::string> event_keys;
  LogSink log;  // Default: stderr
  // Called on the consumer thread for every well-formed unlock event that
  // carries a release time, with receive time - release time (system clocks
  // of two hosts: skew can make it negative), the value last_delay_ns keeps;
  // e.g. to feed a histogram. Keep it short: it delays the event's delivery.
  // An exception from it is caught, counted in delay_hook_errors and logged.
  // Default: none.
  std::function<void(std::chrono::nanoseconds delay)> on_delay;
};

// Counters since construction.
struct NotifierStats {
  uint64_t published = 0;        // handed to the producer
  uint64_t publish_dropped = 0;  // refused at once (queue full, bad topic)
  uint64_t delivered = 0;        // acknowledged by the broker
  uint64_t delivery_failed = 0;  // not delivered within message_timeout
  uint64_t consumed = 0;         // well-formed events received
  // Dropped records, all reasons, including events that failed
  // authentication (reasons "unsigned" and "bad_signature").
  uint64_t malformed = 0;
  std::map<std::string, uint64_t> malformed_by_reason;  // DecodeErrorName
  uint64_t consumer_errors = 0;   // fetch / transport errors seen
  uint64_t transport_errors = 0;  // broker connection failures, both clients
  bool assigned = false;  // consumer is ready (targeted: knows the topic)
  int partitions = 0;     // the topic's partitions
  // Partitions the consumer fetches now: all of them when broadcasting, the
  // waited-on ones in targeted fan-out; and how often one was assigned
  // (unassigned) since construction.
  int fetched_partitions = 0;
  uint64_t partition_assigns = 0;
  uint64_t partition_unassigns = 0;
  // Targeted fan-out: events among `consumed` that a new assignment re-read
  // (released before it); delivered, but left out of last_delay_ns and
  // on_delay.
  uint64_t replayed = 0;
  // The consumer's fetch wait in ms: KafkaOptions::fetch_wait, or the one
  // chosen for the broker; -1 until it is chosen (the broker has not
  // answered yet; nothing is fetched until then).
  int64_t fetch_wait_ms = -1;
  int64_t last_delay_ns = 0;       // receive time - release time, last event
  uint64_t delay_hook_errors = 0;  // exceptions thrown by on_delay
};

class KafkaNotifier final : public UnlockPublisher {
 public:
  // Creates the producer and the consumer and starts the consumer thread.
  // Does not wait for the broker. Throws Error(kInvalidArgument) for bad
  // options or properties (an event key shorter than kMinEventKeyBytes
  // among them), Error(kKafka) if librdkafka refuses to start.
  explicit KafkaNotifier(KafkaOptions options);
  // Stops the consumer and waits up to 1 s for queued events to be
  // delivered; with the broker unreachable this takes about 2 s in all.
  ~KafkaNotifier() override;
  KafkaNotifier(const KafkaNotifier&) = delete;
  KafkaNotifier& operator=(const KafkaNotifier&) = delete;

  void Publish(const UnlockEvent& event) noexcept override;

  // Incoming events go to every subscribed client. REQUIRES: a client is
  // unsubscribed before it is destroyed; after Unsubscribe returns, no
  // delivery to it is in progress or will start. In targeted fan-out,
  // Subscribe also gives the client this notifier's UnlockInterest
  // (LockClient::SetUnlockInterest) and Unsubscribe takes it back.
  void Subscribe(LockClient* client);
  void Unsubscribe(LockClient* client);

  // Blocks until the consumer has its partitions (so events published from
  // now on will be seen; targeted: until it knows the topic's partitions,
  // so that a wait from now on fetches its own), or `timeout` passes.
  // Returns whether it is ready.
  bool WaitUntilReady(std::chrono::milliseconds timeout);

  NotifierStats stats() const;
  // The options as given, except event_keys, which is emptied (the keys are
  // kept, and wiped at destruction, by the notifier alone).
  const KafkaOptions& options() const;
  // Whether events are signed and checked (event_keys was not empty).
  bool authenticates_events() const;

  // Test hook: receives every decoded (and authentic) event before
  // delivery.
  void SetOnEventForTesting(std::function<void(const UnlockEvent&)> hook);

 private:
  class Impl;
  class Interest;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lockfleet::notifier
