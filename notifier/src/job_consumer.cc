#include <librdkafka/rdkafkacpp.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <thread>

#include "consumer_introspection.h"
#include "lockfleet/notifier/job_topic.h"
#include "offset_tracker.h"
#include "rate_limited_log.h"
#include "rdkafka_common.h"

namespace lockfleet::notifier {
namespace {

using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;

// How often librdkafka emits the statistics Lag() is computed from.
constexpr int kStatsIntervalMs = 1000;

// Properties the commit scheme below depends on; a user's value is refused.
constexpr const char* kOwnProperties[] = {"enable.auto.commit",
                                          "enable.auto.offset.store"};

// librdkafka's C++ API takes and returns vectors of raw TopicPartition
// pointers; this owns one.
struct PartitionList {
  PartitionList() = default;
  PartitionList(PartitionList&& other) noexcept : v(std::move(other.v)) {}
  PartitionList& operator=(PartitionList&&) = delete;
  ~PartitionList() { RdKafka::TopicPartition::destroy(v); }
  std::vector<RdKafka::TopicPartition*> v;
};

std::string PartitionNames(const std::vector<RdKafka::TopicPartition*>& parts) {
  std::string out = "[";
  for (const RdKafka::TopicPartition* tp : parts) {
    if (out.size() > 1) out += ",";
    out += std::to_string(tp->partition());
  }
  return out + "]";
}

std::string ErrorText(RdKafka::Error* error) {
  std::unique_ptr<RdKafka::Error> owned(error);
  return owned ? owned->str() : std::string();
}

}  // namespace

class JobConsumer::Impl final : public RdKafka::RebalanceCb,
                                public RdKafka::OffsetCommitCb,
                                public RdKafka::EventCb {
 public:
  explicit Impl(JobConsumerOptions o)
      : options(std::move(o)), log(SinkOrStderr(options.log)) {
    Require(!options.bootstrap.empty(), "Kafka bootstrap servers are required");
    Require(!options.topic.empty() && !options.group.empty(),
            "Kafka jobs topic and consumer group are required");
    Require(options.fetch_wait.value_or(milliseconds(0)).count() >= 0 &&
                options.commit_interval.count() > 0 &&
                options.session_timeout.count() > 0,
            "jobs fetch_wait must be >= 0, commit_interval and "
            "session_timeout > 0");
    for (const char* key : kOwnProperties) {
      Require(!options.properties.contains(key),
              std::string("Kafka property '") + key +
                  "' cannot be set for the jobs consumer: it commits the "
                  "offsets of finished records only, through librdkafka's "
                  "auto-committer");
    }
    Properties props = CommonProperties(options.bootstrap, options.client_id);
    props.insert({
        {"group.id", options.group},
        {"partition.assignment.strategy", "cooperative-sticky"},
        {"session.timeout.ms", Millis(options.session_timeout)},
        {"heartbeat.interval.ms",
         Millis(std::max(milliseconds(1), options.session_timeout / 6))},
        // Only offsets of finished records are stored (StoreDue), and
        // librdkafka's auto-committer commits what is stored: see StoreDue.
        {"enable.auto.commit", "true"},
        {"auto.commit.interval.ms", Millis(options.commit_interval)},
        {"enable.auto.offset.store", "false"},
        // A new group must not skip jobs produced before it joined.
        {"auto.offset.reset", "earliest"},
        {"enable.partition.eof", "false"},
        {"fetch.wait.max.ms",
         Millis(options.fetch_wait.value_or(kRealFetchWait))},
        {"fetch.error.backoff.ms", "50"},
        {"statistics.interval.ms", std::to_string(kStatsIntervalMs)},
    });
    auto conf = MakeConf(props, options.properties, this);
    SetCallback(*conf, "rebalance_cb",
                static_cast<RdKafka::RebalanceCb*>(this));
    SetCallback(*conf, "offset_commit_cb",
                static_cast<RdKafka::OffsetCommitCb*>(this));
    std::string err;
    consumer.reset(RdKafka::KafkaConsumer::create(conf.get(), err));
    if (!consumer)
      throw Error(ErrorCode::kKafka, "cannot create Kafka consumer: " + err);
    if (!options.fetch_wait &&
        !options.properties.contains("fetch.wait.max.ms")) {
      ChooseFetchWait(*conf);
    }
    fetch_wait_ms = ConfFetchWait(*conf).count();
    join_at = Steady::now() + options.join_delay;
    if (options.join_delay <= milliseconds(0)) Subscribe();
  }

  // No fetch wait given: fits the consumer's to the broker
  // (FitFetchWaitToBroker) — not subscribed yet, used by no other thread
  // yet. A broker that does not answer keeps the real broker's wait
  // (logged, counted).
  void ChooseFetchWait(RdKafka::Conf& conf) {
    const BrokerFetchWait fit =
        FitFetchWaitToBroker(consumer, conf, FanOut::kBroadcast);
    const std::string wait = Millis(ConfFetchWait(conf));
    if (!fit.answered) {
      errors.fetch_add(1, std::memory_order_relaxed);
      logs.Log("fetch_wait", LogLevel::kWarning,
               "Kafka at " + options.bootstrap + " did not answer (" +
                   fit.error + "): jobs fetch wait " + wait +
                   " ms, a real broker's; for the embedded broker set "
                   "kafka.fetch_wait: 1ms",
               log);
    } else if (!fit.error.empty()) {
      errors.fetch_add(1, std::memory_order_relaxed);
      logs.Log("fetch_wait", LogLevel::kError, fit.error, log);
    } else {
      logs.Log("fetch_wait", LogLevel::kInfo, "jobs fetch wait " + wait + " ms",
               log);
    }
  }

  void Subscribe() {
    RdKafka::ErrorCode rc = consumer->subscribe({options.topic});
    if (rc != RdKafka::ERR_NO_ERROR) {
      throw Error(ErrorCode::kKafka, "cannot subscribe to '" + options.topic +
                                         "': " + RdKafka::err2str(rc));
    }
    subscribed = true;
  }

  ~Impl() override {
    try {
      Close();
    } catch (...) {  // best effort: unfinished records are redelivered
    }
    consumer.reset();  // before the callbacks it calls are gone
  }

  std::optional<JobRecord> Poll(milliseconds timeout) {
    if (closed) return std::nullopt;
    const Steady::time_point deadline = Steady::now() + timeout;
    if (!subscribed) {
      if (Steady::now() < join_at) {
        std::this_thread::sleep_until(std::min(deadline, join_at));
        return std::nullopt;
      }
      try {
        Subscribe();
      } catch (const Error& e) {
        errors.fetch_add(1, std::memory_order_relaxed);
        logs.Log("subscribe", LogLevel::kError, e.what(), log);
        join_at = Steady::now() + milliseconds(1000);  // tried again
        return std::nullopt;
      }
    }
    while (true) {
      StoreDue({}, /*resend=*/false);
      if (!paused && !held.empty()) {
        JobRecord record = std::move(held.front());
        held.pop_front();
        if (HandOut(record)) return record;
        continue;
      }
      // Records finished meanwhile are stored after at most this long.
      auto wait = std::chrono::ceil<milliseconds>(
          std::min(deadline, Steady::now() + options.commit_interval) -
          Steady::now());
      std::unique_ptr<RdKafka::Message> msg(consumer->consume(
          static_cast<int>(std::max<int64_t>(0, wait.count()))));
      switch (msg->err()) {
        case RdKafka::ERR_NO_ERROR: {
          JobRecord record = ToRecord(*msg);
          if (paused) {
            held.push_back(std::move(record));  // fetched before the pause
          } else if (HandOut(record)) {
            return record;
          }
          break;
        }
        case RdKafka::ERR__TIMED_OUT:
        case RdKafka::ERR__PARTITION_EOF:
          break;
        default:
          errors.fetch_add(1, std::memory_order_relaxed);
          logs.Log("consume", LogLevel::kWarning,
                   "Kafka consume error on '" + options.topic +
                       "': " + msg->errstr(),
                   log);
          return std::nullopt;  // the caller polls again; no busy loop
      }
      if (Steady::now() >= deadline) return std::nullopt;
    }
  }

  void MarkDone(const JobRecord& record) {
    if (!tracker.Done(record.partition, record.epoch, record.offset)) {
      stale_marks.fetch_add(1, std::memory_order_relaxed);
    }
  }

  void SetPaused(bool pause) {
    if (closed || pause == paused) return;
    paused = pause;
    PartitionList list;
    for (int32_t p : tracker.Partitions()) {
      list.v.push_back(RdKafka::TopicPartition::create(options.topic, p));
    }
    if (list.v.empty()) return;
    RdKafka::ErrorCode rc =
        pause ? consumer->pause(list.v) : consumer->resume(list.v);
    if (rc != RdKafka::ERR_NO_ERROR) {
      errors.fetch_add(1, std::memory_order_relaxed);
      logs.Log("pause", LogLevel::kError,
               std::string(pause ? "pause" : "resume") +
                   " failed: " + RdKafka::err2str(rc),
               log);
    }
  }

  // Unlike librdkafka's own commits (see StoreDue), this one is sent even
  // while the group rebalances.
  void Commit() {
    if (closed) return;
    std::vector<OffsetTracker::Commit> due = StoreDue({}, /*resend=*/true);
    if (due.empty()) return;
    PartitionList list = ToList(due);
    commit_result_seen = false;
    RdKafka::ErrorCode rc = consumer->commitSync(list.v, this);
    // Refused before it was sent, or timed out without a result: report it
    // as the callback would have.
    if (rc != RdKafka::ERR_NO_ERROR && !commit_result_seen) {
      offset_commit_cb(rc, list.v);
    }
  }

  void Close() {
    if (closed) return;
    closed = true;
    // Leaving revokes every partition through rebalance_cb, and librdkafka
    // commits what is stored for them before close() returns.
    StoreDue({}, /*resend=*/true);
    RdKafka::ErrorCode rc = consumer->close();
    if (rc != RdKafka::ERR_NO_ERROR) {
      errors.fetch_add(1, std::memory_order_relaxed);
      logs.Log("close", LogLevel::kWarning,
               "leaving group '" + options.group +
                   "' failed: " + RdKafka::err2str(rc),
               log);
    }
    for (int32_t p : tracker.Partitions()) tracker.Revoke(p);
    held.clear();
    assigned_partitions.store(0);
    lag.store(-1);
  }

  // Runs inside consume() and close(), on the poll thread.
  void rebalance_cb(RdKafka::KafkaConsumer* c, RdKafka::ErrorCode err,
                    std::vector<RdKafka::TopicPartition*>& parts) override {
    rebalances.fetch_add(1, std::memory_order_relaxed);
    if (!parts.empty()) {
      log(LogLevel::kInfo,
          std::string(err == RdKafka::ERR__ASSIGN_PARTITIONS ? "assigned"
                      : err == RdKafka::ERR__REVOKE_PARTITIONS
                          ? (c->assignment_lost() ? "lost" : "revoked")
                          : "rebalance error") +
              " '" + options.topic + "' partitions " + PartitionNames(parts) +
              " (group '" + options.group + "')");
    }
    if (err == RdKafka::ERR__ASSIGN_PARTITIONS) {
      ChangeAssignment(*c, /*add=*/true, parts);
      for (RdKafka::TopicPartition* tp : parts) {
        if (tp->topic() == options.topic) tracker.Assign(tp->partition());
      }
      // Assigned while paused: stop them before their first fetch.
      if (paused && !parts.empty() &&
          c->pause(parts) != RdKafka::ERR_NO_ERROR) {
        errors.fetch_add(1, std::memory_order_relaxed);
        logs.Log("pause", LogLevel::kError,
                 "pausing newly assigned partitions failed", log);
      }
    } else {
      if (err != RdKafka::ERR__REVOKE_PARTITIONS) {
        errors.fetch_add(1, std::memory_order_relaxed);
        logs.Log("rebalance", LogLevel::kError,
                 "rebalance error: " + RdKafka::err2str(err), log);
      }
      std::vector<int32_t> revoked;
      for (RdKafka::TopicPartition* tp : parts) {
        if (tp->topic() == options.topic) revoked.push_back(tp->partition());
      }
      // librdkafka commits what is stored for them when ChangeAssignment
      // removes them below (and waits for that before the group moves on),
      // except lost ones, which may already have a new owner.
      if (err == RdKafka::ERR__REVOKE_PARTITIONS && !c->assignment_lost() &&
          !revoked.empty()) {
        StoreDue(revoked, /*resend=*/true);
      }
      for (int32_t p : revoked) tracker.Revoke(p);
      std::erase_if(held, [&](const JobRecord& r) {
        return std::find(revoked.begin(), revoked.end(), r.partition) !=
               revoked.end();
      });
      ChangeAssignment(*c, /*add=*/false, parts);
    }
    assigned_partitions.store(static_cast<int>(tracker.Partitions().size()));
    ever_assigned.store(true);
  }

  // Takes (`add`) or gives up `parts`, the way the group's protocol wants.
  void ChangeAssignment(RdKafka::KafkaConsumer& c, bool add,
                        std::vector<RdKafka::TopicPartition*>& parts) {
    std::string failure;
    if (c.rebalance_protocol() == "COOPERATIVE") {
      failure = ErrorText(add ? c.incremental_assign(parts)
                              : c.incremental_unassign(parts));
    } else {
      RdKafka::ErrorCode rc = add ? c.assign(parts) : c.unassign();
      if (rc != RdKafka::ERR_NO_ERROR) failure = RdKafka::err2str(rc);
    }
    if (failure.empty()) return;
    errors.fetch_add(1, std::memory_order_relaxed);
    logs.Log("rebalance", LogLevel::kError,
             std::string(add ? "taking" : "giving up") +
                 " partitions failed: " + failure,
             log);
  }

  // Results of librdkafka's commits inside consume(), of Commit()'s inside
  // commitSync (passed there, so each result arrives exactly once). A
  // partition with nothing new stored comes with an invalid offset.
  void offset_commit_cb(
      RdKafka::ErrorCode err,
      std::vector<RdKafka::TopicPartition*>& offsets) override {
    if (err == RdKafka::ERR__NO_OFFSET) return;  // nothing was due
    bool ok = err == RdKafka::ERR_NO_ERROR;
    for (RdKafka::TopicPartition* tp : offsets) {
      if (tp->err() != RdKafka::ERR_NO_ERROR) ok = false;
    }
    for (RdKafka::TopicPartition* tp : offsets) {
      if (tp->topic() != options.topic || tp->offset() < 0) continue;
      tracker.Committed(
          tp->partition(), tp->offset(),
          err == RdKafka::ERR_NO_ERROR && tp->err() == RdKafka::ERR_NO_ERROR);
    }
    commit_result_seen = true;
    if (ok) {
      committed.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    commit_failures.fetch_add(1, std::memory_order_relaxed);
    std::string detail = RdKafka::err2str(err);
    for (RdKafka::TopicPartition* tp : offsets) {
      if (tp->err() != RdKafka::ERR_NO_ERROR) {
        detail += "; partition " + std::to_string(tp->partition()) + " at " +
                  std::to_string(tp->offset()) + ": " +
                  RdKafka::err2str(tp->err());
      }
    }
    logs.Log("commit", LogLevel::kWarning,
             "committing job offsets failed (retried; finished records may "
             "be delivered again): " +
                 detail,
             log);
  }

  // Runs inside consume() for errors and statistics, and on librdkafka's
  // own threads for log lines.
  void event_cb(RdKafka::Event& event) override {
    if (event.type() == RdKafka::Event::EVENT_STATS) {
      UpdateLag(event.str());
      return;
    }
    if (LogClientEvent(event, logs, log, "jobs wait until it is back") !=
        ClientEvent::kOther) {
      errors.fetch_add(1, std::memory_order_relaxed);
    }
  }

  static JobRecord ToRecord(const RdKafka::Message& msg) {
    JobRecord r;
    r.partition = msg.partition();
    r.offset = msg.offset();
    if (const std::string* key = msg.key()) r.key = *key;
    if (msg.payload() != nullptr)
      r.value.assign(static_cast<const char*>(msg.payload()), msg.len());
    return r;
  }

  // Registers `record` as taken. False for a record of a partition no
  // longer assigned (its new owner receives it).
  bool HandOut(JobRecord& record) {
    std::optional<uint64_t> epoch =
        tracker.Take(record.partition, record.offset);
    if (!epoch) return false;
    record.epoch = *epoch;
    received.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  PartitionList ToList(const std::vector<OffsetTracker::Commit>& due) const {
    PartitionList list;
    for (const OffsetTracker::Commit& c : due) {
      list.v.push_back(RdKafka::TopicPartition::create(options.topic,
                                                       c.partition, c.offset));
    }
    return list;
  }

  // Hands the offsets of what is finished (for `only` these partitions, all
  // if empty; unless `resend`, only what was not handed over before) to
  // librdkafka's offset store, and returns them. librdkafka commits stored
  // offsets itself: every commit_interval, only while the member's join
  // state is "steady" (rd_kafka_cgrp_offset_commit_tmr_cb), and when
  // partitions are removed from the assignment, unless it was lost
  // (rd_kafka_assignment_serve_removals).
  //
  // That is the point. librdkafka before 2.10 takes an offset commit
  // answered ILLEGAL_GENERATION for a lost assignment: it drops every
  // partition without a revoke-time commit, so finished records are
  // delivered again (librdkafka #4059). A commit sent while the member's
  // JoinGroup is pending is answered only after the join (a broker answers
  // a connection's requests in order), with exactly that error (Kafka 2.3+,
  // KAFKA-8487, and the embedded broker check the generation first). The
  // join state lives on librdkafka's main thread, and the auto-committer
  // checks it there right before it queues its commit, so no JoinGroup can
  // get ahead of it. A commit decided on any other thread (commitAsync after
  // reading the join state from debug lines or statistics) can be
  // overtaken. tests/notifier/job_commit_test.cc shows both.
  std::vector<OffsetTracker::Commit> StoreDue(const std::vector<int32_t>& only,
                                              bool resend) {
    std::vector<OffsetTracker::Commit> due = tracker.Due(only, resend);
    if (due.empty()) return due;
    PartitionList list = ToList(due);
    RdKafka::ErrorCode rc = consumer->offsets_store(list.v);
    bool stored = rc == RdKafka::ERR_NO_ERROR;
    for (RdKafka::TopicPartition* tp : list.v) {
      if (tp->err() != RdKafka::ERR_NO_ERROR) stored = false;
    }
    // Not assigned any more (a race with the group): report it as a failed
    // commit, which makes the offsets due again while they are ours.
    if (!stored) {
      offset_commit_cb(rc != RdKafka::ERR_NO_ERROR ? rc : RdKafka::ERR__STATE,
                       list.v);
    }
    return due;
  }

  void UpdateLag(const std::string& json) {
    if (!ever_assigned.load() || closed) return;
    int64_t lag_now =
        LagFromStatistics(json, options.topic, tracker.Partitions());
    // Fetched while paused: past librdkafka's position, not handed out.
    if (lag_now >= 0) lag_now += static_cast<int64_t>(held.size());
    lag.store(lag_now);
  }

  JobConsumerOptions options;
  LogSink log;
  RateLimitedLog logs;
  OffsetTracker tracker;
  std::atomic<uint64_t> received{0}, committed{0}, commit_failures{0},
      rebalances{0}, errors{0}, stale_marks{0};
  std::atomic<int> assigned_partitions{0};
  std::atomic<int64_t> lag{-1};
  std::atomic<bool> ever_assigned{false};

  // Poll-thread state.
  bool subscribed = false;
  Steady::time_point join_at;  // subscribe then (options.join_delay)
  bool paused = false;
  bool closed = false;
  bool commit_result_seen = false;
  int64_t fetch_wait_ms = 0;   // set by the constructor only
  std::deque<JobRecord> held;  // fetched while paused, not handed out yet

  // Last: destroyed first, while everything its callbacks use still exists.
  std::unique_ptr<RdKafka::KafkaConsumer> consumer;
};

JobConsumer::JobConsumer(JobConsumerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

JobConsumer::~JobConsumer() = default;

std::optional<JobRecord> JobConsumer::Poll(std::chrono::milliseconds timeout) {
  return impl_->Poll(timeout);
}

void JobConsumer::MarkDone(const JobRecord& record) { impl_->MarkDone(record); }

void JobConsumer::SetPaused(bool paused) { impl_->SetPaused(paused); }

void JobConsumer::Commit() { impl_->Commit(); }

void JobConsumer::Close() { impl_->Close(); }

int64_t JobConsumer::Lag() const { return impl_->lag.load(); }

JobConsumerStats JobConsumer::stats() const {
  auto get = [](const std::atomic<uint64_t>& v) {
    return v.load(std::memory_order_relaxed);
  };
  JobConsumerStats s;
  s.received = get(impl_->received);
  s.committed = get(impl_->committed);
  s.commit_failures = get(impl_->commit_failures);
  s.rebalances = get(impl_->rebalances);
  s.errors = get(impl_->errors);
  s.stale_marks = get(impl_->stale_marks);
  s.assigned_partitions = impl_->assigned_partitions.load();
  s.fetch_wait_ms = impl_->fetch_wait_ms;
  return s;
}

}  // namespace lockfleet::notifier
