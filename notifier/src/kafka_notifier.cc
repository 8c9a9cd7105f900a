#include "lockfleet/notifier/kafka_notifier.h"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafkacpp.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <random>
#include <shared_mutex>
#include <thread>
#include <unordered_map>
#include <utility>

#include "lockfleet/lockcore/error.h"
#include "lockfleet/notifier/event_auth.h"
#include "rate_limited_log.h"
#include "rdkafka_common.h"

namespace lockfleet::notifier {
namespace {

using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;

// How long one consume may block. It bounds no wake-up (a message ends it
// at once) and no stop (the destructor yields the consumer's queue): only
// the consumer thread's own work between consumes. Short while that work
// is due often (assign retries until the topic is assigned; targeted
// fan-out's retargets; delivery reports to serve), else long, so an idle
// process's consumer thread wakes about once a second instead of ten times.
constexpr int kConsumeTimeoutMs = 100;
constexpr int kIdleConsumeTimeoutMs = 1000;
constexpr milliseconds kAssignRetry{
    200};  // while the topic or broker is missing
constexpr auto kMetadataRefresh =
    std::chrono::seconds(10);  // partition changes
// Targeted fan-out: how often lingering partitions are dropped and failed
// assignments tried again.
constexpr milliseconds kRetargetEvery{250};

std::string RandomSuffix() {
  std::random_device rd;
  return std::to_string(rd()) + std::to_string(rd());
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// librdkafka's default partitioner uses the same hash for a keyed record, so
// publishers that leave the choice to librdkafka agree.
int32_t UnlockPartition(std::string_view lock, int partitions) {
  return rd_kafka_msg_partitioner_consistent(nullptr, lock.data(), lock.size(),
                                             partitions, nullptr, nullptr);
}

milliseconds FetchWaitFor(std::string_view cluster_id, FanOut fan_out) {
  if (cluster_id.starts_with(kMockClusterIdPrefix)) return kMockFetchWait;
  return fan_out == FanOut::kTargeted ? kRealTargetedFetchWait : kRealFetchWait;
}

const char* FanOutName(FanOut fan_out) noexcept {
  return fan_out == FanOut::kTargeted ? "targeted" : "broadcast";
}

class KafkaNotifier::Impl final : public RdKafka::DeliveryReportCb,
                                  public RdKafka::EventCb {
 public:
  // Targeted fan-out: what is known of one partition.
  struct TargetState {
    int names = 0;  // watched names whose events this partition carries
    bool assigned = false;
    Steady::time_point idle_since;  // when `names` fell to 0
    int64_t assigned_at_ns = 0;     // system clock, the latest assignment
  };

  explicit Impl(KafkaOptions o)
      : options(std::move(o)),
        auth(std::exchange(options.event_keys, {})),
        log(SinkOrStderr(options.log)) {
    Require(!options.bootstrap.empty(), "Kafka bootstrap servers are required");
    Require(!options.topic.empty(), "Kafka topic is required");
    Require(options.fetch_wait.value_or(milliseconds(0)).count() >= 0 &&
                options.message_timeout.count() > 0 &&
                options.queue_max_messages >= 1,
            "Kafka fetch_wait must be >= 0, message_timeout and "
            "queue_max_messages > 0");
    Require(options.targeted_replay >= 0 &&
                options.targeted_replay <= 1000000 &&
                options.targeted_linger.count() >= 0,
            "Kafka targeted_replay must be 0..1000000 and targeted_linger "
            ">= 0");
    const Properties common =
        CommonProperties(options.bootstrap, options.client_id);
    Properties producer_props = common;
    producer_props.insert({
        {"linger.ms", "0"},
        {"acks", "1"},
        {"message.timeout.ms", Millis(options.message_timeout)},
        {"queue.buffering.max.messages",
         std::to_string(options.queue_max_messages)},
    });
    auto producer_conf = MakeConf(producer_props, options.properties, this);
    SetCallback(*producer_conf, "dr_cb",
                static_cast<RdKafka::DeliveryReportCb*>(this));
    std::string err;
    producer.reset(RdKafka::Producer::create(producer_conf.get(), err));
    if (!producer)
      throw Error(ErrorCode::kKafka, "cannot create Kafka producer: " + err);

    // Broadcast consumer: partitions are assign()ed, so the group id only
    // satisfies librdkafka 2.0.2, which wants one; no group is joined.
    Properties consumer_props = common;
    consumer_props.insert({
        {"group.id", "lockfleet-broadcast-" + RandomSuffix()},
        {"enable.auto.commit", "false"},
        {"enable.auto.offset.store", "false"},
        // Targeted: a replay start below the log's start (a quiet
        // partition, its records gone with retention) begins at the log's
        // start, not at its end (which would skip the very release the
        // replay is for). Broadcast: its start offsets are fixed at assign.
        {"auto.offset.reset", targeted() ? "earliest" : "latest"},
        {"enable.partition.eof", "false"},
        {"fetch.wait.max.ms", Millis(options.fetch_wait.value_or(
                                  FetchWaitFor("", options.fan_out)))},
        {"fetch.error.backoff.ms", "50"},
    });
    // Made here, so that librdkafka checks every setting now; with no fetch
    // wait given, with a real broker's, replaced before its first fetch if
    // the broker turns out to be the mock (ChooseFetchWait).
    consumer_conf = MakeConf(consumer_props, options.properties, this);
    consumer.reset(RdKafka::KafkaConsumer::create(consumer_conf.get(), err));
    if (!consumer)
      throw Error(ErrorCode::kKafka, "cannot create Kafka consumer: " + err);
    if (options.fetch_wait ||
        options.properties.contains("fetch.wait.max.ms")) {
      fetch_wait_ms.store(ConfFetchWait(*consumer_conf).count());
      logs.Log("fetch_wait", LogLevel::kInfo,
               "fetch wait " + std::to_string(fetch_wait_ms.load()) +
                   " ms (as configured)",
               log);
    }
    thread = std::thread([this] { Run(); });
  }

  ~Impl() override {
    stop.store(true);
    // Ends a consume in progress (or the next one: a yield is kept until
    // a poll takes it). Run sets the queue before it checks `stop`, and we
    // set `stop` before we read the queue: one of us sees the other.
    if (rd_kafka_queue_t* queue = consume_queue.load())
      rd_kafka_queue_yield(queue);
    if (thread.joinable()) thread.join();
    if (rd_kafka_queue_t* queue = consume_queue.load())
      rd_kafka_queue_destroy(queue);
    consumer->close();
    producer->flush(1000);
  }

  void Publish(const UnlockEvent& event) noexcept {
    try {
      std::string value = auth.Encode(event);
      // The name's partition, as a targeted consumer computes it (whatever
      // `partitioner` the properties set); librdkafka's choice until the
      // topic's partitions are known, or if the producer does not know the
      // partition yet (partitions added: its metadata lags).
      const int count = partitions.load();
      auto produce = [&](int32_t partition) {
        return producer->produce(options.topic, partition,
                                 RdKafka::Producer::RK_MSG_COPY, value.data(),
                                 value.size(), event.lock.data(),
                                 event.lock.size(), 0, nullptr);
      };
      RdKafka::ErrorCode err =
          produce(count > 0 ? UnlockPartition(event.lock, count)
                            : RdKafka::Topic::PARTITION_UA);
      if (err == RdKafka::ERR__UNKNOWN_PARTITION)
        err = produce(RdKafka::Topic::PARTITION_UA);
      if (err == RdKafka::ERR_NO_ERROR) {
        published.fetch_add(1, std::memory_order_relaxed);
        return;
      }
      publish_dropped.fetch_add(1, std::memory_order_relaxed);
      logs.Log("publish", LogLevel::kWarning,
               "unlock event dropped: " + RdKafka::err2str(err), log);
    } catch (...) {
      publish_dropped.fetch_add(1, std::memory_order_relaxed);
    }
  }

  // Producer delivery reports (served by producer->poll on our thread).
  void dr_cb(RdKafka::Message& message) override {
    if (message.err() == RdKafka::ERR_NO_ERROR) {
      delivered.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    delivery_failed.fetch_add(1, std::memory_order_relaxed);
    logs.Log("delivery", LogLevel::kWarning,
             "unlock event not delivered: " + message.errstr(), log);
  }

  // Errors and logs from both clients (served on our thread).
  void event_cb(RdKafka::Event& event) override {
    if (LogClientEvent(event, logs, log,
                       "waiters fall back on their park bounds") ==
        ClientEvent::kTransport) {
      transport_errors.fetch_add(1, std::memory_order_relaxed);
    }
  }

  // No fetch wait given: fits the consumer's to the broker
  // (FitFetchWaitToBroker), before the first assignment: nothing fetches
  // yet, and no waiting thread uses the consumer (targeted: target_count is
  // 0). Returns false to retry soon: the broker did not answer within 1 s
  // (the destructor joins this thread).
  bool ChooseFetchWait() {
    const BrokerFetchWait fit =
        FitFetchWaitToBroker(consumer, *consumer_conf, options.fan_out);
    if (!fit.answered) {
      WaitingForKafka(fit.error);
      return false;
    }
    if (!fit.error.empty()) {  // kept the first consumer: slower wake-ups
      consumer_errors.fetch_add(1, std::memory_order_relaxed);
      logs.Log("assign", LogLevel::kError, fit.error, log);
    }
    const milliseconds wait = ConfFetchWait(*consumer_conf);
    fetch_wait_ms.store(wait.count());
    logs.Log("fetch_wait", LogLevel::kInfo,
             "fetch wait " + Millis(wait) + " ms: " +
                 (fit.mock ? "the embedded broker answers a fetch only when "
                             "its wait runs out"
                           : "a real broker answers a fetch as soon as an "
                             "event arrives"),
             log);
    return true;
  }

  void Run() {
    Steady::time_point next_assign = Steady::now();
    Steady::time_point next_retarget = Steady::now();
    // First, with no fetch wait given, the one that suits the broker.
    while (!stop.load() && fetch_wait_ms.load() < 0) {
      if (!ChooseFetchWait()) producer->poll(kAssignRetry.count());
    }
    // The consumer is final now (ChooseFetchWait may have replaced it).
    consume_queue.store(rd_kafka_queue_get_consumer(consumer->c_ptr()));
    bool assigned = false;
    while (!stop.load()) {
      if (Steady::now() >= next_assign) {
        assigned = TryAssign();
        next_assign =
            Steady::now() + (assigned ? kMetadataRefresh : kAssignRetry);
      }
      if (targeted() && Steady::now() >= next_retarget) {
        next_retarget = Steady::now() + kRetargetEvery;
        Retarget();
      }
      // Events still waiting for their delivery reports (served by the
      // poll below) keep the short timeout: their counters stay prompt,
      // and a small queue.buffering.max.messages is not held full.
      const bool idle = assigned && !targeted() && producer->outq_len() == 0;
      std::unique_ptr<RdKafka::Message> msg(
          consumer->consume(idle ? kIdleConsumeTimeoutMs : kConsumeTimeoutMs));
      if (msg) Handle(*msg);
      producer->poll(0);
    }
  }

  // The broker's metadata (of `topic` only, or of no topic: its brokers and
  // cluster id), asked through the consumer within 1 s; null (counted and
  // logged) if it did not answer.
  std::unique_ptr<RdKafka::Metadata> Metadata(RdKafka::Topic* topic) {
    RdKafka::Metadata* raw = nullptr;
    const RdKafka::ErrorCode rc = consumer->metadata(false, topic, &raw, 1000);
    std::unique_ptr<RdKafka::Metadata> md(raw);
    if (rc == RdKafka::ERR_NO_ERROR) return md;
    WaitingForKafka(RdKafka::err2str(rc));
    return nullptr;
  }

  // The broker did not answer a metadata request (`why`): counted, logged.
  void WaitingForKafka(const std::string& why) {
    consumer_errors.fetch_add(1, std::memory_order_relaxed);
    logs.Log("assign", LogLevel::kWarning,
             "waiting for Kafka at " + options.bootstrap + ": " + why, log);
  }

  // Assigns every partition at its current end. Returns false to retry soon.
  // Also re-run periodically, to pick up added partitions.
  bool TryAssign() {
    std::string err;
    std::unique_ptr<RdKafka::Topic> topic(
        RdKafka::Topic::create(consumer.get(), options.topic, nullptr, err));
    if (!topic) {
      logs.Log("assign", LogLevel::kError, "cannot create topic handle: " + err,
               log);
      return false;
    }
    const std::unique_ptr<RdKafka::Metadata> md = Metadata(topic.get());
    if (!md) return false;
    int count = 0;
    for (const RdKafka::TopicMetadata* t : *md->topics()) {
      if (t->topic() == options.topic && t->err() == RdKafka::ERR_NO_ERROR) {
        count = static_cast<int>(t->partitions()->size());
      }
    }
    if (count == 0) {
      logs.Log("assign", LogLevel::kWarning,
               "Kafka topic '" + options.topic +
                   "' not found; create it (the embedded broker "
                   "does) — retrying",
               log);
      return false;
    }
    if (count == partitions.load()) return true;
    WarmProducer();
    if (targeted()) {
      Target(count);
    } else if (!AssignAll(count)) {
      return false;
    }
    {
      std::lock_guard lock(mu);
      partitions.store(count);
    }
    ready_cv.notify_all();
    logs.Log("assigned", LogLevel::kInfo,
             "listening for unlock events on '" + options.topic + "' (" +
                 std::to_string(count) + " partitions" +
                 (targeted() ? ", targeted: fetching those of the names "
                               "waited on)"
                             : ")"),
             log);
    return true;
  }

  // Broadcast: assigns partitions at their current end: all `count` at
  // first (or if the topic shrank: deleted and made again), only the added
  // ones when it grew (the others keep their positions). Returns false to
  // retry soon.
  bool AssignAll(int count) {
    // Fix each start offset now, so that "ready" really means: every event
    // published from here on is seen. offsetsForTimes with timestamp -1
    // answers each partition's end offset. When the broker cannot say, try
    // again: OFFSET_END would be resolved later, by the fetcher, and an
    // event published in between would never be seen by this process.
    // (query_watermark_offsets would do too, but librdkafka 2.0.2 retries it
    // past its timeout while a broker connection flaps, and this thread
    // must never hang: the destructor joins it.)
    const int first = count > partitions.load() ? partitions.load() : 0;
    std::vector<RdKafka::TopicPartition*> parts;
    for (int p = first; p < count; ++p) {
      parts.push_back(RdKafka::TopicPartition::create(options.topic, p, -1));
    }
    struct Destroy {
      std::vector<RdKafka::TopicPartition*>& parts;
      ~Destroy() { RdKafka::TopicPartition::destroy(parts); }
    } destroy{parts};
    RdKafka::ErrorCode rc = consumer->offsetsForTimes(parts, 1000);
    for (const RdKafka::TopicPartition* tp : parts) {
      if (rc != RdKafka::ERR_NO_ERROR) break;
      if (tp->err() != RdKafka::ERR_NO_ERROR)
        rc = tp->err();
      else if (tp->offset() < 0)
        rc = RdKafka::ERR__BAD_MSG;
    }
    if (rc != RdKafka::ERR_NO_ERROR) {
      WaitingForKafka("cannot look up the end offsets of '" + options.topic +
                      "': " + RdKafka::err2str(rc) + " (retrying)");
      return false;
    }
    if (first == 0) {
      rc = consumer->assign(parts);
    } else {
      std::unique_ptr<RdKafka::Error> error(
          consumer->incremental_assign(parts));
      if (error) rc = error->code();
    }
    if (rc != RdKafka::ERR_NO_ERROR) {
      consumer_errors.fetch_add(1, std::memory_order_relaxed);
      logs.Log("assign", LogLevel::kError,
               "assign failed: " + RdKafka::err2str(rc), log);
      return false;
    }
    return true;
  }

  bool targeted() const { return options.fan_out == FanOut::kTargeted; }

  // Targeted: the partitions assigned now.
  int Fetched() {
    std::lock_guard lock(targets_mu);
    return static_cast<int>(
        std::count_if(targets.begin(), targets.end(),
                      [](const auto& e) { return e.second.assigned; }));
  }

  // Whether an event released at `released_at_ns` on `partition` was
  // published before the partition's latest assignment (re-read by it).
  bool Replayed(int32_t partition, int64_t released_at_ns) {
    std::lock_guard lock(targets_mu);
    const auto t = targets.find(partition);
    return t != targets.end() && released_at_ns < t->second.assigned_at_ns;
  }

  // Targeted fan-out: a waiting call's interest (UnlockInterest). The first
  // wait on a name of a partition not fetched yet assigns it before the
  // call's first attempt.
  void Watch(const std::string& name) noexcept {
    try {
      std::lock_guard lock(targets_mu);
      // Both entries first (either may throw): counts move together.
      int& waits = watched[name];
      TargetState* t = nullptr;
      int32_t p = 0;
      if (waits == 0 && target_count > 0) {
        p = UnlockPartition(name, target_count);
        t = &targets[p];
      }
      ++waits;
      if (t != nullptr && ++t->names == 1 && !t->assigned) AssignLocked(p, *t);
    } catch (...) {
      consumer_errors.fetch_add(1, std::memory_order_relaxed);
    }
  }

  void Unwatch(const std::string& name) noexcept {
    try {
      std::lock_guard lock(targets_mu);
      auto it = watched.find(name);
      if (it == watched.end()) return;
      if (--it->second > 0) return;
      watched.erase(it);
      if (target_count == 0) return;
      auto t = targets.find(UnlockPartition(name, target_count));
      if (t == targets.end() || --t->second.names > 0) return;
      t->second.names = 0;
      t->second.idle_since = Steady::now();  // lingers, see Retarget
    } catch (...) {
      consumer_errors.fetch_add(1, std::memory_order_relaxed);
    }
  }

  // The topic has `count` partitions (first known, or changed): the names
  // watched map onto them anew; each partition with one is fetched.
  // (Publishers that still count the old partitions — up to the 10 s
  // metadata refresh — send to where nobody targeted may look: those
  // waiters fall back on their park bounds. docs/unlock-events.md.)
  void Target(int count) noexcept {
    try {
      std::lock_guard lock(targets_mu);
      std::vector<int32_t> was;
      for (const auto& [p, t] : targets) {
        if (t.assigned) was.push_back(p);
      }
      const bool dropped = UnassignLocked(was);
      targets.clear();
      target_count = count;
      // Not dropped: still assigned in librdkafka, so kept as such (idle:
      // Retarget drops them, or they are watched again below).
      if (!dropped) {
        for (int32_t p : was) targets[p].assigned = true;
      }
      for (const auto& [name, waits] : watched)
        ++targets[UnlockPartition(name, count)].names;
      for (auto& [p, t] : targets) {
        if (!t.assigned) AssignLocked(p, t);
      }
    } catch (...) {
      consumer_errors.fetch_add(1, std::memory_order_relaxed);
    }
  }

  // Drops the partitions nobody has waited on for targeted_linger, and
  // assigns again those whose assignment failed.
  void Retarget() noexcept {
    try {
      std::lock_guard lock(targets_mu);
      const Steady::time_point now = Steady::now();
      std::vector<int32_t> idle;
      for (auto& [p, t] : targets) {
        if (t.names > 0 && !t.assigned) AssignLocked(p, t);
        if (t.names == 0 && t.assigned &&
            now - t.idle_since >= options.targeted_linger)
          idle.push_back(p);
      }
      UnassignLocked(idle);
      std::erase_if(targets, [](const auto& e) {
        return e.second.names == 0 && !e.second.assigned;
      });
    } catch (...) {
      consumer_errors.fetch_add(1, std::memory_order_relaxed);
    }
  }

  // Adds partition `p` to the fetch, targeted_replay records before its
  // end (resolved by the broker after this returns: what was published
  // since the waiting call began is read). REQUIRES: targets_mu.
  void AssignLocked(int32_t p, TargetState& t) {
    std::vector<RdKafka::TopicPartition*> parts{RdKafka::TopicPartition::create(
        options.topic, p, RD_KAFKA_OFFSET_TAIL(options.targeted_replay))};
    std::unique_ptr<RdKafka::Error> error(consumer->incremental_assign(parts));
    RdKafka::TopicPartition::destroy(parts);
    if (error) {
      consumer_errors.fetch_add(1, std::memory_order_relaxed);
      logs.Log("assign", LogLevel::kWarning,
               "cannot fetch partition " + std::to_string(p) + " of '" +
                   options.topic + "': " + error->str() +
                   " (its waiters fall back on their park bounds; retrying)",
               log);
      return;
    }
    t.assigned = true;
    t.assigned_at_ns = NowNs();
    assigns.fetch_add(1, std::memory_order_relaxed);
  }

  // Returns whether they were dropped. REQUIRES: targets_mu.
  bool UnassignLocked(const std::vector<int32_t>& ps) {
    if (ps.empty()) return true;
    std::vector<RdKafka::TopicPartition*> parts;
    for (int32_t p : ps)
      parts.push_back(RdKafka::TopicPartition::create(options.topic, p));
    std::unique_ptr<RdKafka::Error> error(
        consumer->incremental_unassign(parts));
    RdKafka::TopicPartition::destroy(parts);
    if (error) {
      consumer_errors.fetch_add(1, std::memory_order_relaxed);
      logs.Log("assign", LogLevel::kWarning,
               "cannot stop fetching " + std::to_string(ps.size()) +
                   " partitions of '" + options.topic + "': " + error->str(),
               log);
      return false;
    }
    for (int32_t p : ps) targets[p].assigned = false;
    unassigns.fetch_add(ps.size(), std::memory_order_relaxed);
    return true;
  }

  // The producer connects and looks the topic up lazily, which would add
  // about a second to the first unlock event; do it before declaring ready.
  void WarmProducer() {
    std::string err;
    std::unique_ptr<RdKafka::Topic> topic(
        RdKafka::Topic::create(producer.get(), options.topic, nullptr, err));
    if (!topic) return;
    RdKafka::Metadata* raw = nullptr;
    if (producer->metadata(false, topic.get(), &raw, 1000) ==
        RdKafka::ERR_NO_ERROR)
      delete raw;
  }

  void Handle(RdKafka::Message& msg) {
    switch (msg.err()) {
      case RdKafka::ERR_NO_ERROR:
        break;
      case RdKafka::ERR__TIMED_OUT:
      case RdKafka::ERR__PARTITION_EOF:
        return;
      default:
        consumer_errors.fetch_add(1, std::memory_order_relaxed);
        logs.Log("consume", LogLevel::kWarning,
                 "Kafka consume error: " + msg.errstr(), log);
        return;
    }
    std::string_view value(static_cast<const char*>(msg.payload()), msg.len());
    DecodeResult r = auth.Decode(msg.payload() ? value : std::string_view());
    if (!r.event) {
      malformed.fetch_add(1, std::memory_order_relaxed);
      {
        std::lock_guard lock(mu);
        ++malformed_by_reason[DecodeErrorName(r.error)];
      }
      // Rate-limited apart: a flood of junk must not hide forgeries.
      const bool forged = r.error == DecodeError::kUnsigned ||
                          r.error == DecodeError::kBadSignature;
      logs.Log(forged ? "unauthenticated" : "malformed", LogLevel::kWarning,
               std::string("dropped ") +
                   (forged ? "an unauthenticated" : "a malformed") +
                   " unlock event (" + DecodeErrorName(r.error) + ": " +
                   r.detail + ") at partition " +
                   std::to_string(msg.partition()) + " offset " +
                   std::to_string(msg.offset()),
               log);
      return;
    }
    consumed.fetch_add(1, std::memory_order_relaxed);
    if (targeted() && Replayed(msg.partition(), r.event->released_at_ns)) {
      // Re-read by a new assignment: delivered (it may be the release a
      // waiter needs), not measured (its delay is the assignment's age).
      replayed.fetch_add(1, std::memory_order_relaxed);
    } else if (r.event->released_at_ns > 0) {
      int64_t delay_ns = NowNs() - r.event->released_at_ns;
      last_delay_ns.store(delay_ns, std::memory_order_relaxed);
      ReportDelay(std::chrono::nanoseconds(delay_ns));
    }
    std::lock_guard lock(mu);
    if (hook) hook(*r.event);
    for (LockClient* client : clients) client->DeliverUnlockEvent(*r.event);
  }

  void ReportDelay(std::chrono::nanoseconds delay) {
    if (!options.on_delay) return;
    try {
      options.on_delay(delay);
    } catch (const std::exception& e) {
      delay_hook_errors.fetch_add(1, std::memory_order_relaxed);
      logs.Log("on_delay", LogLevel::kError,
               std::string("on_delay threw: ") + e.what(), log);
    } catch (...) {
      delay_hook_errors.fetch_add(1, std::memory_order_relaxed);
      logs.Log("on_delay", LogLevel::kError, "on_delay threw", log);
    }
  }

  KafkaOptions options;  // event_keys moved into auth
  const EventAuthenticator auth;
  LogSink log;
  RateLimitedLog logs;
  std::unique_ptr<RdKafka::Producer> producer;
  std::unique_ptr<RdKafka::Conf> consumer_conf;
  // Made in the constructor (replaced by ChooseFetchWait before the first
  // assignment); used on `thread`, by the destructor after joining it, and
  // in targeted fan-out by waiting threads (Watch: only once target_count
  // is set, after the first assignment).
  std::unique_ptr<RdKafka::KafkaConsumer> consumer;
  // The consumer's queue, once Run's consume loop starts (the destructor
  // yields it to end a consume at once; destroyed after the thread ends).
  std::atomic<rd_kafka_queue_t*> consume_queue{nullptr};
  // NotifierStats::fetch_wait_ms; -1 while ChooseFetchWait has to run.
  std::atomic<int64_t> fetch_wait_ms{-1};
  std::thread thread;
  std::atomic<bool> stop{false};

  mutable std::mutex mu;
  std::condition_variable ready_cv;
  std::vector<LockClient*> clients;                     // mu
  std::map<std::string, uint64_t> malformed_by_reason;  // mu
  std::function<void(const UnlockEvent&)> hook;         // mu
  std::atomic<int> partitions{0};

  // Targeted fan-out (TargetState: above).
  std::mutex targets_mu;
  int target_count = 0;  // the partition count `targets` maps onto; 0: none
  std::unordered_map<std::string, int> watched;  // name -> waits; targets_mu
  std::map<int32_t, TargetState> targets;        // targets_mu
  std::atomic<uint64_t> assigns{0}, unassigns{0}, replayed{0};
  std::shared_ptr<Interest> interest;  // set by KafkaNotifier when targeted

  std::atomic<uint64_t> published{0}, publish_dropped{0}, delivered{0},
      delivery_failed{0}, consumed{0}, malformed{0}, consumer_errors{0},
      transport_errors{0}, delay_hook_errors{0};
  std::atomic<int64_t> last_delay_ns{0};
};

// A notifier's UnlockInterest, as clients hold it: it may outlive the
// notifier (a call still waiting), so it forwards only while attached.
class KafkaNotifier::Interest final : public UnlockInterest {
 public:
  explicit Interest(Impl* impl) : impl_(impl) {}
  void Watch(const std::string& name) noexcept override {
    std::shared_lock lock(mu_);
    if (impl_) impl_->Watch(name);
  }
  void Unwatch(const std::string& name) noexcept override {
    std::shared_lock lock(mu_);
    if (impl_) impl_->Unwatch(name);
  }
  void Detach() {
    std::unique_lock lock(mu_);
    impl_ = nullptr;
  }

 private:
  std::shared_mutex mu_;
  Impl* impl_;  // guarded by mu_
};

KafkaNotifier::KafkaNotifier(KafkaOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {
  if (impl_->targeted())
    impl_->interest = std::make_shared<Interest>(impl_.get());
}

KafkaNotifier::~KafkaNotifier() {
  if (impl_->interest) impl_->interest->Detach();
}

void KafkaNotifier::Publish(const UnlockEvent& event) noexcept {
  impl_->Publish(event);
}

void KafkaNotifier::Subscribe(LockClient* client) {
  {
    std::lock_guard lock(impl_->mu);
    impl_->clients.push_back(client);
  }
  if (impl_->interest) client->SetUnlockInterest(impl_->interest);
}

void KafkaNotifier::Unsubscribe(LockClient* client) {
  if (impl_->interest) client->SetUnlockInterest(nullptr);
  std::lock_guard lock(impl_->mu);
  std::erase(impl_->clients, client);
}

bool KafkaNotifier::WaitUntilReady(std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->mu);
  return impl_->ready_cv.wait_for(lock, timeout,
                                  [&] { return impl_->partitions.load() > 0; });
}

NotifierStats KafkaNotifier::stats() const {
  auto get = [](const std::atomic<uint64_t>& v) {
    return v.load(std::memory_order_relaxed);
  };
  NotifierStats s;
  s.published = get(impl_->published);
  s.publish_dropped = get(impl_->publish_dropped);
  s.delivered = get(impl_->delivered);
  s.delivery_failed = get(impl_->delivery_failed);
  s.consumed = get(impl_->consumed);
  s.malformed = get(impl_->malformed);
  s.consumer_errors = get(impl_->consumer_errors);
  s.transport_errors = get(impl_->transport_errors);
  s.partitions = impl_->partitions.load();
  s.assigned = s.partitions > 0;
  s.fetched_partitions = impl_->targeted() ? impl_->Fetched() : s.partitions;
  s.partition_assigns = get(impl_->assigns);
  s.partition_unassigns = get(impl_->unassigns);
  s.replayed = get(impl_->replayed);
  s.fetch_wait_ms = impl_->fetch_wait_ms.load();
  s.last_delay_ns = impl_->last_delay_ns.load(std::memory_order_relaxed);
  s.delay_hook_errors = get(impl_->delay_hook_errors);
  std::lock_guard lock(impl_->mu);
  s.malformed_by_reason = impl_->malformed_by_reason;
  return s;
}

const KafkaOptions& KafkaNotifier::options() const { return impl_->options; }

bool KafkaNotifier::authenticates_events() const {
  return impl_->auth.enabled();
}

void KafkaNotifier::SetOnEventForTesting(
    std::function<void(const UnlockEvent&)> hook) {
  std::lock_guard lock(impl_->mu);
  impl_->hook = std::move(hook);
}

}  // namespace lockfleet::notifier
