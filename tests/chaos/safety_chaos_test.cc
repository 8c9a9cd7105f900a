// Chaos scenario group 8: lock safety at the edges (issue 13, "Bad input and
// faults"; docs/RELIABILITY.md, section 8).
//
//   ForgedAndReplayedEventsNeverEndAHold  forged and replayed unlock events
//       of every cause, at a high rate, while nodes contend and do fenced
//       writes, and while two anchor holds sit on their locks: no hold ends
//       because of an event (only Redis ends a hold), exclusion and fencing
//       hold, and each force event costs at most one rate-limited check.
//   ForceUnlockDuringRedisStallKeepsTheNextHolder  ForceUnlock sent while
//       Redis is SIGSTOPped: its first try times out, its retry is sent, both
//       run when Redis resumes; the next holder keeps the grant the first
//       try handed it.
//   FailoverToALaggingReplicaKeepsFencing  the replica misses the master's
//       last grants and is promoted: tokens after the promotion exceed every
//       token before it, and a FencedResource kept in a separate durable
//       Redis refuses the stale holder (who still believes it holds).
//   TwoHundredThousandLockNamesKeepMemoryBounded  200,000 distinct lock
//       names: at most 16384 keys that never expire, memory back to the
//       baseline plus the slot counters once the reply latches expire.
//
// Real redis-server processes and the embedded Kafka broker throughout; no
// mock of Redis. Each test prints one "measured:" block.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <future>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "chaos/fault_harness.h"
#include "key_slot.h"  // lockcore/src: the fence counter keys (scenario 8d)
#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/fenced_resource.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/notifier/embedded_broker.h"
#include "lockfleet/notifier/kafka_notifier.h"
#include "scripts.h"  // lockcore/src: the real scripts, pipelined (8d)
#include "support/loopback_bus.h"
#include "support/redis_server.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Steady = std::chrono::steady_clock;

constexpr seconds kLong{60};  // patience for what takes a second or two

double Seconds(Steady::duration d) {
  return std::chrono::duration<double>(d).count();
}

void Quiet(notifier::LogLevel, std::string_view) {}

std::shared_ptr<RedisClient> Client(const std::string& url,
                                    milliseconds timeout = seconds(10),
                                    int pool = 2) {
  return std::make_shared<RedisClient>(
      RedisOptions{.url = url, .pool_size = pool, .command_timeout = timeout});
}

// "field:value" of INFO <section>; empty if absent.
std::string Info(RedisClient& redis, const std::string& section,
                 const std::string& field) {
  const std::string text = redis.Execute({"INFO", section}).str;
  const std::string key = field + ":";
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find("\r\n", at);
    if (end == std::string::npos) end = text.size();
    if (text.compare(at, key.size(), key) == 0) {
      return text.substr(at + key.size(), end - at - key.size());
    }
    at = end + 2;
  }
  return "";
}

long long InfoInt(RedisClient& redis, const std::string& section,
                  const std::string& field) {
  const std::string v = Info(redis, section, field);
  return v.empty() ? -1 : std::stoll(v);
}

// INFO keyspace, db0: {keys, expires}; {0, 0} when the database is empty.
std::pair<long long, long long> Keyspace(RedisClient& redis) {
  const std::string db = Info(redis, "keyspace", "db0");
  if (db.empty()) return {0, 0};
  auto number = [&](const std::string& name) {
    const size_t at = db.find(name + "=");
    return at == std::string::npos
               ? 0
               : std::stoll(db.substr(at + name.size() + 1));
  };
  return {number("keys"), number("expires")};
}

// Keys matching `pattern`, counted with SCAN.
long long CountKeys(RedisClient& redis, const std::string& pattern) {
  long long n = 0;
  std::string cursor = "0";
  do {
    const Reply r =
        redis.Execute({"SCAN", cursor, "MATCH", pattern, "COUNT", "10000"});
    if (r.type != Reply::Type::kArray || r.elements.size() != 2)
      throw std::runtime_error("SCAN: unexpected reply " + r.str);
    cursor = r.elements.at(0).str;
    n += static_cast<long long>(r.elements.at(1).elements.size());
  } while (cursor != "0");
  return n;
}

// MONITOR on a raw connection: every command Redis executes, as Redis logs
// it. Used to see that a command sent twice (a first try and its retry)
// really ran twice on the server.
class MonitorTap {
 public:
  explicit MonitorTap(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (fd_ < 0 ||
        ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
      throw std::runtime_error("MonitorTap: cannot connect");
    const std::string monitor = "MONITOR\r\n";
    if (::write(fd_, monitor.data(), monitor.size()) !=
        static_cast<ssize_t>(monitor.size()))
      throw std::runtime_error("MonitorTap: cannot send MONITOR");
    reader_ = std::thread([this] { Read(); });
  }
  ~MonitorTap() {
    ::shutdown(fd_, SHUT_RDWR);
    reader_.join();
    ::close(fd_);
  }
  MonitorTap(const MonitorTap&) = delete;
  MonitorTap& operator=(const MonitorTap&) = delete;

  // Redis confirmed MONITOR: everything executed from now on is seen.
  bool ready() const {
    std::lock_guard lock(mu_);
    return !lines_.empty() && lines_.front() == "+OK";
  }
  // Commands sent by clients (not the ones scripts ran) whose logged line
  // contains every string of `parts` (case-insensitively).
  int Count(const std::vector<std::string>& parts) const {
    std::lock_guard lock(mu_);
    int n = 0;
    for (const std::string& line : lines_) {
      const std::string lower = Lower(line);
      if (lower.find(" lua]") != std::string::npos) continue;
      bool all = true;
      for (const std::string& p : parts) {
        all = all && lower.find(Lower(p)) != std::string::npos;
      }
      n += all ? 1 : 0;
    }
    return n;
  }

 private:
  static std::string Lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(c));
    return s;
  }
  void Read() {
    std::string pending;
    char buf[8192];
    for (;;) {
      const ssize_t n = ::read(fd_, buf, sizeof(buf));
      if (n <= 0) return;
      pending.append(buf, static_cast<size_t>(n));
      size_t end;
      while ((end = pending.find("\r\n")) != std::string::npos) {
        std::lock_guard lock(mu_);
        lines_.push_back(pending.substr(0, end));
        pending.erase(0, end + 2);
      }
    }
  }

  int fd_ = -1;
  std::thread reader_;
  mutable std::mutex mu_;
  std::vector<std::string> lines_;  // guarded by mu_
};

// ---------------------------------------------------------------------------
// 8a. Forged and replayed unlock events while holders work.

// Real events seen on the topic (once each), to replay.
class EventLog {
 public:
  void Add(const UnlockEvent& e) {
    const std::string id = e.client_id + "|" + e.owner + "|" +
                           std::to_string(e.fence) + "|" +
                           UnlockCauseName(e.cause) + "|" + e.next_waiter;
    std::lock_guard lock(mu_);
    if (forged_.contains(id) || !seen_.insert(id).second) return;
    if (events_.size() < kKeep) {
      events_.push_back(e);
    } else {
      events_[next_++ % kKeep] = e;
    }
    ++real_;
    if (!e.next_waiter.empty()) ++handoffs_;
  }
  // Events the forger itself sends through Kafka come back on the topic:
  // they are not real.
  void MarkForged(const UnlockEvent& e) {
    const std::string id = e.client_id + "|" + e.owner + "|" +
                           std::to_string(e.fence) + "|" +
                           UnlockCauseName(e.cause) + "|" + e.next_waiter;
    std::lock_guard lock(mu_);
    forged_.insert(id);
  }
  bool Pick(std::mt19937_64& rng, UnlockEvent* out) const {
    std::lock_guard lock(mu_);
    if (events_.empty()) return false;
    *out = events_[rng() % events_.size()];
    return true;
  }
  uint64_t real() const {
    std::lock_guard lock(mu_);
    return real_;
  }
  uint64_t handoffs() const {
    std::lock_guard lock(mu_);
    return handoffs_;
  }

 private:
  static constexpr size_t kKeep = 512;
  mutable std::mutex mu_;
  std::set<std::string> seen_, forged_;
  std::vector<UnlockEvent> events_;
  size_t next_ = 0;
  uint64_t real_ = 0, handoffs_ = 0;
};

TEST(SafetyChaos, ForgedAndReplayedEventsNeverEndAHold) {
  constexpr int kNodes = 3;
  constexpr int kLocks = 3;
  constexpr seconds kInject{10};
  RedisServer redis({.tcp = true});
  notifier::EmbeddedBroker broker;
  // Long leases: no lease can run out legitimately during the test, so any
  // lost lease would be an event ending a hold. A generous command timeout:
  // no Redis fault here, so no write may end up uncertain on a slow
  // machine either.
  const NodeConfig config{.redis_url = redis.url(),
                          .bootstrap = broker.bootstrap(),
                          .lease = seconds(30),
                          .command_timeout = seconds(10)};
  EventLog captured;  // outlives the spy, whose hook writes to it
  auto spy = std::make_shared<notifier::KafkaNotifier>(notifier::KafkaOptions{
      .bootstrap = broker.bootstrap(), .client_id = "forger", .log = Quiet});
  spy->SetOnEventForTesting([&](const UnlockEvent& e) { captured.Add(e); });
  FaultNode anchor_node(config);
  ContendingNodes group(kNodes, config);
  ASSERT_TRUE(group.WaitUntilReady(kLong));
  ASSERT_TRUE(anchor_node.notifier()->WaitUntilReady(kLong));
  ASSERT_TRUE(spy->WaitUntilReady(kLong));

  // Two anchors held for the whole test: one renewed by the watchdog, one
  // with an explicit lease (a forced check must not extend or end it).
  LockClient& anchors = anchor_node.locks();
  AcquireResult anchor_w = anchors.TryAcquire("forge-anchor:w");
  AcquireOptions explicit_lease;
  explicit_lease.lease = seconds(120);
  AcquireResult anchor_x = anchors.TryAcquire("forge-anchor:x", explicit_lease);
  ASSERT_TRUE(anchor_w && anchor_x);

  Contention& contention = group.StartContention({.threads_per_node = 3,
                                                  .locks = kLocks,
                                                  .wait = seconds(30),
                                                  .prefix = "forge"});
  ASSERT_TRUE(
      WaitUntil([&] { return contention.acquisitions() >= 30; }, kLong));
  // Real hand-off events (naming next_waiter / next_owner / next_fence) to
  // replay.
  ASSERT_TRUE(WaitUntil([&] { return captured.handoffs() >= 10; }, kLong))
      << "no hand-off events seen on the topic";

  // A scout keeps the current holder and queue of each contended lock, so
  // forged events can name live grants and live waiters.
  auto admin_redis = Client(redis.url());
  LockClient scout_locks(admin_redis, {.client_id = "scout"});
  std::mutex snap_mu;
  std::vector<LockInfo> snapshot(kLocks);  // guarded by snap_mu
  std::jthread scout([&](std::stop_token stop) {
    while (!stop.stop_requested()) {
      for (int i = 0; i < kLocks; ++i) {
        try {
          LockInfo info = scout_locks.Inspect(contention.LockName(i));
          std::lock_guard lock(snap_mu);
          snapshot[i] = std::move(info);
        } catch (const Error&) {
        }
      }
      std::this_thread::sleep_for(milliseconds(3));
    }
  });

  std::vector<LockClient*> targets;
  for (FaultNode* node : group.nodes()) targets.push_back(&node->locks());
  targets.push_back(&anchors);
  std::vector<std::string> client_ids{"forger"};
  for (LockClient* c : targets) client_ids.push_back(c->client_id());

  enum Kind {
    kForceAnchor,        // force naming an anchor's live grant
    kForceAnchorNext,    // ... and a live waiter as next_*
    kForceHolder,        // force naming a contended lock's holder
    kForceHolderNext,    // ... with its queue head as next_*
    kReleaseHolder,      // release naming the holder, no next
    kReleaseHolderNext,  // ... handing to the queue head
    kReleaseAnchorNext,  // release of an anchor naming a waiter
    kReplay,             // a real event, as captured
    kReplayAsForce,      // a real event with its cause turned to force
    kGarbage,            // unknown owners, absurd fences, odd names
    kKinds
  };
  const char* kKindNames[kKinds] = {
      "force-anchor",        "force-anchor+next",
      "force-holder",        "force-holder+next",
      "release-holder",      "release-holder+next",
      "release-anchor+next", "replay",
      "replay-as-force",     "garbage"};
  uint64_t by_kind[kKinds] = {};
  uint64_t injected = 0, via_kafka = 0, force_events = 0,
           force_naming_anchor = 0, force_naming_holder = 0;
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);

  auto forge = [&](Kind kind, UnlockEvent* e) -> bool {
    const int lock_index = static_cast<int>(rng() % kLocks);
    LockInfo holder;
    {
      std::lock_guard lock(snap_mu);
      holder = snapshot[lock_index];
    }
    // Claim to come from any client, the targets' own ids included (a
    // client ignores events carrying its own id: DeliverUnlockEvent).
    e->client_id = client_ids[rng() % client_ids.size()];
    e->released_at_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    auto name_waiter = [&] {
      if (holder.queue.empty()) return;
      const QueuedWaiter& w = holder.queue[rng() % holder.queue.size()];
      e->next_waiter = w.waiter_id;
      e->next_owner = w.owner;
      e->next_fence = holder.last_fence + 1 + static_cast<int64_t>(rng() % 3);
    };
    const Lease& anchor = (rng() & 1) ? anchor_w.lease : anchor_x.lease;
    switch (kind) {
      case kForceAnchor:
      case kForceAnchorNext:
        e->cause = UnlockCause::kForce;
        e->lock = anchor.name();
        e->owner = anchor.owner();
        e->fence = anchor.fence();
        if (kind == kForceAnchorNext) name_waiter();
        return true;
      case kForceHolder:
      case kForceHolderNext:
      case kReleaseHolder:
      case kReleaseHolderNext:
        if (!holder.locked) return false;
        e->cause = kind <= kForceHolderNext ? UnlockCause::kForce
                                            : UnlockCause::kRelease;
        e->lock = contention.LockName(lock_index);
        e->owner = holder.owner;
        e->fence = holder.fence;
        if (kind == kForceHolderNext || kind == kReleaseHolderNext)
          name_waiter();
        return true;
      case kReleaseAnchorNext:
        e->cause = UnlockCause::kRelease;
        e->lock = anchor.name();
        e->owner = anchor.owner();
        e->fence = anchor.fence();
        name_waiter();
        return true;
      case kReplay:
      case kReplayAsForce:
        if (!captured.Pick(rng, e)) return false;
        if (kind == kReplayAsForce) e->cause = UnlockCause::kForce;
        return true;
      case kGarbage: {
        static const int64_t kFences[] = {
            0, -1, 1, INT64_MAX, INT64_MIN, FencedResource::kMaxFence + 1};
        static const char* kNames[] = {
            "",   "forge:0",  "forge:1",     "forge-anchor:w",
            "}{", "forge:\n", "no-such-lock"};
        e->lock = kNames[rng() % std::size(kNames)];
        e->owner = (rng() & 1) ? "" : "forger:" + std::to_string(rng() % 9);
        e->fence = kFences[rng() % std::size(kFences)];
        e->cause = (rng() & 1) ? UnlockCause::kForce : UnlockCause::kRelease;
        if (rng() & 1) {
          e->next_waiter = "w:forger:" + std::to_string(rng() % 99);
          e->next_owner = e->owner;
          e->next_fence = e->fence;
        }
        return true;
      }
      case kKinds:
        break;
    }
    return false;
  };

  const uint64_t acquisitions_before = contention.acquisitions();
  const Steady::time_point inject_start = Steady::now();
  uint64_t round = 0;
  while (Steady::now() - inject_start < kInject) {
    for (int i = 0; i < 64; ++i, ++round) {
      const Kind kind = static_cast<Kind>(round % kKinds);
      UnlockEvent e;
      if (!forge(kind, &e)) continue;
      ++by_kind[kind];
      ++injected;
      if (e.cause == UnlockCause::kForce) {
        ++force_events;
        const bool names_w = e.lock == anchor_w.lease.name() &&
                             e.owner == anchor_w.lease.owner() &&
                             e.fence == anchor_w.lease.fence();
        const bool names_x = e.lock == anchor_x.lease.name() &&
                             e.owner == anchor_x.lease.owner() &&
                             e.fence == anchor_x.lease.fence();
        if (names_w || names_x) {
          ++force_naming_anchor;
        } else if (kind == kForceHolder || kind == kForceHolderNext) {
          ++force_naming_holder;
        }
      }
      if (rng() % 16 == 0) {
        // End to end through the topic (encoded, consumed, delivered by each
        // node's notifier).
        captured.MarkForged(e);
        spy->Publish(e);
        ++via_kafka;
      } else {
        for (LockClient* c : targets) c->DeliverUnlockEvent(e);
      }
    }
    std::this_thread::sleep_for(milliseconds(1));
  }
  const double inject_s = Seconds(Steady::now() - inject_start);
  const uint64_t during = contention.acquisitions() - acquisitions_before;
  scout.request_stop();
  scout.join();
  // Let the last Kafka-borne forgeries arrive before the verdict.
  std::this_thread::sleep_for(milliseconds(500));
  contention.Stop();
  // Forced checks may happen from the first injection until now (events
  // still in flight through Kafka).
  const double checks_s = Seconds(Steady::now() - inject_start);

  // Exclusion and fencing, checked independently of the library.
  const SafetyReport report = contention.Check(*admin_redis);
  EXPECT_GT(report.intervals, 0u);
  EXPECT_EQ(report.overlaps, 0u) << report.detail;
  EXPECT_EQ(report.fence_regressions, 0u) << report.detail;
  EXPECT_EQ(report.rejected_writes, 0u) << "no holder may be stale here";
  EXPECT_EQ(report.uncertain_writes, 0u);
  EXPECT_EQ(report.counter_total, static_cast<int64_t>(report.accepted_writes));
  EXPECT_GE(during, 20u) << "contention starved by the forged events";

  // No hold ended: only Redis may end one, and Redis never said so.
  uint64_t lost = 0, contender_checks = 0, received = 0;
  for (FaultNode* node : group.nodes()) {
    const LockStats s = node->locks().stats();
    lost += s.leases_lost + node->observer().leases_lost();
    contender_checks += s.forced_checks;
    received += s.events_received;
  }
  const LockStats anchor_stats = anchors.stats();
  lost += anchor_stats.leases_lost + anchor_node.observer().leases_lost();
  EXPECT_EQ(lost, 0u) << "a forged or replayed event ended a hold";
  EXPECT_FALSE(anchor_w.lease.lost());
  EXPECT_FALSE(anchor_x.lease.lost());
  for (const Lease* anchor : {&anchor_w.lease, &anchor_x.lease}) {
    const LockInfo info = scout_locks.Inspect(anchor->name());
    EXPECT_EQ(info.owner, anchor->owner()) << anchor->name();
    EXPECT_EQ(info.fence, anchor->fence()) << anchor->name();
    EXPECT_GT(info.ttl, seconds(10)) << anchor->name();
    FencedResource resource(admin_redis, anchor->name());
    EXPECT_TRUE(
        resource.Write(*anchor, {{"INCR", resource.Key("count")}}).accepted)
        << anchor->name();
  }

  // Each force event naming a held grant costs at most one check, and at
  // most one per hold per 100 ms (kForcedCheckInterval): two anchor holds
  // over the injection, and for the contenders one per hold plus one per
  // 100 ms of held time (holds of one lock never overlap).
  const uint64_t anchor_bound = 2 * (static_cast<uint64_t>(checks_s * 10) + 1);
  EXPECT_GT(anchor_stats.forced_checks, 0u) << "no forged force event landed";
  EXPECT_LE(anchor_stats.forced_checks, anchor_bound);
  const uint64_t contender_bound = std::min<uint64_t>(
      force_events, contention.acquisitions() +
                        kLocks * (static_cast<uint64_t>(checks_s * 10) + 1));
  EXPECT_LE(contender_checks, contender_bound);

  std::string kinds;
  for (int k = 0; k < kKinds; ++k) {
    kinds += std::string(k ? " " : "") + kKindNames[k] + "=" +
             std::to_string(by_kind[k]);
  }
  std::printf(
      "measured: forged/replayed unlock events (seed %llu)\n"
      "  injected %llu events in %.1f s (%.0f/s; %llu through Kafka), "
      "%llu real events captured (%llu hand-offs) for replay\n"
      "  by kind: %s\n"
      "  force events %llu: %llu naming an anchor's live grant -> %llu "
      "checks (bound %llu); %llu naming a contended holder -> %llu checks "
      "(bound %llu)\n"
      "  contention: %llu acquisitions (%llu during injection), %llu "
      "timeouts, events received %llu, leases lost %llu\n"
      "  %s\n",
      static_cast<unsigned long long>(seed),
      static_cast<unsigned long long>(injected), inject_s, injected / inject_s,
      static_cast<unsigned long long>(via_kafka),
      static_cast<unsigned long long>(captured.real()),
      static_cast<unsigned long long>(captured.handoffs()), kinds.c_str(),
      static_cast<unsigned long long>(force_events),
      static_cast<unsigned long long>(force_naming_anchor),
      static_cast<unsigned long long>(anchor_stats.forced_checks),
      static_cast<unsigned long long>(anchor_bound),
      static_cast<unsigned long long>(force_naming_holder),
      static_cast<unsigned long long>(contender_checks),
      static_cast<unsigned long long>(contender_bound),
      static_cast<unsigned long long>(contention.acquisitions()),
      static_cast<unsigned long long>(during),
      static_cast<unsigned long long>(contention.timeouts()),
      static_cast<unsigned long long>(received),
      static_cast<unsigned long long>(lost), FormatSafety(report).c_str());
  std::fflush(stdout);
  anchor_w.lease.Release();
  anchor_x.lease.Release();
}

// ---------------------------------------------------------------------------
// 8b. A Redis stall during force-unlock.

// A LoopbackBus that also keeps every event published.
class RecordingBus final : public UnlockPublisher {
 public:
  void Publish(const UnlockEvent& event) noexcept override {
    recorder.Publish(event);
    bus.Publish(event);
  }
  std::vector<UnlockEvent> Events(UnlockCause cause) {
    std::lock_guard lock(recorder.mu);
    std::vector<UnlockEvent> out;
    for (const UnlockEvent& e : recorder.events) {
      if (e.cause == cause) out.push_back(e);
    }
    return out;
  }

  LoopbackBus bus;
  RecordingPublisher recorder;
};

// Subscribes clients to a LoopbackBus for as long as it lives.
class BusSubscriptions {
 public:
  explicit BusSubscriptions(LoopbackBus& bus) : bus_(bus) {}
  ~BusSubscriptions() {
    for (LockClient* c : clients_) bus_.Unsubscribe(c);
  }
  void Add(LockClient* c) {
    bus_.Subscribe(c);
    clients_.push_back(c);
  }

 private:
  LoopbackBus& bus_;
  std::vector<LockClient*> clients_;
};

TEST(SafetyChaos, ForceUnlockDuringRedisStallKeepsTheNextHolder) {
  constexpr milliseconds kAdminTimeout{1000};
  // Longer than the admin's command timeout, so its first try times out and
  // its retry is sent while Redis is still stopped; shorter than 2 x the
  // timeout, so the retry's reply (the first try's, latched) arrives.
  constexpr milliseconds kStall{1600};
  const std::string kLock = "stall";
  RedisServer redis({.tcp = true});
  auto bus = std::make_shared<RecordingBus>();
  auto make = [&](const std::string& id, milliseconds timeout,
                  std::shared_ptr<CountingObserver> observer) {
    LockClientOptions o;
    o.client_id = id;
    o.default_lease = seconds(6);  // renewed every 2 s: a stall of 1.6 s
                                   // does not let it run out
    o.presence_window = seconds(6);
    o.claim_window = seconds(4);
    o.publisher = bus;
    o.observer = std::move(observer);
    return std::make_unique<LockClient>(Client(redis.url(), timeout, 2),
                                        std::move(o));
  };
  auto obs_a = std::make_shared<CountingObserver>();
  auto obs_b = std::make_shared<CountingObserver>();
  auto obs_c = std::make_shared<CountingObserver>();
  auto a = make("holder-a", seconds(3), obs_a);
  auto b = make("waiter-b", seconds(3), obs_b);
  auto c = make("waiter-c", seconds(3), obs_c);
  auto admin = make("admin", kAdminTimeout, nullptr);
  BusSubscriptions subscriptions(bus->bus);
  for (LockClient* client : {a.get(), b.get(), c.get(), admin.get()})
    subscriptions.Add(client);

  AcquireResult held_a = a->TryAcquire(kLock);
  ASSERT_TRUE(held_a);
  std::stop_source stop_waiters;
  AcquireOptions wait_options;
  wait_options.stop = stop_waiters.get_token();
  auto queued = [&](size_t n) {
    return WaitUntil([&] { return admin->Inspect(kLock).queue.size() >= n; },
                     kLong);
  };
  std::future<AcquireResult> wait_b, wait_c;
  // However the test ends, the waiters stop before their futures are
  // waited for.
  struct StopOnExit {
    std::stop_source& source;
    ~StopOnExit() { source.request_stop(); }
  } stop_on_exit{stop_waiters};
  wait_b = std::async(std::launch::async, [&] {
    return b->AcquireFor(kLock, seconds(90), wait_options);
  });
  ASSERT_TRUE(queued(1));
  wait_c = std::async(std::launch::async, [&] {
    return c->AcquireFor(kLock, seconds(90), wait_options);
  });
  ASSERT_TRUE(queued(2));
  // The admin's script is known to Redis and to the client (EVALSHA from
  // the first try on), and its connection is open.
  EXPECT_FALSE(admin->ForceUnlock("stall-warmup").was_locked);
  MonitorTap tap(redis.port());
  ASSERT_TRUE(WaitUntil([&] { return tap.ready(); }, kLong));

  redis.Pause();
  const Steady::time_point paused = Steady::now();
  struct Outcome {
    std::optional<ForceUnlockResult> result;
    std::string error;
    double seconds = 0;  // from the call to its return
  };
  std::promise<Steady::time_point> sent;
  auto force = std::async(std::launch::async, [&] {
    Outcome out;
    const Steady::time_point call = Steady::now();
    sent.set_value(call);
    try {
      out.result = admin->ForceUnlock(kLock);
    } catch (const Error& e) {
      out.error = ErrorCodeName(e.code());
    }
    out.seconds = Seconds(Steady::now() - call);
    return out;
  });
  // Counted from the call, so that a slow thread start cannot shorten the
  // stall the first try sees.
  std::this_thread::sleep_until(sent.get_future().get() + kStall);
  redis.Resume();
  const double stalled = Seconds(Steady::now() - paused);
  ASSERT_EQ(force.wait_for(kLong), std::future_status::ready);
  const Outcome outcome = force.get();
  ASSERT_EQ(wait_b.wait_for(kLong), std::future_status::ready);
  AcquireResult held_b = wait_b.get();
  ASSERT_TRUE(held_b) << AcquireStatusName(held_b.status);

  // Both tries of the force-unlock ran on Redis (same request id).
  const std::vector<std::string> try_line{"evalsha",
                                          "{" + kLock + "}:latch:f:"};
  EXPECT_TRUE(WaitUntil([&] { return tap.Count(try_line) >= 2; }, kLong));
  const int tries = tap.Count(try_line);
  EXPECT_EQ(tries, 2) << "the scenario needs a first try and a retry";

  // The admin got the first try's reply (the retry returned it from the
  // latch) or an error: never a second removal, which would name B.
  if (outcome.result) {
    EXPECT_TRUE(outcome.result->was_locked);
    EXPECT_FALSE(outcome.result->mismatch);
    EXPECT_EQ(outcome.result->previous_owner, held_a.lease.owner());
    EXPECT_EQ(outcome.result->previous_fence, held_a.lease.fence());
  } else {
    EXPECT_TRUE(outcome.error == "redis_timeout" ||
                outcome.error == "redis_unavailable")
        << outcome.error;
  }
  // B holds the grant the first try handed it; C is still queued.
  const int64_t fence_a = held_a.lease.fence();
  const int64_t fence_b = held_b.lease.fence();
  EXPECT_GT(fence_b, fence_a);
  const std::vector<UnlockEvent> forced = bus->Events(UnlockCause::kForce);
  if (outcome.result) {
    // The admin announced the hand-off its first try made: to B.
    ASSERT_EQ(forced.size(), 1u);
    EXPECT_EQ(forced[0].owner, held_a.lease.owner());
    EXPECT_EQ(forced[0].fence, fence_a);
    EXPECT_EQ(forced[0].next_owner, held_b.lease.owner());
    EXPECT_EQ(forced[0].next_fence, fence_b);
  } else {
    EXPECT_TRUE(forced.empty());
  }
  const uint64_t renewals = b->stats().renewals;
  EXPECT_TRUE(
      WaitUntil([&] { return b->stats().renewals >= renewals + 2; }, kLong))
      << "B's lease was not renewed";
  const LockInfo after = admin->Inspect(kLock);
  EXPECT_EQ(after.owner, held_b.lease.owner());
  EXPECT_EQ(after.fence, held_b.lease.fence());
  EXPECT_TRUE(after.pending_waiter.empty());
  ASSERT_EQ(after.queue.size(), 1u);
  EXPECT_EQ(after.queue[0].owner.rfind("waiter-c:", 0), 0u)
      << after.queue[0].owner;
  EXPECT_FALSE(held_b.lease.lost());
  EXPECT_EQ(obs_b->leases_lost(), 0u);
  EXPECT_EQ(wait_c.wait_for(milliseconds(0)), std::future_status::timeout);
  // A's grant was removed: Redis tells A so (at its next check).
  EXPECT_TRUE(WaitUntil([&] { return held_a.lease.lost(); }, kLong));
  EXPECT_EQ(obs_a->leases_lost(), 1u);

  // B's release hands the lock to C.
  EXPECT_EQ(held_b.lease.Release(), ReleaseStatus::kReleased);
  ASSERT_EQ(wait_c.wait_for(kLong), std::future_status::ready);
  AcquireResult held_c = wait_c.get();
  ASSERT_TRUE(held_c);
  const int64_t fence_c = held_c.lease.fence();
  EXPECT_GT(fence_c, fence_b);
  EXPECT_EQ(held_c.lease.Release(), ReleaseStatus::kReleased);

  std::printf(
      "measured: force-unlock during a Redis stall\n"
      "  Redis stopped %.2f s; admin command timeout %lld ms; force-unlock "
      "scripts run by Redis: %d (first try + retry); admin %s after %.2f s\n"
      "  A fence %lld (removed, A told lost: %s); B granted fence %lld by "
      "the first try and still holding after 2 renewals; C queued, then "
      "granted fence %lld on B's release\n",
      stalled, static_cast<long long>(kAdminTimeout.count()), tries,
      outcome.result ? ("got the first reply (previous owner " +
                        outcome.result->previous_owner + ")")
                           .c_str()
                     : ("got " + outcome.error).c_str(),
      outcome.seconds, static_cast<long long>(fence_a),
      held_a.lease.lost() ? "yes" : "no", static_cast<long long>(fence_b),
      static_cast<long long>(fence_c));
  std::fflush(stdout);
  stop_waiters.request_stop();
}

// ---------------------------------------------------------------------------
// 8c. A failover to a lagging replica.

TEST(SafetyChaos, FailoverToALaggingReplicaKeepsFencing) {
  RedisServer master({.tcp = true});
  RedisServer replica({.tcp = true});
  RedisServer store({.durable = true});  // where the resources keep tokens
  auto master_admin = Client(master.url());
  auto replica_admin = Client(replica.url());
  master_admin->Execute({"CONFIG", "SET", "repl-diskless-sync-delay", "0"});
  replica_admin->Execute({"CONFIG", "SET", "replica-serve-stale-data", "yes"});
  replica_admin->Execute(
      {"REPLICAOF", "127.0.0.1", std::to_string(master.port())});
  ASSERT_TRUE(WaitUntil(
      [&] {
        return Info(*replica_admin, "replication", "master_link_status") ==
               "up";
      },
      kLong))
      << "the replica did not sync";

  const std::vector<std::string> kNames{"fo:a", "fo:b", "fo:c"};
  auto store_redis = Client(store.url());
  std::vector<std::unique_ptr<FencedResource>> resources;
  for (const std::string& name : kNames) {
    resources.push_back(std::make_unique<FencedResource>(store_redis, name));
  }
  auto incr = [&](size_t i) {
    return std::vector<Command>{{"INCR", resources[i]->Key("count")}};
  };
  // The "old" side: a process that talks to the master, and keeps doing so
  // after the failover (a partition: nobody told it).
  LockClient old_side(Client(master.url()),
                      {.default_lease = seconds(30), .client_id = "old"});
  std::vector<int64_t> before;  // every token issued before the promotion
  auto cycle = [&](size_t i, bool write) {
    AcquireResult r = old_side.TryAcquire(kNames[i]);
    ASSERT_TRUE(r);
    before.push_back(r.lease.fence());
    if (write) {
      EXPECT_TRUE(resources[i]->Write(r.lease, incr(i)).accepted);
    }
    EXPECT_EQ(r.lease.Release(), ReleaseStatus::kReleased);
  };
  // Replicated grants.
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < kNames.size(); ++i) cycle(i, true);
  }
  ASSERT_TRUE(WaitUntil(
      [&] {
        return InfoInt(*master_admin, "replication", "master_repl_offset") ==
               InfoInt(*replica_admin, "replication", "slave_repl_offset");
      },
      kLong))
      << "the replica did not catch up";
  const int64_t replica_saw = *std::max_element(before.begin(), before.end());
  const size_t replicated = before.size();

  // The replication link stops (the replica follows an address where
  // nothing listens, keeping its data and serving it stale): everything the
  // master does from now on is what a lagging replica had not received
  // when the master was lost.
  replica_admin->Execute({"REPLICAOF", "127.0.0.1", "1"});
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < kNames.size(); ++i) cycle(i, false);
  }
  // The stale holder: granted by the master, never replicated.
  std::vector<AcquireResult> stale;
  for (const std::string& name : kNames) {
    stale.push_back(old_side.TryAcquire(name));
    ASSERT_TRUE(stale.back());
    before.push_back(stale.back().lease.fence());
  }
  const int64_t highest_before =
      *std::max_element(before.begin(), before.end());

  // Failover: promote the replica; new clients point at it.
  replica_admin->Execute({"REPLICAOF", "NO", "ONE"});
  ASSERT_TRUE(WaitUntil(
      [&] { return Info(*replica_admin, "replication", "role") == "master"; },
      kLong));
  LockClient new_side(Client(replica.url()),
                      {.default_lease = seconds(30), .client_id = "new"});
  std::vector<int64_t> rolled_back;  // the promoted server's last token
  std::vector<AcquireResult> fresh;
  for (size_t i = 0; i < kNames.size(); ++i) {
    const LockInfo seen = new_side.Inspect(kNames[i]);
    EXPECT_FALSE(seen.locked) << "the replica was not lagging";
    rolled_back.push_back(seen.last_fence);
    EXPECT_LT(seen.last_fence, stale[i].lease.fence())
        << "the replica's counter was not behind";
    fresh.push_back(new_side.TryAcquire(kNames[i]));
    ASSERT_TRUE(fresh.back()) << "the lock should be free on the new master";
    // The promise: tokens after the promotion exceed every earlier one.
    EXPECT_GT(fresh.back().lease.fence(), highest_before) << kNames[i];
  }
  // Two holders at once (the old master still says "ours" to the old
  // side): what fencing is for.
  for (size_t i = 0; i < kNames.size(); ++i) {
    EXPECT_FALSE(stale[i].lease.lost());
    EXPECT_FALSE(fresh[i].lease.lost());
  }

  // fo:a: the new holder writes first; the stale holder's delayed write is
  // refused, the new holder's next write accepted.
  const FenceResult a_new = resources[0]->Write(fresh[0].lease, incr(0));
  const FenceResult a_stale = resources[0]->Write(stale[0].lease, incr(0));
  const FenceResult a_new2 = resources[0]->Write(fresh[0].lease, incr(0));
  EXPECT_TRUE(a_new.accepted);
  EXPECT_FALSE(a_stale.accepted);
  EXPECT_EQ(a_stale.highest_fence, fresh[0].lease.fence());
  EXPECT_TRUE(a_new2.accepted);
  // fo:b: the new holder claims the resource before any write of its own;
  // the stale holder's delayed write is refused from that moment.
  const FenceResult b_claim = resources[1]->Claim(fresh[1].lease);
  const FenceResult b_stale = resources[1]->Write(stale[1].lease, incr(1));
  const FenceResult b_new = resources[1]->Write(fresh[1].lease, incr(1));
  EXPECT_TRUE(b_claim.accepted);
  EXPECT_FALSE(b_stale.accepted);
  EXPECT_TRUE(b_new.accepted);
  // fo:c: no claim. The stale holder's write that lands before the new
  // holder's first one is accepted (its token is the highest the resource
  // has seen): the window Claim closes. Afterwards it is refused.
  const FenceResult c_stale = resources[2]->Write(stale[2].lease, incr(2));
  const FenceResult c_new = resources[2]->Write(fresh[2].lease, incr(2));
  const FenceResult c_stale2 = resources[2]->Write(stale[2].lease, incr(2));
  EXPECT_TRUE(c_stale.accepted) << "the documented window";
  EXPECT_TRUE(c_new.accepted);
  EXPECT_FALSE(c_stale2.accepted);
  // The counters hold exactly the accepted writes.
  const long long expected[] = {3 + 2, 3 + 1, 3 + 2};
  for (size_t i = 0; i < kNames.size(); ++i) {
    EXPECT_EQ(
        std::stoll(
            store_redis->Execute({"GET", resources[i]->Key("count")}).str),
        expected[i])
        << kNames[i];
  }

  std::string tokens;
  for (size_t i = 0; i < kNames.size(); ++i) {
    tokens += "  " + kNames[i] + ": replica's last token " +
              std::to_string(rolled_back[i]) + ", stale holder " +
              std::to_string(stale[i].lease.fence()) + ", after promotion " +
              std::to_string(fresh[i].lease.fence()) + " (+" +
              std::to_string(fresh[i].lease.fence() - stale[i].lease.fence()) +
              " us)\n";
  }
  std::printf(
      "measured: failover to a lagging replica\n"
      "  %zu tokens issued before the promotion (%zu of them never "
      "replicated), highest %lld; replica had seen up to %lld\n%s"
      "  resource (durable Redis): fo:a new holder first: stale write %s "
      "(highest %lld); fo:b Claim first: stale write %s before the new "
      "holder wrote; fo:c no Claim: stale write before the new holder's "
      "first %s, after it %s\n",
      before.size(), before.size() - replicated,
      static_cast<long long>(highest_before),
      static_cast<long long>(replica_saw), tokens.c_str(),
      a_stale.accepted ? "ACCEPTED" : "refused",
      static_cast<long long>(a_stale.highest_fence),
      b_stale.accepted ? "ACCEPTED" : "refused",
      c_stale.accepted ? "accepted (the window)" : "refused",
      c_stale2.accepted ? "ACCEPTED" : "refused");
  std::fflush(stdout);
  for (AcquireResult& r : stale) r.lease.Release();
  for (AcquireResult& r : fresh) r.lease.Release();
}

// ---------------------------------------------------------------------------
// 8d. 200,000 distinct lock names.

TEST(SafetyChaos, TwoHundredThousandLockNamesKeepMemoryBounded) {
  constexpr int kNames = 200000;
  constexpr int kThroughClient = 10000;  // the rest: the scripts, pipelined
  constexpr int kBatch = 1000;
  const std::string kPrefix = "mass";
  RedisServer redis;
  auto rc = Client(redis.url(), seconds(30), 2);
  LockClientOptions options;
  options.key_prefix = kPrefix;
  options.client_id = "mass";
  options.retry_latch = seconds(1);
  LockClient locks(rc, options);
  // Warm up (scripts loaded), then start from an empty keyspace.
  {
    AcquireResult r = locks.TryAcquire("warm-up");
    ASSERT_TRUE(r);
    r.lease.Release();
  }
  rc->Execute({"FLUSHALL", "SYNC"});
  const long long baseline = InfoInt(*rc, "memory", "used_memory");
  const Steady::time_point start = Steady::now();

  auto name_of = [](int i) { return "order:" + std::to_string(i); };
  // Through LockClient, as an application would.
  for (int i = 0; i < kThroughClient; ++i) {
    AcquireResult r = locks.TryAcquire(name_of(i));
    ASSERT_TRUE(r) << name_of(i);
    ASSERT_EQ(r.lease.Release(), ReleaseStatus::kReleased);
  }
  const double client_s = Seconds(Steady::now() - start);
  // The rest: the same scripts with the keys and arguments LockClient sends
  // (lock_client.cc: Keys, KeysWithLatch, TryOnce, ReleaseImpl; the release
  // names no fence: whichever grant carries the hold), acquire and release
  // of each name in one pipeline.
  const std::string lease_ms = "30000", presence_ms = "3000", claim_ms = "2000",
                    latch_ms = "1000";
  uint64_t refused = 0;
  for (int first = kThroughClient; first < kNames; first += kBatch) {
    std::vector<RedisClient::EvalCall> calls;
    for (int i = first; i < std::min(kNames, first + kBatch); ++i) {
      const std::string name = name_of(i);
      const std::string tag = kPrefix + ":{" + name + "}:";
      const std::string lock = tag + "lock";
      std::vector<std::string> keys{lock,
                                    internal::FenceCounterKey(kPrefix, lock),
                                    tag + "queue", tag + "waiters"};
      const std::string owner = "mass:1";
      const std::string hold = "mass:h" + std::to_string(i);
      calls.push_back({&internal::AcquireFairScript(),
                       keys,
                       {owner, lease_ms, hold, "w:" + hold, presence_ms, "0"}});
      keys.push_back(tag + "latch:" + hold);
      calls.push_back({&internal::ReleaseScript(),
                       keys,
                       {owner, "", hold, claim_ms, latch_ms}});
    }
    const std::vector<Reply> replies = rc->EvalPipeline(calls);
    for (size_t k = 0; k < replies.size(); k += 2) {
      const bool granted = replies[k].type == Reply::Type::kArray &&
                           !replies[k].elements.empty() &&
                           replies[k].elements[0].integer == 1;
      const bool released = replies[k + 1].type == Reply::Type::kArray &&
                            !replies[k + 1].elements.empty() &&
                            replies[k + 1].elements[0].integer == 1;
      if (!granted || !released) ++refused;
    }
  }
  const double run_s = Seconds(Steady::now() - start);
  EXPECT_EQ(refused, 0u);
  const std::string evalsha = Info(*rc, "commandstats", "cmdstat_evalsha");

  const auto [keys_at_end, expiring_at_end] = Keyspace(*rc);
  const long long memory_at_end = InfoInt(*rc, "memory", "used_memory");
  // Keys that never expire: the fence counters, one per hash slot at most.
  EXPECT_LE(keys_at_end - expiring_at_end, internal::kSlots);
  // The reply latches (1 s) expire.
  const Steady::time_point wait_from = Steady::now();
  EXPECT_TRUE(WaitUntil([&] { return Keyspace(*rc).second == 0; }, kLong))
      << Keyspace(*rc).second << " keys still expiring";
  const double expiry_s = Seconds(Steady::now() - wait_from);
  const auto [keys_left, expiring_left] = Keyspace(*rc);
  const long long counters = CountKeys(*rc, kPrefix + ":fence:*");
  EXPECT_LE(counters, internal::kSlots);
  EXPECT_EQ(keys_left, counters) << "keys other than fence counters remain";
  EXPECT_EQ(expiring_left, 0);
  // Memory: Redis shrinks its key tables in its cron; give it a few
  // seconds to settle, then compare with the empty baseline.
  long long memory = InfoInt(*rc, "memory", "used_memory");
  constexpr long long kBound = 4LL << 20;
  WaitUntil(
      [&] {
        memory = InfoInt(*rc, "memory", "used_memory");
        return memory - baseline < kBound / 2;
      },
      seconds(10));
  EXPECT_LT(memory - baseline, kBound);

  std::printf(
      "measured: %d distinct lock names (%d through LockClient in %.1f s, "
      "the rest pipelined) in %.1f s\n"
      "  at the end: %lld keys, %lld of them expiring (reply latches); "
      "used_memory %+.2f MB over the empty baseline\n"
      "  %.1f s later (latches expired): %lld keys, all fence counters "
      "(limit %d); used_memory %+.2f MB over the baseline (%.0f bytes per "
      "counter)\n"
      "  Redis: evalsha %s\n",
      kNames, kThroughClient, client_s, run_s, keys_at_end, expiring_at_end,
      (memory_at_end - baseline) / 1048576.0, expiry_s, keys_left,
      static_cast<int>(internal::kSlots), (memory - baseline) / 1048576.0,
      counters ? static_cast<double>(memory - baseline) / counters : 0.0,
      evalsha.c_str());
  std::fflush(stdout);
}

}  // namespace
}  // namespace lockfleet::testing
