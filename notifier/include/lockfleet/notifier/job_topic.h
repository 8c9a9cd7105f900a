// The worker fleet's jobs topic on Kafka: JobProducer writes job records,
// JobConsumer reads them as a member of a consumer group, at least once.
//
//   JobConsumer jobs({.bootstrap = "kafka:9092"});
//   while (running) {
//     jobs.SetPaused(!HaveCapacity());          // flow control
//     if (auto record = jobs.Poll(100ms)) {
//       pool.Run([&, r = *record] { Handle(r); jobs.MarkDone(r); });
//     }
//   }
//   jobs.Close();                               // commit, leave the group
//
// Delivery is at least once: a record is committed only once it and every
// record before it in its partition are finished (MarkDone), so a record
// still running when its member leaves, crashes or loses the partition in a
// rebalance is delivered again, to whichever member owns the partition then.
// Handlers must therefore tolerate duplicates (dedup by key, fencing).
//
// The group uses the cooperative-sticky assignor: a rebalance moves only the
// partitions that change owner, and the others keep being consumed.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "lockfleet/notifier/log.h"

namespace lockfleet::notifier {

// One record of the jobs topic, as JobConsumer::Poll hands it out.
struct JobRecord {
  int32_t partition = 0;
  int64_t offset = 0;
  std::string key;    // the producer's key (empty when it had none)
  std::string value;  // the job itself; format is the worker's business
  // Which assignment of `partition` the record came from. MarkDone ignores a
  // record whose partition was revoked (or revoked and re-assigned) since.
  // Set by Poll; keep it as it is.
  uint64_t epoch = 0;
};

struct JobConsumerOptions {
  std::string bootstrap;  // "host:port[,host:port...]", required
  std::string topic = "lockfleet.jobs";
  std::string group = "lockfleet-workers";  // consumer group id
  std::string client_id = "lockfleet";
  // fetch.wait.max.ms: how long the broker holds a fetch on an empty
  // partition. A real broker answers as soon as data arrives, so this costs
  // no latency there, and a long wait saves the idle fetches; the embedded
  // broker does not, so it is the pickup latency floor there. Unset, the
  // default: chosen for the broker by the constructor, which asks it what
  // it is (waiting up to 1 s): as the unlock consumer's (FetchWaitFor in
  // kafka_notifier.h), 1 ms on the embedded broker and 500 ms on a real
  // one, or on a broker that does not answer within that second (chosen
  // once: a worker started before the embedded broker keeps 500 ms).
  std::optional<std::chrono::milliseconds> fetch_wait;
  // How often the offsets of finished records are committed
  // (asynchronously, by librdkafka's auto-committer: auto.commit.interval.ms)
  // while the group is not rebalancing. A crash redelivers at most about
  // twice this much finished work. Default: 200 ms.
  std::chrono::milliseconds commit_interval{200};
  // session.timeout.ms: a member that stops heartbeating (crashed, cut off)
  // is dropped from the group, and its partitions reassigned, after this.
  // 6000 ms is the smallest a real broker accepts by default
  // (group.min.session.timeout.ms) and gives quick failover. The embedded
  // broker makes every rebalance after the first join wait this - 1 s, so
  // tests and demos on it use about 3000 ms. The heartbeat interval is a
  // sixth of it (1000 ms by default). Default: 6000 ms.
  std::chrono::milliseconds session_timeout{6000};
  // How long after construction the consumer joins the group (subscribes);
  // Poll returns nothing until then. A crash-looping worker waits so that
  // its short lives do not keep the group rebalancing and strand partitions
  // with dead members (see worker::JoinDelay). Default: 0, at once.
  std::chrono::milliseconds join_delay{0};
  // Passed to librdkafka verbatim, after everything above (so they override
  // it): security.protocol, sasl.*, ssl.*, debug, ... An unknown property is
  // an Error(kInvalidArgument), and so are enable.auto.commit and
  // enable.auto.offset.store: the consumer stores the offsets of finished
  // records only, and librdkafka's auto-committer commits them.
  std::map<std::string, std::string> properties;
  LogSink log;  // Default: stderr
};

// Counters since construction (and the fetch wait, last).
struct JobConsumerStats {
  uint64_t received = 0;         // records handed out by Poll
  uint64_t committed = 0;        // offset commit requests that succeeded
  uint64_t commit_failures = 0;  // offset commit requests that failed
  uint64_t rebalances = 0;       // assignment changes (each assign, revoke)
  uint64_t errors = 0;           // consume, transport and client errors
  uint64_t stale_marks = 0;      // MarkDone of a record of a revoked partition
  int assigned_partitions = 0;   // now
  // The fetch wait in use, in ms: options.fetch_wait, or the one chosen.
  int64_t fetch_wait_ms = 0;
};

// A member of a consumer group on the jobs topic.
//
// Thread-safety: Poll, SetPaused, Commit and Close belong to one thread (the
// poll thread); MarkDone, Lag and stats may be called from any thread
// concurrently with them and with each other.
class JobConsumer {
 public:
  // Subscribes to options.topic in options.group. Does not wait for the
  // broker — except, with no fetch wait given, up to 1 s for it to say what
  // it is (JobConsumerOptions::fetch_wait) —: the group is joined, and
  // partitions assigned, during Poll calls.
  // A new group starts at the beginning of each partition, so jobs produced
  // before the first worker started are not skipped. Throws
  // Error(kInvalidArgument) for bad options or properties, Error(kKafka) if
  // librdkafka refuses to start.
  explicit JobConsumer(JobConsumerOptions options);
  // Close(), then frees the client. Never throws.
  ~JobConsumer();
  JobConsumer(const JobConsumer&) = delete;
  JobConsumer& operator=(const JobConsumer&) = delete;

  // Poll thread. Returns the next record, or nullopt when none came within
  // `timeout` (also at once after Close). Also runs the group protocol
  // (joins, rebalances) and hands the offsets of what is finished to be
  // committed (every commit_interval, never while the group rebalances:
  // with librdkafka before 2.10 a commit answered after a rebalance can cost
  // the member all its partitions, and so redeliver finished records).
  // Must be called regularly, paused or not: a member that does
  // not call it for max.poll.interval.ms (librdkafka default 300 s) is
  // removed from the group. Errors (broker down, ...) are counted and
  // logged, never thrown.
  std::optional<JobRecord> Poll(std::chrono::milliseconds timeout);

  // Any thread. `record` is finished: it ran, or was deliberately given up.
  // Its partition's committed offset advances only past records that are
  // all finished: with records 5, 6, 7 taken and 6, 7 finished, nothing
  // beyond 5 is committed; once 5 is finished too, 8 is. A record whose
  // partition was revoked since Poll returned it (even if it was assigned
  // to this member again) is ignored and counted in stale_marks: the
  // partition's new owner receives it again. Calling it twice is harmless.
  void MarkDone(const JobRecord& record);

  // Poll thread. Flow control: while paused, Poll returns no records (but
  // must keep being called) and the client fetches nothing more. Partitions
  // assigned while paused stay paused. Nothing is skipped: records fetched
  // before the pause are returned after it. Cheap when nothing changes.
  void SetPaused(bool paused);

  // Poll thread. Commits what is finished now, synchronously: on return the
  // broker has it (or the failure is counted and logged). Blocks while the
  // broker is unreachable, up to librdkafka's socket.timeout.ms (60 s).
  // Unlike Poll's periodic commits it does not wait while the group
  // rebalances (see Poll): call it only when the group is settled.
  void Commit();

  // Poll thread. Commits what is finished, synchronously, then leaves the
  // group; its partitions go to the other members at once. Records handed
  // out but not finished are delivered again to the group (that is the
  // point: a job interrupted by shutdown runs elsewhere). Idempotent. With
  // the broker unreachable this can take socket.timeout.ms plus
  // session_timeout.
  void Close();

  // Any thread. Records in the topic beyond this member's position (the
  // next record it would receive; the group's committed offset before it
  // received any), summed over its assigned partitions. Computed from
  // librdkafka's cached watermarks and offsets, no broker round trip,
  // refreshed about once a second during Poll; the watermark of a paused
  // partition is the one from before the pause. -1 when unknown (before the
  // first assignment, or a partition's watermark is not known yet).
  int64_t Lag() const;

  JobConsumerStats stats() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

struct JobProducerOptions {
  std::string bootstrap;  // "host:port[,host:port...]", required
  std::string topic = "lockfleet.jobs";
  std::string client_id = "lockfleet";
  // A record not acknowledged by the broker within this (broker down, ...)
  // fails: it is counted and Flush reports it. Default: 30 s.
  std::chrono::milliseconds message_timeout{30000};
  // Passed to librdkafka verbatim, after everything above (so they override
  // it). An unknown property is an Error(kInvalidArgument).
  std::map<std::string, std::string> properties;
  LogSink log;  // Default: stderr
};

// Counters since construction.
struct JobProducerStats {
  uint64_t produced = 0;   // accepted by Produce (queued)
  uint64_t delivered = 0;  // acknowledged by the broker
  uint64_t failed = 0;     // not delivered: timed out or rejected by the broker
};

// Writes records to the jobs topic with acks=all and the idempotent
// producer: a record acknowledged is on every in-sync replica, and retries
// after a lost acknowledgement do not duplicate it.
//
// Thread-safety: all methods may be called from any thread concurrently.
class JobProducer {
 public:
  // Does not wait for the broker. Throws Error(kInvalidArgument) for bad
  // options or properties, Error(kKafka) if librdkafka refuses to start.
  explicit JobProducer(JobProducerOptions options);
  // Waits up to 5 s for queued records to be delivered; logs how many were
  // not. Never throws.
  ~JobProducer();
  JobProducer(const JobProducer&) = delete;
  JobProducer& operator=(const JobProducer&) = delete;

  // Queues one record; `key` picks the partition (same key, same partition,
  // so records with one key are consumed in order; an empty key is sent as
  // no key, and such records are spread over the partitions). Does not wait for
  // delivery. While the local queue is full it waits for room (at most
  // about message_timeout, after which queued records fail) instead of
  // dropping. Throws Error(kKafka) for a record that cannot be queued at all
  // (too large, unknown topic, the producer failed fatally); it is not
  // counted as produced.
  void Produce(std::string_view key, std::string_view value);

  // Waits until every record queued so far is delivered or has failed, or
  // `timeout` passes. Returns how many records accepted since construction
  // are not delivered: those that failed plus those still in flight at the
  // timeout (stats().produced - stats().delivered). 0 means every record
  // this producer ever accepted is acknowledged; so `lockfleet jobs
  // produce` exits non-zero exactly when Flush returns non-zero.
  uint64_t Flush(std::chrono::milliseconds timeout);

  JobProducerStats stats() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lockfleet::notifier
