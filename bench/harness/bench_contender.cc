#include "bench_contender.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <stop_token>
#include <thread>
#include <vector>

#include "bench_records.h"
#include "child_process.h"
#include "config_options.h"
#include "kafka_wakeups.h"
#include "lockfleet/config/redis_url.h"
#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/multi_lock.h"
#include "lockfleet/lockcore/rwlock.h"
#include "lockfleet/lockcore/semaphore.h"
#include "lockfleet/notifier/kafka_notifier.h"

namespace lockfleet::cli {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::system_clock;

constexpr milliseconds kErrorBackoff{20};
constexpr milliseconds kSetupTimeout{30000};

system_clock::time_point WallTime(int64_t ns) {
  return system_clock::time_point(
      std::chrono::duration_cast<system_clock::duration>(nanoseconds(ns)));
}

// Sleeps up to `duration`, returning early once `stop` is requested.
void SleepUnlessStopped(std::stop_token stop, nanoseconds duration) {
  const auto until = std::chrono::steady_clock::now() + duration;
  while (!stop.stop_requested() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::min<nanoseconds>(
        milliseconds(20), until - std::chrono::steady_clock::now()));
  }
}

// What the threads of one process share while they run.
struct Shared {
  const BenchArgs& args;
  RedisClient& redis;
  LockClient& locks;
  int64_t end_ns;
  std::stop_token stop;
  std::atomic<uint64_t> acquisitions{0};
  std::atomic<uint64_t> poll_sleeps{0};
  std::atomic<uint64_t> token_takes{0};  // --mode floor: BLPOP calls
  // --primitive other than lock: acquire scripts run (result.attempts).
  std::atomic<uint64_t> primitive_attempts{0};
  std::mutex mu;
  std::map<std::string, uint64_t> errors;  // guarded by mu

  void CountError(const std::string& code) {
    std::lock_guard lock(mu);
    ++errors[code];
  }
};

// A wait's time limit: the run's end, and a second past it. The end stops
// the wait (Shared::stop) before its own deadline can: a deadline reached
// first would count the waiter's last attempt and its giving up in the run.
nanoseconds UntilRunEnd(const Shared& shared) {
  return nanoseconds(shared.end_ns - WallClockNs()) + std::chrono::seconds(1);
}

// One attempt loop of --mode poll: TryAcquire, else sleep the interval.
AcquireResult Poll(Shared& shared, const std::string& name, bool& waited) {
  const milliseconds interval(shared.args.poll_interval_ms);
  while (true) {
    AcquireResult result = shared.locks.TryAcquire(name, {.fair = false});
    if (result || WallClockNs() >= shared.end_ns ||
        shared.stop.stop_requested()) {
      return result;
    }
    waited = true;
    shared.poll_sleeps.fetch_add(1, std::memory_order_relaxed);
    std::this_thread::sleep_for(interval);
  }
}

// --mode floor: takes lock `index`'s token with BLPOP, bounded so that the
// end of the run and a stop are seen; false when the run ended first.
bool TakeToken(Shared& shared, int index, bool& waited) {
  const std::string key = FloorKey(index);
  while (!shared.stop.stop_requested() && WallClockNs() < shared.end_ns) {
    shared.token_takes.fetch_add(1, std::memory_order_relaxed);
    const Reply reply = shared.redis.Execute({"BLPOP", key, "0.5"});
    if (reply.type == Reply::Type::kArray) return true;
    if (reply.type == Reply::Type::kError) {
      throw Error(ErrorReplyCode(reply.str, ErrorCode::kRedisProtocol),
                  "BLPOP " + key + ": " + reply.str);
    }
    waited = true;  // timed out: nobody gave the token back for 0.5 s
  }
  return false;
}

// Gives the token back. Retried until the run ends: a token not given back
// stops every other contender of its lock.
void GiveTokenBack(Shared& shared, int index) {
  while (true) {
    try {
      const Reply reply =
          shared.redis.Execute({"RPUSH", FloorKey(index), "token"});
      if (reply.type != Reply::Type::kError) return;
      shared.CountError(std::string(
          ErrorCodeName(ErrorReplyCode(reply.str, ErrorCode::kRedisProtocol))));
    } catch (const Error& e) {
      shared.CountError(std::string(ErrorCodeName(e.code())));
    }
    if (shared.stop.stop_requested() || WallClockNs() >= shared.end_ns) {
      return;
    }
    SleepUnlessStopped(shared.stop, kErrorBackoff);
  }
}

// One critical section of --mode floor: token taken, held, given back.
void FloorSection(Shared& shared, int lock, RecordWriter& records) {
  bool waited = false;
  if (!TakeToken(shared, lock, waited)) return;
  Section section{.acquire_ns = WallClockNs(), .lock = lock, .waited = waited};
  if (shared.args.hold_ms > 0)
    std::this_thread::sleep_for(milliseconds(shared.args.hold_ms));
  section.release_ns = WallClockNs();
  records.Write(section);
  shared.acquisitions.fetch_add(1, std::memory_order_relaxed);
  GiveTokenBack(shared, lock);
}

// Holds, records and releases one section of --primitive rwlock, semaphore
// or multilock. `trips_before`: the client's round trips before the
// acquire call.
// `attempts`: acquire scripts the call ran; `waited`: more than one try.
template <typename Hold>
void RecordHold(Shared& shared, bool acquired, uint64_t attempts, bool waited,
                Hold& hold, int lock, bool write, uint64_t trips_before,
                RecordWriter& records) {
  const uint64_t trips = shared.redis.round_trips() - trips_before;
  shared.primitive_attempts.fetch_add(attempts, std::memory_order_relaxed);
  if (!acquired) return;  // the run ended while waiting
  Section section{
      .acquire_ns = WallClockNs(),
      .lock = lock,
      .waited = waited,
      .write = write,
      .acquire_trips = static_cast<int32_t>(std::min<uint64_t>(trips, 255))};
  if (shared.args.hold_ms > 0)
    std::this_thread::sleep_for(milliseconds(shared.args.hold_ms));
  section.release_ns = WallClockNs();
  section.lost = hold.lost();
  records.Write(section);
  shared.acquisitions.fetch_add(1, std::memory_order_relaxed);
  hold.Release();
}

void Contend(Shared& shared, int thread, RecordWriter& records) {
  const BenchArgs& args = shared.args;
  std::mt19937 random(static_cast<uint32_t>(args.child_index * 7919 + thread));
  std::uniform_int_distribution<int> pick(0, args.locks - 1);
  std::vector<std::string> names;
  for (int i = 0; i < args.locks; ++i) names.push_back(BenchLockName(i));
  const std::vector<std::string> multi_names = MultiLockNames(args.names);
  std::uniform_int_distribution<int> share(0, 99);
  AcquireOptions options{.stop = shared.stop};
  while (!shared.stop.stop_requested() && WallClockNs() < shared.end_ns) {
    const int lock = pick(random);
    try {
      if (args.mode == BenchMode::kFloor) {
        FloorSection(shared, lock, records);
        if (args.think_ms > 0) {
          SleepUnlessStopped(shared.stop, milliseconds(args.think_ms));
        }
        continue;
      }
      if (args.primitive != Primitive::kLock) {
        const nanoseconds left = UntilRunEnd(shared);
        const uint64_t trips_before = shared.redis.round_trips();
        if (args.primitive == Primitive::kRwLock) {
          const bool write = share(random) >= args.read_share;
          RwResult r = shared.locks.ReadWriteLock(names[lock])
                           .AcquireFor(write ? RwMode::kWrite : RwMode::kRead,
                                       left, {.stop = shared.stop});
          RecordHold(shared, static_cast<bool>(r),
                     static_cast<uint64_t>(std::max(0, r.attempts)),
                     r.attempts > 1, r.lease, lock, write, trips_before,
                     records);
        } else if (args.primitive == Primitive::kSemaphore) {
          PermitResult r = shared.locks.Semaphore(names[lock])
                               .AcquireFor(1, left, {.stop = shared.stop});
          RecordHold(shared, static_cast<bool>(r),
                     static_cast<uint64_t>(std::max(0, r.attempts)),
                     r.attempts > 1, r.permits, lock, false, trips_before,
                     records);
        } else {
          // AcquireAllResult has no attempt count: the client's (exact with
          // one thread per process). One try takes each name once.
          const uint64_t attempts_before = shared.locks.stats().attempts;
          AcquireAllResult r =
              shared.locks.AcquireAllFor(multi_names, left, options);
          const uint64_t attempts =
              shared.locks.stats().attempts - attempts_before;
          RecordHold(shared, static_cast<bool>(r), attempts,
                     attempts > multi_names.size(), r.lease, 0, false,
                     trips_before, records);
        }
        if (args.think_ms > 0) {
          SleepUnlessStopped(shared.stop, milliseconds(args.think_ms));
        }
        continue;
      }
      bool waited = false;
      AcquireResult result;
      if (args.mode == BenchMode::kPoll) {
        result = Poll(shared, names[lock], waited);
      } else {
        result =
            shared.locks.AcquireFor(names[lock], UntilRunEnd(shared), options);
        waited = result.attempts > 1;
      }
      if (!result) continue;  // the run ended while waiting
      Section section{
          .acquire_ns = WallClockNs(), .lock = lock, .waited = waited};
      if (args.hold_ms > 0)
        std::this_thread::sleep_for(milliseconds(args.hold_ms));
      section.release_ns = WallClockNs();
      section.lost = result.lease.lost();
      // Recorded before the release is sent: a release that fails still
      // leaves the section as it was held.
      records.Write(section);
      shared.acquisitions.fetch_add(1, std::memory_order_relaxed);
      result.lease.Release();
    } catch (const Error& e) {
      shared.CountError(std::string(ErrorCodeName(e.code())));
      SleepUnlessStopped(shared.stop, kErrorBackoff);
    } catch (const std::exception&) {
      shared.CountError("other");
      SleepUnlessStopped(shared.stop, kErrorBackoff);
    }
    if (args.think_ms > 0) {
      SleepUnlessStopped(shared.stop, milliseconds(args.think_ms));
    }
  }
}

// Waits for the parent's start file; false if stopped or timed out.
bool WaitForGo(const std::string& run_dir, std::stop_token stop,
               int64_t& start_ns, int64_t& end_ns) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::minutes(10);
  while (!stop.stop_requested() &&
         std::chrono::steady_clock::now() < deadline) {
    if (::access(GoPath(run_dir).c_str(), F_OK) == 0) {
      const std::optional<std::string> text = ReadWholeFile(GoPath(run_dir));
      if (text &&
          std::sscanf(text->c_str(), "%ld %ld", &start_ns, &end_ns) == 2) {
        return true;
      }
    }
    std::this_thread::sleep_for(milliseconds(2));
  }
  return false;
}

void AddNotifierErrors(const notifier::NotifierStats& before,
                       const notifier::NotifierStats& after,
                       std::map<std::string, uint64_t>& errors) {
  const auto add = [&](const char* name, uint64_t b, uint64_t a) {
    if (a > b) errors[name] += a - b;
  };
  add("kafka_publish_dropped", before.publish_dropped, after.publish_dropped);
  add("kafka_delivery_failed", before.delivery_failed, after.delivery_failed);
  add("kafka_consumer_error", before.consumer_errors, after.consumer_errors);
  add("kafka_transport_error", before.transport_errors, after.transport_errors);
}

}  // namespace

int RunContender(const BenchArgs& args, const Context& context) {
  std::stop_source stop;
  ScopedSignalHandler on_signal(context.signals,
                                [&](int) { stop.request_stop(); });

  std::shared_ptr<notifier::KafkaNotifier> kafka;
  if (args.mode == BenchMode::kKafka) {
    kafka = StartKafka(BenchKafkaOptions(args, args.kafka));
  }
  LockClientOptions lock_options{
      .key_prefix = kBenchKeyPrefix, .fair = args.fair, .publisher = kafka};
  if (args.park_cap_ms > 0)
    lock_options.park_cap = milliseconds(args.park_cap_ms);
  if (args.spin_max_hold_ms >= 0)
    lock_options.spin_max_hold = milliseconds(args.spin_max_hold_ms);
  if (args.config) {
    // The deployment's replica acknowledgement is part of what it costs.
    lock_options.min_replicas = args.config->redis.min_replicas;
    lock_options.replica_timeout = args.config->redis.replica_timeout;
  }
  RedisOptions redis_options =
      args.config ? RedisOptionsFrom(args.config->redis) : RedisOptions{};
  redis_options.url = args.redis;
  redis_options.pool_size = args.threads + 2;
  auto redis = std::make_shared<RedisClient>(redis_options);
  auto locks = std::make_unique<LockClient>(redis, lock_options);
  auto subscription =
      std::make_unique<ScopedSubscription>(kafka.get(), locks.get());

  // Warm-up, outside the timed run: connections, script SHAs, partitions.
  try {
    redis->Execute({"PING"});
    const std::string warm =
        "bench:warm-up:" + std::to_string(args.child_index);
    AcquireResult result = locks->TryAcquire(warm);
    if (result) result.lease.Release();
    // The primitive's scripts, and the semaphores' permits (idempotent:
    // every contender sets the same number).
    if (args.primitive == Primitive::kRwLock) {
      RwResult r = locks->ReadWriteLock(warm).TryAcquire(RwMode::kRead);
      if (r) r.lease.Release();
    } else if (args.primitive == Primitive::kSemaphore) {
      for (int i = 0; i < args.locks; ++i) {
        locks->Semaphore(BenchLockName(i)).SetPermits(args.permits);
      }
      lockfleet::Semaphore warm_semaphore = locks->Semaphore(warm);
      warm_semaphore.SetPermits(1);
      PermitResult r = warm_semaphore.TryAcquire(1);
      if (r) r.permits.Release();
    }
  } catch (const Error& e) {
    PrintError("redis " + Quoted(config::RedactRedisUrl(args.redis)) +
               " unreachable: " + e.what());
    return kExitUnavailable;
  }
  if (kafka && !kafka->WaitUntilReady(kSetupTimeout)) {
    PrintError("kafka " + Quoted(args.kafka) +
               ": no partitions assigned within " +
               std::to_string(kSetupTimeout.count() / 1000) + " s");
    return kExitUnavailable;
  }
  std::vector<std::unique_ptr<RecordWriter>> records;
  try {
    for (int t = 0; t < args.threads; ++t) {
      records.push_back(std::make_unique<RecordWriter>(
          RecordPath(args.run_dir, args.child_index, t)));
    }
  } catch (const std::exception& e) {
    PrintError(e.what());
    return kExitSoftware;
  }
  std::cout << "ready" << std::endl;

  int64_t start_ns = 0, end_ns = 0;
  if (!WaitForGo(args.run_dir, stop.get_token(), start_ns, end_ns)) {
    return kExitSignalBase + SIGTERM;
  }
  std::this_thread::sleep_until(WallTime(start_ns));
  const LockStats stats_before = locks->stats();
  const uint64_t trips_before = redis->round_trips();
  const notifier::NotifierStats kafka_before =
      kafka ? kafka->stats() : notifier::NotifierStats{};

  // The run's end stops the contenders, as a signal does: the costs are
  // counted up to it (below), and a wait it cuts short is cancelled then,
  // not left to reach its deadline first.
  std::stop_source run_over;
  std::stop_callback forward(stop.get_token(),
                             [&run_over] { run_over.request_stop(); });
  Shared shared{.args = args,
                .redis = *redis,
                .locks = *locks,
                .end_ns = end_ns,
                .stop = run_over.get_token()};
  std::vector<std::thread> threads;
  for (int t = 0; t < args.threads; ++t) {
    threads.emplace_back([&, t] { Contend(shared, t, *records[t]); });
  }
  ContenderReport report{.index = args.child_index};
  // "After warm-up": a fifth into the run (at most 5 s in), when the
  // clients' buffers and connections have reached their working size.
  const int64_t warm_at =
      start_ns + std::min<int64_t>((end_ns - start_ns) / 5, 5'000'000'000);
  while (WallClockNs() < warm_at && !stop.stop_requested()) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  report.warm = SampleResources();
  // The costs are counted over the run's window, as Redis's commands are
  // (the parent reads them at its end): a waiter parked when the run ends
  // then makes a last attempt and gives its place up, which is no
  // acquisition's cost.
  SleepUnlessStopped(stop.get_token(),
                     nanoseconds(std::max<int64_t>(0, end_ns - WallClockNs())));
  const LockStats stats = locks->stats();
  const uint64_t trips_end = redis->round_trips();
  run_over.request_stop();
  for (std::thread& thread : threads) thread.join();
  report.end = SampleResources();
  for (auto& writer : records) writer->Close();

  const LockStats stats_after = locks->stats();
  report.acquisitions = shared.acquisitions.load();
  report.attempts = args.mode == BenchMode::kFloor ? shared.token_takes.load()
                    : args.primitive == Primitive::kRwLock ||
                            args.primitive == Primitive::kSemaphore
                        ? shared.primitive_attempts.load()
                        : stats.attempts - stats_before.attempts;
  report.round_trips = trips_end - trips_before;
  if (args.mode == BenchMode::kPoll) {
    report.wakeups["poll"] = shared.poll_sleeps.load();
  } else if (args.mode == BenchMode::kFloor) {
    // Redis itself wakes a blocked BLPOP: no cause of lockfleet's.
  } else {
    // A direct grant (a release in this process granted the waiter the
    // lock) is a local wake-up too: counted apart, so the causes add up.
    const uint64_t direct = stats.direct_grants - stats_before.direct_grants;
    report.wakeups["local"] =
        stats.wakeups_local - stats_before.wakeups_local - direct;
    if (direct > 0) report.wakeups["direct"] = direct;
    report.wakeups["bound"] = stats.wakeups_bound - stats_before.wakeups_bound;
    // The queue head's own check found its grant (spinning, fair mode).
    if (stats.wakeups_spin > stats_before.wakeups_spin)
      report.wakeups["spin"] = stats.wakeups_spin - stats_before.wakeups_spin;
    if (kafka) {
      report.wakeups["event"] =
          stats.wakeups_event - stats_before.wakeups_event;
    }
  }
  report.errors = shared.errors;
  if (stats_after.release_failures > stats_before.release_failures) {
    report.errors["release_failed"] +=
        stats_after.release_failures - stats_before.release_failures;
  }
  if (kafka) {
    const notifier::NotifierStats kafka_after = kafka->stats();
    AddNotifierErrors(kafka_before, kafka_after, report.errors);
    report.events_published = kafka_after.published - kafka_before.published;
    report.events_consumed = kafka_after.consumed - kafka_before.consumed;
  }
  if (!WriteFileAtomically(ReportPath(args.run_dir, args.child_index),
                           ToJson(report).dump())) {
    PrintError("cannot write " + ReportPath(args.run_dir, args.child_index));
    return kExitSoftware;
  }

  subscription.reset();
  locks.reset();
  redis.reset();
  if (kafka && !ShutDownKafka(std::move(kafka), milliseconds(5000))) {
    // A consumer stuck inside librdkafka (broker gone): the report is
    // written, nothing else is left to do.
    std::cout << std::flush;
    ::_exit(kExitOk);
  }
  return kExitOk;
}

}  // namespace lockfleet::cli
