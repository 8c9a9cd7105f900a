#include "chaos/fault_harness.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/multi_lock.h"
#include "lockfleet/lockcore/rwlock.h"
#include "lockfleet/lockcore/semaphore.h"

namespace lockfleet::testing {
namespace {

void Quiet(notifier::LogLevel, std::string_view) {}

}  // namespace

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

long RssKib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return 0;
}

void CountingObserver::OnWakeup(std::string_view, WakeCause cause) noexcept {
  switch (cause) {
    case WakeCause::kLocal:
      wake_local_.fetch_add(1);
      break;
    case WakeCause::kEvent:
      wake_event_.fetch_add(1);
      break;
    case WakeCause::kBound:
      wake_bound_.fetch_add(1);
      break;
    case WakeCause::kSpin:
      wake_spin_.fetch_add(1);
      break;
  }
}

void CountingObserver::OnRwLost(std::string_view, RwMode) noexcept {
  leases_lost_.fetch_add(1);
}

void CountingObserver::OnPermitsLost(std::string_view) noexcept {
  leases_lost_.fetch_add(1);
}

void CountingObserver::OnLeaseLost(std::string_view) noexcept {
  leases_lost_.fetch_add(1);
}

void CountingObserver::OnError(ErrorCode code) noexcept {
  std::lock_guard lock(mu_);
  ++errors_[std::string(ErrorCodeName(code))];
}

uint64_t CountingObserver::wakeups(WakeCause cause) const {
  switch (cause) {
    case WakeCause::kLocal:
      return wake_local_.load();
    case WakeCause::kEvent:
      return wake_event_.load();
    case WakeCause::kBound:
      return wake_bound_.load();
    case WakeCause::kSpin:
      return wake_spin_.load();
  }
  return 0;
}

std::map<std::string, uint64_t> CountingObserver::errors() const {
  std::lock_guard lock(mu_);
  return errors_;
}

FaultNode::FaultNode(const NodeConfig& config)
    : observer_(std::make_shared<CountingObserver>()) {
  redis_ = std::make_shared<RedisClient>(RedisOptions{
      .url = config.redis_url, .command_timeout = config.command_timeout});
  LockClientOptions options;
  options.default_lease = config.lease;
  options.spin_max_hold = config.spin_max_hold;
  options.observer = observer_;
  if (!config.bootstrap.empty()) {
    notifier_ =
        std::make_shared<notifier::KafkaNotifier>(notifier::KafkaOptions{
            .bootstrap = config.bootstrap,
            .message_timeout = config.kafka_message_timeout,
            .queue_max_messages = config.kafka_queue_max_messages,
            .log = Quiet});
    options.publisher = notifier_;
  }
  locks_ = std::make_unique<LockClient>(redis_, std::move(options));
  if (notifier_) notifier_->Subscribe(locks_.get());
}

FaultNode::~FaultNode() {
  if (notifier_) notifier_->Unsubscribe(locks_.get());
  locks_.reset();
  notifier_.reset();
}

Contention::Contention(std::vector<FaultNode*> nodes, Options options)
    : nodes_(std::move(nodes)),
      options_(std::move(options)),
      per_node_(std::make_unique<std::atomic<uint64_t>[]>(nodes_.size())) {
  for (FaultNode* node : nodes_) {
    auto& row = resources_.emplace_back();
    for (int lock = 0; lock < options_.locks; ++lock) {
      row.push_back(
          std::make_unique<FencedResource>(node->redis(), LockName(lock)));
    }
  }
}

Contention::~Contention() { Stop(); }

std::string Contention::LockName(int lock) const {
  return options_.prefix + ":" + std::to_string(lock);
}

void Contention::Start() {
  if (options_.primitive == Primitive::kSemaphore) {
    for (int lock = 0; lock < options_.locks; ++lock) {
      nodes_[0]->locks().Semaphore(LockName(lock)).SetPermits(options_.permits);
    }
  }
  for (int node = 0; node < static_cast<int>(nodes_.size()); ++node) {
    for (int thread = 0; thread < options_.threads_per_node; ++thread) {
      threads_.emplace_back([this, node, thread, stop = stop_.get_token()] {
        Loop(node, thread, stop);
      });
    }
  }
}

void Contention::Stop() {
  stop_.request_stop();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

void Contention::CountError(ErrorCode code) {
  std::lock_guard lock(mu_);
  ++errors_[std::string(ErrorCodeName(code))];
}

std::map<std::string, uint64_t> Contention::errors() const {
  std::lock_guard lock(mu_);
  return errors_;
}

uint64_t Contention::error_count() const {
  uint64_t n = 0;
  for (const auto& [code, count] : errors()) n += count;
  return n;
}

int64_t Contention::Capacity() const {
  switch (options_.primitive) {
    case Primitive::kLock:
      return 1;
    case Primitive::kReadWrite:
      return kWriteWeight;
    case Primitive::kSemaphore:
      return options_.permits;
    case Primitive::kMultiLock:
      return 1;
  }
  return 1;
}

void Contention::FencedWrite(int node, int lock, int64_t fence, bool lost_now) {
  FencedResource& resource = *resources_[node][lock];
  try {
    const FenceResult write =
        resource.Write(fence, {{"INCR", resource.Key("count")}});
    if (write.accepted) {
      accepted_.fetch_add(1);
    } else {
      rejected_.fetch_add(1);
      if (!lost_now) rejected_current_.fetch_add(1);
    }
  } catch (const Error& e) {
    uncertain_.fetch_add(1);  // it may or may not have been applied
    CountError(e.code());
  }
}

bool Contention::HoldOnce(int node, int lock, bool write, std::stop_token stop,
                          HoldInterval& interval) {
  LockClient& locks = nodes_[node]->locks();
  const std::string name = LockName(lock);
  // Records the interval around the hold of `lease` (Lease, RwLease or
  // Permits), writing with `fence` if it is not 0.
  auto hold = [&](auto& lease, int64_t fence) {
    interval.fence = fence;
    interval.acquired_ns = SteadyNs();
    if (fence != 0) FencedWrite(node, lock, fence, lease.lost());
    std::this_thread::sleep_for(options_.hold);
    interval.lost = lease.lost();
    interval.released_ns = SteadyNs();
    try {
      lease.Release();
    } catch (const Error& e) {
      release_failures_.fetch_add(1);
      CountError(e.code());
    }
  };
  auto granted = [&](const auto& result) {
    if (result) return true;
    if (result.status == AcquireStatus::kTimedOut) timeouts_.fetch_add(1);
    return false;
  };
  switch (options_.primitive) {
    case Primitive::kLock: {
      AcquireResult r =
          locks.AcquireFor(name, options_.wait, AcquireOptions{.stop = stop});
      if (!granted(r)) return false;
      hold(r.lease, r.lease.fence());
      return true;
    }
    case Primitive::kReadWrite: {
      const RwMode mode = write ? RwMode::kWrite : RwMode::kRead;
      RwResult r = locks.ReadWriteLock(name).AcquireFor(mode, options_.wait,
                                                        {.stop = stop});
      if (!granted(r)) return false;
      interval.weight = write ? kWriteWeight : 1;
      // A read's token is the last writer's: only writes write.
      hold(r.lease, write ? r.lease.token() : 0);
      return true;
    }
    case Primitive::kSemaphore: {
      PermitResult r =
          locks.Semaphore(name).AcquireFor(1, options_.wait, {.stop = stop});
      if (!granted(r)) return false;
      hold(r.permits, 0);
      return true;
    }
    case Primitive::kMultiLock: {
      const int second = (lock + 1) % options_.locks;
      const std::string other = LockName(second);
      AcquireAllResult r =
          locks.AcquireAllFor({name, other}, options_.wait, {.stop = stop});
      if (!granted(r)) return false;
      interval.second_lock = second;
      interval.second_fence = r.lease.lease(other).fence();
      FencedWrite(node, second, interval.second_fence, r.lease.lost());
      hold(r.lease, r.lease.lease(name).fence());
      return true;
    }
  }
  return false;
}

void Contention::Loop(int node, int thread, std::stop_token stop) {
  uint64_t round = 0;
  while (!stop.stop_requested()) {
    const int lock = static_cast<int>((round + thread + node) %
                                      static_cast<uint64_t>(options_.locks));
    // Independent of the lock's parity, so every node writes every lock.
    const bool write = (round / static_cast<uint64_t>(options_.locks) +
                        static_cast<uint64_t>(thread)) %
                           4 ==
                       0;
    ++round;
    HoldInterval interval{.lock = lock, .node = node, .thread = thread};
    try {
      if (!HoldOnce(node, lock, write, stop, interval)) continue;
    } catch (const Error& e) {
      CountError(e.code());
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    {
      std::lock_guard guard(mu_);
      intervals_.push_back(interval);
      if (interval.second_lock >= 0) {  // a multi-lock's second lock
        HoldInterval second = interval;
        second.lock = interval.second_lock;
        second.fence = interval.second_fence;
        intervals_.push_back(second);
      }
    }
    acquisitions_.fetch_add(1);
    per_node_[node].fetch_add(1);
    last_acquired_ns_.store(interval.acquired_ns);
  }
}

SafetyReport Contention::Check(RedisClient& redis) const {
  SafetyReport report;
  std::vector<HoldInterval> intervals;
  {
    std::lock_guard lock(mu_);
    intervals = intervals_;
  }
  report.intervals = intervals.size();
  std::ostringstream detail;
  int details = 0;
  auto note = [&](const std::string& what, const HoldInterval& a,
                  const HoldInterval& b) {
    if (details++ >= 5) return;
    detail << what << ": lock " << a.lock << " node " << a.node << "/"
           << a.thread << " fence " << a.fence << " [" << a.acquired_ns << ", "
           << a.released_ns << "] lost=" << a.lost << " vs node " << b.node
           << "/" << b.thread << " fence " << b.fence << " [" << b.acquired_ns
           << ", " << b.released_ns << "] lost=" << b.lost << "\n";
  };
  std::sort(intervals.begin(), intervals.end(),
            [](const HoldInterval& a, const HoldInterval& b) {
              return a.lock != b.lock ? a.lock < b.lock
                                      : a.acquired_ns < b.acquired_ns;
            });
  // Sorted by start: at each start, the holds of its lock still running
  // (started earlier, not yet released) plus its own must fit the
  // capacity. `running` holds them, pruned as they end.
  const int64_t capacity = Capacity();
  std::vector<size_t> running;
  int64_t weight = 0;
  const HoldInterval* prev_fenced = nullptr;  // the last lock or write
  for (size_t i = 0; i < intervals.size(); ++i) {
    const HoldInterval& cur = intervals[i];
    if (i == 0 || intervals[i - 1].lock != cur.lock) {
      running.clear();
      weight = 0;
      prev_fenced = nullptr;
    }
    std::erase_if(running, [&](size_t j) {
      if (intervals[j].released_ns > cur.acquired_ns) return false;
      weight -= intervals[j].weight;
      return true;
    });
    if (weight + cur.weight > capacity) {
      ++report.overlaps;
      note("overlap", running.empty() ? cur : intervals[running.front()], cur);
    }
    running.push_back(i);
    weight += cur.weight;
    report.max_concurrent =
        std::max<uint64_t>(report.max_concurrent, running.size());
    if (cur.fence == 0) continue;  // no token: a read, a permit
    if (prev_fenced != nullptr) {
      const HoldInterval& prev = *prev_fenced;
      if (cur.fence == prev.fence && cur.node == prev.node &&
          cur.thread == prev.thread) {
        // The same owner was granted the same grant again: its release had
        // failed (Redis down), the lock was still its own, and the acquire
        // script re-entered it. One grant, one holder: not a regression.
        ++report.regrants;
      } else if (cur.fence <= prev.fence) {
        ++report.fence_regressions;
        note("fence not increasing", prev, cur);
      }
    }
    prev_fenced = &cur;
  }
  report.accepted_writes = accepted_.load();
  report.rejected_writes = rejected_.load();
  report.rejected_current = rejected_current_.load();
  report.uncertain_writes = uncertain_.load();
  for (int lock = 0; lock < options_.locks; ++lock) {
    const Reply value = redis.Execute(
        {"GET", FencedResource::KeyOf("lockfleet", LockName(lock), "count")});
    if (!value.is_nil()) report.counter_total += std::stoll(value.str);
  }
  report.counter_consistent =
      report.counter_total >= static_cast<int64_t>(report.accepted_writes) &&
      report.counter_total <= static_cast<int64_t>(report.accepted_writes +
                                                   report.uncertain_writes);
  report.detail = detail.str();
  return report;
}

uint64_t SharedHoldsExpected(const Contention::Options& options) {
  switch (options.primitive) {
    case Primitive::kLock:
      return 1;
    case Primitive::kReadWrite:
      return 2;
    case Primitive::kSemaphore:
      return static_cast<uint64_t>(options.permits);
    case Primitive::kMultiLock:
      return 1;
  }
  return 1;
}

ContendingNodes::ContendingNodes(int count, const NodeConfig& config) {
  for (int i = 0; i < count; ++i) {
    owned_.push_back(std::make_unique<FaultNode>(config));
    nodes_.push_back(owned_.back().get());
  }
}

bool ContendingNodes::WaitUntilReady(std::chrono::milliseconds timeout) {
  for (FaultNode* node : nodes_) {
    if (node->notifier() && !node->notifier()->WaitUntilReady(timeout)) {
      return false;
    }
  }
  return true;
}

Contention& ContendingNodes::StartContention(Contention::Options options) {
  contention_ = std::make_unique<Contention>(nodes_, std::move(options));
  contention_->Start();
  return *contention_;
}

uint64_t EventWakeups(const std::vector<FaultNode*>& nodes) {
  uint64_t n = 0;
  for (FaultNode* node : nodes) n += node->locks().stats().wakeups_event;
  return n;
}

uint64_t BoundWakeups(const std::vector<FaultNode*>& nodes) {
  uint64_t n = 0;
  for (FaultNode* node : nodes) n += node->locks().stats().wakeups_bound;
  return n;
}

std::string Format(const std::map<std::string, uint64_t>& counts) {
  if (counts.empty()) return "none";
  std::string out;
  for (const auto& [name, count] : counts) {
    out += (out.empty() ? "" : " ") + name + "=" + std::to_string(count);
  }
  return out;
}

std::string FormatSafety(const SafetyReport& r) {
  return "safety: " + std::to_string(r.intervals) + " intervals (at most " +
         std::to_string(r.max_concurrent) + " of one name at once), overlaps " +
         std::to_string(r.overlaps) + ", fence regressions " +
         std::to_string(r.fence_regressions) + ", re-grants " +
         std::to_string(r.regrants) + ", rejected writes " +
         std::to_string(r.rejected_writes) + " (from a valid lease " +
         std::to_string(r.rejected_current) + "), counter " +
         std::to_string(r.counter_total) + " vs accepted " +
         std::to_string(r.accepted_writes) + " + uncertain " +
         std::to_string(r.uncertain_writes);
}

}  // namespace lockfleet::testing
