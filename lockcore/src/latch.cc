// Countdown latches: LockCore's part (the scripts are in scripts.cc, the
// contracts in latch.h).
#include "lockfleet/lockcore/latch.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>

#include "lock_core.h"
#include "lockfleet/lockcore/error.h"
#include "scripts.h"

namespace lockfleet {
namespace internal {
namespace {

// Listening on a latch name for the length of one Await.
class Listening {
 public:
  Listening(LatchBoard& board, const std::string& name)
      : board_(board), name_(name), seen_(board.Listen(name)) {}
  ~Listening() { board_.Unlisten(name_); }
  Listening(const Listening&) = delete;
  Listening& operator=(const Listening&) = delete;

  WakeCause Park(Clock::Duration wait, const std::stop_token& stop) {
    return board_.Park(name_, &seen_, wait, stop);
  }

 private:
  LatchBoard& board_;
  const std::string& name_;
  uint64_t seen_;
};

}  // namespace

// A change of the latch the replicas did not acknowledge (min_replicas):
// an error, so that the caller tries again (a count-down with the same id
// counts once) rather than trust a change a failover may roll back.
void ThrowIfShortfall(const std::string& shortfall, const char* what) {
  if (!shortfall.empty()) {
    throw Error(
        ErrorCode::kRedisReplicas,
        std::string(what) + " not acknowledged by the replicas: " + shortfall);
  }
}

bool LockCore::LatchTrySet(const std::string& name, int64_t count,
                           const LatchOptions& options) {
  if (count < 1 || count > kMaxLatchCount) {
    throw Error(ErrorCode::kInvalidArgument,
                "latch count must be 1.." + std::to_string(kMaxLatchCount) +
                    ", not " + std::to_string(count));
  }
  if (options.open_ttl < kMinLatchOpenTtl ||
      options.open_ttl > kMaxLatchOpenTtl) {
    throw Error(ErrorCode::kInvalidArgument,
                "latch open_ttl must be 1 minute..30 days, not " +
                    std::to_string(options.open_ttl.count()) + " ms");
  }
  std::string shortfall;
  const Reply r =
      EvalRetryOnce(LatchSetScript(), {LatchKey(name)},
                    {std::to_string(count),
                     std::to_string(options.open_ttl.count()), NextRequestId()},
                    Clock::TimePoint::max(), nullptr, &shortfall);
  const bool set = IntElement(r, 0, "latch set") == 1;
  if (set) ThrowIfShortfall(shortfall, "latch set");
  return set;
}

CountDownResult LockCore::LatchCountDown(const std::string& name,
                                         std::string_view id) {
  // The caller names each count-down: after an error it may have counted,
  // and only a repeat with the same id is sure to count once (a generated
  // id would be lost with the error, and the repeat would count twice).
  if (id.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                "count-down id must not be empty (name the piece of work it "
                "reports, e.g. \"shard-3\": a repeat with the same id "
                "counts once)");
  }
  if (id.size() > kMaxCountDownIdBytes) {
    throw Error(ErrorCode::kInvalidArgument,
                "count-down id is " + std::to_string(id.size()) +
                    " bytes; the limit is " +
                    std::to_string(kMaxCountDownIdBytes));
  }
  const std::string down_id(id);
  std::string shortfall;
  const Reply r =
      EvalRetryOnce(LatchCountDownScript(), {LatchKey(name)}, {down_id},
                    Clock::TimePoint::max(), nullptr, &shortfall);
  CountDownResult result;
  result.remaining = IntElement(r, 1, "latch count-down");
  switch (IntElement(r, 0, "latch count-down")) {
    case 1:
      result.status = CountDownStatus::kOpened;
      break;
    case 2:
      result.status = CountDownStatus::kCounted;
      break;
    case 3:
      result.status = CountDownStatus::kAlreadyOpen;
      break;
    default:
      result.status = CountDownStatus::kNoLatch;
      break;
  }
  if (observer()) observer()->OnLatchCountDown(name, result.status);
  if (result.status != CountDownStatus::kOpened) {
    if (result.status == CountDownStatus::kCounted)
      ThrowIfShortfall(shortfall, "latch count-down");
    return result;
  }
  latches_opened_.fetch_add(1, std::memory_order_relaxed);
  // Opened (or a retry of the count-down that opened it): wake this
  // process's awaiters, tell the others — also when the replicas did not
  // acknowledge it: a wake-up is only a hint (each awaiter asks Redis),
  // and without it they would sleep out their parks.
  latches_.WakeAll(name, WakeCause::kLocal);
  UnlockEvent event;
  event.lock = name;
  event.owner = down_id;
  event.cause = UnlockCause::kOpened;
  Publish(event);
  ThrowIfShortfall(shortfall, "latch count-down");
  return result;
}

int64_t LockCore::LatchCount(const std::string& name) {
  const Reply r = redis_->Execute({"HGET", LatchKey(name), "count"});
  if (r.is_error()) {
    throw Error(ErrorReplyCode(r.str, ErrorCode::kRedisProtocol),
                "latch count: " + r.str);
  }
  if (r.is_nil()) return -1;
  try {
    return std::stoll(r.str);
  } catch (const std::exception&) {
    throw Error(ErrorCode::kRedisProtocol,
                "latch count is not a number: '" + r.str + "'");
  }
}

AwaitStatus LockCore::LatchAwait(const std::string& name,
                                 Clock::TimePoint deadline,
                                 const std::stop_token& stop) {
  const Clock::TimePoint start = options_.clock->Now();
  const AwaitStatus status = LatchAwaitLoop(name, deadline, stop);
  if (observer()) {
    observer()->OnLatchAwait(name, status, options_.clock->Now() - start);
  }
  return status;
}

AwaitStatus LockCore::LatchAwaitLoop(const std::string& name,
                                     Clock::TimePoint deadline,
                                     const std::stop_token& stop) {
  struct Waiting {
    std::atomic<int64_t>& n;
    explicit Waiting(std::atomic<int64_t>& count) : n(count) { ++n; }
    ~Waiting() { --n; }
  } waiting(latch_waiting_);
  // Listen first: an opening between the count read and the park wakes the
  // park at once.
  Watching watching(this, name);
  Listening listening(latches_, name);
  bool in_outage = false;
  Clock::TimePoint outage_since;
  Clock::Duration backoff{0};
  for (;;) {
    bool failed = false;
    try {
      const int64_t count = LatchCount(name);
      if (!reached_.load(std::memory_order_relaxed))
        reached_.store(true, std::memory_order_relaxed);
      if (count == 0) return AwaitStatus::kOpened;
      in_outage = false;
    } catch (const Error& e) {
      // A Redis outage is ridden out as a lock wait does (once this client
      // has reached Redis): backing off, for at most outage_grace per
      // outage.
      if (!IsOutage(e.code()) || !reached_.load(std::memory_order_relaxed))
        throw;
      const Clock::TimePoint now = options_.clock->Now();
      if (!in_outage) {
        in_outage = true;
        outage_since = now;
        backoff = Clock::Duration::zero();
      }
      if (now >= deadline) return AwaitStatus::kTimedOut;
      if (now - outage_since >= options_.outage_grace) throw;
      outage_waits_.fetch_add(1, std::memory_order_relaxed);
      failed = true;
    }
    if (stop.stop_requested()) return AwaitStatus::kCancelled;
    const Clock::TimePoint now = options_.clock->Now();
    if (now >= deadline) return AwaitStatus::kTimedOut;
    // Bounded: a lost event costs at most park_cap, then Redis is asked.
    Clock::Duration wait =
        std::min<Clock::Duration>(deadline - now, options_.park_cap);
    if (failed) {
      backoff = std::clamp<Clock::Duration>(
          backoff * 2, std::chrono::milliseconds(50), std::chrono::seconds(1));
      wait = std::min(wait, backoff);
    } else {
      latch_parks_.fetch_add(1, std::memory_order_relaxed);
    }
    watching.Begin();
    if (listening.Park(wait, stop) == WakeCause::kCancelled)
      return AwaitStatus::kCancelled;
  }
}

}  // namespace internal

CountDownLatch::CountDownLatch(std::shared_ptr<internal::LockCore> core,
                               std::string name)
    : core_(std::move(core)), name_(std::move(name)) {}

bool CountDownLatch::TrySetCount(int64_t count, const LatchOptions& options) {
  return core_->LatchTrySet(name_, count, options);
}

CountDownResult CountDownLatch::CountDown(std::string_view id) {
  return core_->LatchCountDown(name_, id);
}

int64_t CountDownLatch::Count() { return core_->LatchCount(name_); }

AwaitStatus CountDownLatch::AwaitFor(Clock::Duration timeout,
                                     const std::stop_token& stop) {
  return AwaitUntil(
      internal::DeadlineAfter(core_->options().clock->Now(), timeout), stop);
}

AwaitStatus CountDownLatch::AwaitUntil(Clock::TimePoint deadline,
                                       const std::stop_token& stop) {
  return core_->LatchAwait(name_, deadline, stop);
}

const char* CountDownStatusName(CountDownStatus status) noexcept {
  switch (status) {
    case CountDownStatus::kCounted:
      return "counted";
    case CountDownStatus::kOpened:
      return "opened";
    case CountDownStatus::kAlreadyOpen:
      return "already_open";
    case CountDownStatus::kNoLatch:
      return "no_latch";
  }
  return "no_latch";
}

const char* AwaitStatusName(AwaitStatus status) noexcept {
  switch (status) {
    case AwaitStatus::kOpened:
      return "opened";
    case AwaitStatus::kTimedOut:
      return "timed_out";
    case AwaitStatus::kCancelled:
      return "cancelled";
  }
  return "timed_out";
}

}  // namespace lockfleet
