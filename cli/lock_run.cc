#include "lock_run.h"

#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "child_process.h"
#include "kafka_wakeups.h"
#include "kill_escalation.h"
#include "lock_acquire.h"
#include "lock_held.h"
#include "lock_process_group.h"
#include "lockfleet/config/duration.h"
#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/multi_lock.h"
#include "lockfleet/lockcore/redis_client.h"
#include "lockfleet/lockcore/rwlock.h"
#include "lockfleet/notifier/kafka_notifier.h"
#include "lockfleet/worker/runner.h"

namespace lockfleet::cli {
namespace {

using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;

// How long lockfleet waits for the Kafka client to shut down (it flushes the
// unlock event for up to 1 s) before exiting anyway.
constexpr milliseconds kKafkaShutdown{3000};

// How often lockfleet looks for processes COMMAND left in its group.
constexpr milliseconds kLeftoverPoll{20};

std::string SignalName(int signal) {
  switch (signal) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "signal " + std::to_string(signal);
  }
}

// One run of `lockfleet lock`: acquire, run COMMAND, release. The signal
// watcher thread and the lease watchdog thread talk to the main thread
// through the members guarded by mu_.
class LockRun {
 public:
  LockRun(const LockRequest& request, const Context& context)
      : request_(request), context_(context), escalation_(request.kill_after) {}

  int Run();

 private:
  enum class Next { kSpawn, kInterrupted, kLost };

  // Builds the LockClient and holds the lock; destroys the client before it
  // returns, so `kafka` is then used by nothing else.
  int RunClient(const std::shared_ptr<RedisClient>& redis,
                const std::shared_ptr<notifier::KafkaNotifier>& kafka);
  int Hold(LockClient& client, notifier::KafkaNotifier* kafka);
  // After a wait that did not end in a grant (`status`): says why, with the
  // lock it was blocked on and its holder, and returns the exit status.
  int NotAcquired(AcquireStatus status, const std::string& blocked_on,
                  const std::string& holder,
                  std::chrono::milliseconds holder_ttl);
  // The semaphore form (`lockfleet semaphore`): takes the permits and runs
  // COMMAND under them.
  int HoldPermits(LockClient& client, notifier::KafkaNotifier* kafka,
                  Steady::time_point start,
                  std::optional<Steady::time_point> deadline);
  // The read-write form (`lockfleet lock --read|--write`): takes the
  // read-write lock in request_.rw_mode (under the thread's own owner
  // token) and runs COMMAND.
  int HoldRw(LockClient& client, notifier::KafkaNotifier* kafka,
             Steady::time_point start,
             std::optional<Steady::time_point> deadline);
  // "lock 'X'", "locks 'A', 'B'", "read-write lock 'X' (read)" or
  // "semaphore 'S'": what is waited for.
  std::string Noun() const;
  // Runs COMMAND under `held` (every lock of request_.names, or the
  // semaphore's permits), then releases.
  int RunCommand(Holding held, Steady::time_point wait_start);
  // Waits for COMMAND (the leader of group `pid`) to exit, without reaping
  // it; with a terminal (tty >= 0) follows Ctrl-Z.
  void WaitForCommand(pid_t pid, int tty);
  // After COMMAND exited: stops what it left in its group (unless the group
  // was already told to stop) and waits until the group is empty. Returns
  // how many processes it found left behind and sent SIGTERM.
  size_t TerminateLeftovers(pid_t pgid);
  // SIGTERM (and SIGCONT) to COMMAND's group; starts the escalation.
  // REQUIRES: mu_ held, group_ > 0.
  void StopGroupLocked();
  int ReportRedisError(const Error& error, const RedisClient& redis) const;

  // On the signal watcher thread.
  void OnSignal(int signal);
  // On the lease watchdog thread.
  void OnLost(const std::string& name, int64_t fence);
  // Marks the grant (name, fence) lost, if COMMAND runs under it; returns
  // whether it does. REQUIRES: mu_ held.
  bool MarkLostLocked(const std::string& name, int64_t fence);

  const LockRequest& request_;
  const Context& context_;
  std::vector<int> inherited_fds_;  // open before any Redis connection
  std::stop_source stop_;           // cancels the acquisition
  KillEscalation escalation_;       // SIGKILL after --kill-after

  std::mutex mu_;
  // COMMAND's process group (= its pid); guarded by mu_; > 0 from the spawn
  // until the group is empty (COMMAND is reaped only after).
  pid_t group_ = 0;
  int signal_ = 0;  // guarded by mu_; first signal received, or 0
  // The grants COMMAND runs under, in `held` order (sorted by name); guarded
  // by mu_; set once acquired. A grant not among them that is lost is one
  // a multi-lock gave back while it waited (it takes the lock again).
  std::vector<LockGrant> grants_;
  bool lost_ = false;        // guarded by mu_; one of grants_ was lost
  bool terminated_ = false;  // guarded by mu_; OnLost sent the group SIGTERM
  int stop_signal_ = 0;      // guarded by mu_; first SIGINT/SIGTERM forwarded
};

int LockRun::Run() {
  inherited_fds_ = OpenFileDescriptors();
  ScopedSignalHandler on_signal(context_.signals,
                                [this](int signal) { OnSignal(signal); });

  std::shared_ptr<RedisClient> redis;
  try {
    redis = std::make_shared<RedisClient>(request_.redis);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kInvalidArgument) throw;
    PrintError(request_.redis_source + ": " + e.what());
    return kExitUsage;
  }

  // Kafka only speeds up waiting; never fail the lock over it.
  bool bad_kafka = false;
  std::shared_ptr<notifier::KafkaNotifier> kafka =
      StartOptionalKafka(request_.kafka, request_.kafka_source,
                         "continuing without unlock events", &bad_kafka);
  if (bad_kafka) return kExitUsage;

  // A consumer thread stuck inside librdkafka (a broker that died
  // mid-request) ends the process without it: the lock is released and
  // COMMAND reaped, so nothing is left to clean up but that thread.
  const int status = RunClient(redis, kafka);
  return FinishWithKafka(std::move(kafka), status, kKafkaShutdown);
}

int LockRun::RunClient(const std::shared_ptr<RedisClient>& redis,
                       const std::shared_ptr<notifier::KafkaNotifier>& kafka) {
  LockClientOptions options = request_.locks;
  options.publisher = kafka;
  // "host:pid:" in front of the random client id. Its owner token is its
  // thread's default ("<client id>:<thread number>"): unique, it tells an
  // operator reading "held by ..." where the holder runs, and, being the
  // thread's own, a fair wait under it is handed the lock in full (no
  // claim, docs/lockcore.md "Hand-off in full").
  if (options.client_id.empty())
    options.client_id_prefix = worker::DefaultWorkerId() + ":";
  std::unique_ptr<LockClient> client;
  try {
    client = std::make_unique<LockClient>(redis, options);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kInvalidArgument) throw;
    PrintError("invalid --lease " +
               config::FormatDuration(options.default_lease) + ": " + e.what());
    return kExitUsage;
  }
  // Unsubscribes before `client` is destroyed.
  ScopedSubscription subscription(kafka.get(), client.get());

  try {
    return Hold(*client, kafka.get());
  } catch (const Error& e) {
    return ReportRedisError(e, *redis);
  }
}

int LockRun::Hold(LockClient& client, notifier::KafkaNotifier* kafka) {
  AcquireOptions options;  // under this thread's own owner token
  options.stop = stop_.get_token();
  options.on_lost = [this](const std::string& name, int64_t fence) {
    OnLost(name, fence);
  };

  const Steady::time_point start = Steady::now();
  std::optional<Steady::time_point> deadline;
  if (request_.wait) deadline = start + *request_.wait;
  if (request_.semaphore) return HoldPermits(client, kafka, start, deadline);
  if (request_.rw_mode) {
    return HoldRw(client, kafka, start, deadline);
  }
  if (request_.names.size() == 1) {
    AcquireResult result =
        AcquireLock(client, request_, options, kafka, deadline);
    if (result) {
      return RunCommand(Holding(OneLease(std::move(result.lease))), start);
    }
    return NotAcquired(result.status, request_.names[0], result.holder,
                       result.holder_ttl);
  }
  AcquireAllResult result =
      AcquireAllLocks(client, request_, options, kafka, deadline);
  if (result) return RunCommand(Holding(std::move(result.lease)), start);
  return NotAcquired(result.status, result.blocked_on, result.holder,
                     result.holder_ttl);
}

int LockRun::HoldPermits(LockClient& client, notifier::KafkaNotifier* kafka,
                         Steady::time_point start,
                         std::optional<Steady::time_point> deadline) {
  const std::string& name = request_.names.front();
  const SemaphoreRequest& wanted = *request_.semaphore;
  // --permits: the number the caller says the semaphore has (idempotent,
  // as every process of a fleet may say it). Without it, it must exist.
  if (wanted.permits) client.Semaphore(name).SetPermits(*wanted.permits);
  PermitOptions options;
  options.stop = stop_.get_token();
  options.on_lost = [this](const std::string& lost, int64_t count) {
    OnLost(lost, count);
  };
  PermitResult result =
      AcquirePermits(client, request_, options, kafka, deadline);
  if (result) return RunCommand(Holding(std::move(result.permits)), start);
  if (result.status == AcquireStatus::kCancelled) {
    return NotAcquired(result.status, name, "", milliseconds(0));
  }
  const std::string what = PermitsNoun(wanted.take, name);
  // After a Redis outage that outlasted the wait, its error says more than
  // the free count of the last answer.
  PrintError((*request_.wait == milliseconds(0)
                  ? what + " not free (--wait 0)"
                  : "timed out after " +
                        config::FormatDuration(*request_.wait) +
                        " waiting for " + what) +
             (result.last_error.empty()
                  ? ": " + std::to_string(result.available) + " free"
                  : " (Redis: " + result.last_error + ")"));
  return kExitTimedOut;
}

int LockRun::HoldRw(LockClient& client, notifier::KafkaNotifier* kafka,
                    Steady::time_point start,
                    std::optional<Steady::time_point> deadline) {
  const std::string& name = request_.names.front();
  RwOptions options;
  options.stop = stop_.get_token();
  options.on_lost = [this](const std::string& lost, int64_t token) {
    OnLost(lost, token);
  };
  RwResult result = AcquireRwLock(client, request_, options, kafka, deadline);
  if (result) return RunCommand(Holding(std::move(result.lease)), start);
  if (result.status == AcquireStatus::kCancelled) {
    return NotAcquired(result.status, name, "", milliseconds(0));
  }
  // Who holds it now (one snapshot; best effort: it only explains).
  std::string holders;
  try {
    holders = DescribeRwHolders(client.ReadWriteLock(name).Inspect());
  } catch (const Error&) {
  }
  const std::string what = Noun();
  std::string message = *request_.wait == milliseconds(0)
                            ? what + " is busy (--wait 0)"
                            : "timed out after " +
                                  config::FormatDuration(*request_.wait) +
                                  " waiting for " + what;
  if (!holders.empty()) {
    message += ": held by " + holders;
  } else if (!result.last_error.empty()) {
    // After a Redis outage that outlasted the wait, its error says more.
    message += " (Redis: " + result.last_error + ")";
  } else {
    message += ": it was freed just as the wait ended";
  }
  PrintError(message);
  return kExitTimedOut;
}

std::string LockRun::Noun() const {
  if (request_.rw_mode)
    return RwNoun(request_.names.front(), *request_.rw_mode);
  return request_.semaphore ? "semaphore " + Quoted(request_.names.front())
                            : LocksNoun(request_.names);
}

int LockRun::NotAcquired(AcquireStatus status, const std::string& blocked_on,
                         const std::string& holder,
                         std::chrono::milliseconds holder_ttl) {
  if (status == AcquireStatus::kCancelled) {
    int signal = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      signal = signal_;
    }
    PrintError("interrupted by " + SignalName(signal) + " while waiting for " +
               Noun());
    return signal != 0 ? kExitSignalBase + signal : kExitSoftware;
  }
  // "lock 'B'", or with several names "lock 'B' of 'A', 'B'" (the others
  // are not held either: all-or-nothing).
  std::string lock = "lock " + Quoted(blocked_on);
  if (request_.names.size() > 1) lock += " of " + QuotedList(request_.names);
  std::string message = *request_.wait == milliseconds(0)
                            ? lock + " is busy (--wait 0)"
                            : "timed out after " +
                                  config::FormatDuration(*request_.wait) +
                                  " waiting for " + lock;
  if (holder.empty()) {
    message += ": it was freed just as the wait ended";
  } else {
    message += ": held by " + Quoted(holder) + " (remaining TTL " +
               config::FormatDuration(holder_ttl) + ")";
  }
  PrintError(message);
  return kExitTimedOut;
}

int LockRun::RunCommand(Holding held, Steady::time_point wait_start) {
  std::string acquired;  // with -v: "locks 'A' (fence 6), 'B' (fence 7)"
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A grant lost before now may have missed OnLost (grants_ was empty);
    // its stop token was requested before its callback ran, and is read
    // under mu_, so none is missed. Not lost(): that is also true for a
    // while when a renewal is merely late (a loaded machine, a short
    // --lease), which the watchdog may still put right; the end of the run
    // checks it, as for one lock.
    grants_ = held.Grants();
    for (const LockGrant& grant : grants_) lost_ = lost_ || grant.lost;
    if (request_.verbose) acquired = DescribeGrants(grants_, true);
  }
  if (request_.verbose) {
    PrintError("acquired " + acquired + " after " +
               config::FormatDuration(std::chrono::duration_cast<milliseconds>(
                   Steady::now() - wait_start)));
  }
  const std::vector<std::string> env =
      EnvironmentWith(held.Variables(request_.names), IsLockVariable);
  // Descriptors opened since startup (Redis connections, Kafka's sockets and
  // pipes) are ours, not COMMAND's; whatever lockfleet inherited is passed
  // on, as flock(1) does.
  const ChildDescriptors close_fds = DescriptorsToCloseExcept(inherited_fds_);
  std::optional<DeathGuard> guard;
  try {
    guard.emplace();
  } catch (const std::runtime_error& e) {
    held.ReleaseOrWarn();
    PrintError(std::string("cannot start COMMAND: ") + e.what());
    return kExitCannotExecute;
  }
  const int tty = ForegroundTerminal();

  // Spawning under mu_ makes "a signal arrived before COMMAND existed" and
  // "COMMAND exists and gets the signal" the only two cases.
  Next next = Next::kSpawn;
  int signal = 0;
  std::vector<LockGrant> lost_before;  // kLost: the grants lost
  SpawnResult spawned;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (signal_ != 0) {
      next = Next::kInterrupted;
      signal = signal_;
    } else if (lost_) {
      next = Next::kLost;
      for (const LockGrant& grant : grants_) {
        if (grant.lost) lost_before.push_back(grant);
      }
    } else {
      spawned = SpawnInNewGroup(
          request_.command, env, close_fds, context_.signals_at_default,
          GroupSpawn{.report_fd = guard->report_fd(), .terminal_fd = tty});
      if (spawned.ok()) {
        group_ = spawned.pid;
        escalation_.Track(spawned.pid);
      }
    }
  }
  if (next == Next::kInterrupted) {
    held.ReleaseOrWarn();
    PrintError("interrupted by " + SignalName(signal) +
               " before COMMAND started; " + Noun() + " released");
    return kExitSignalBase + signal;
  }
  if (next == Next::kLost) {
    held.ReleaseOrWarn();
    PrintError("lost " + DescribeLost(lost_before, request_.names, false) +
               " before COMMAND started");
    return kExitLockLost;
  }
  if (!spawned.ok()) {
    held.ReleaseOrWarn();
    PrintError(SpawnFailureMessage(request_.command[0], spawned));
    return SpawnFailureStatus(spawned);
  }

  WaitForCommand(spawned.pid, tty);
  // COMMAND has exited and stays unreaped (a zombie) until its group is
  // empty, so the group id cannot be reused while it may be signalled.
  const size_t left_behind = TerminateLeftovers(spawned.pid);
  bool terminated = false;
  int stop_signal = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    group_ = 0;
    terminated = terminated_;
    stop_signal = stop_signal_;
  }
  escalation_.Untrack();
  guard->Stand();
  const bool killed = escalation_.killed();
  const std::string killed_count =
      CountProcesses(escalation_.killed_processes());
  const int status = Reap(spawned.pid);

  // Only now, with no process of COMMAND's group left, may the locks go.
  // A lock is lost if its lease says so or if its release found it gone.
  std::vector<LockGrant> lost_grants;
  {
    std::vector<std::pair<std::string, int64_t>> gone = held.LostNow();
    for (auto& released : held.ReleaseOrWarn()) {
      gone.push_back(std::move(released));
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [name, fence] : gone) MarkLostLocked(name, fence);
    for (const LockGrant& grant : grants_) {
      if (grant.lost) lost_grants.push_back(grant);
    }
  }
  const std::string grace = config::FormatDuration(request_.kill_after);
  std::string done;
  if (terminated) {
    done = "; sent SIGTERM to COMMAND's process group";
    if (killed) done += ", then SIGKILL to " + killed_count + " after " + grace;
  } else if (left_behind > 0) {
    done = "; COMMAND exited but left " + CountProcesses(left_behind) +
           " in its process group: sent them SIGTERM";
    if (killed) done += ", then SIGKILL to " + killed_count + " after " + grace;
  } else if (killed) {
    done = "; COMMAND's process group still ran " + grace + " after " +
           SignalName(stop_signal) + ": sent SIGKILL to " + killed_count;
  }
  if (!lost_grants.empty()) {
    PrintError("lost " + DescribeLost(lost_grants, request_.names, true) +
               " while COMMAND ran: " +
               (request_.semaphore
                    ? "their lease expired or they were released by id"
                : request_.rw_mode ? "its lease expired"
                : lost_grants.size() == 1
                    ? "its lease expired or it was force-unlocked"
                    : "their leases expired or they were force-unlocked") +
               done);
    return kExitLockLost;
  }
  if (!done.empty()) PrintError(done.substr(2));
  return status;
}

void LockRun::WaitForCommand(pid_t pid, int tty) {
  if (tty < 0) {
    WaitForExit(pid);
    return;
  }
  // COMMAND's group has the terminal. Ctrl-Z stops that group only: stop
  // lockfleet too, so that the shell sees its job stopped and takes the
  // terminal back; when the shell continues us, hand it on again.
  while (!WaitForExitOrStop(pid)) {
    TakeTerminalBack(tty, pid);
    ::kill(::getpid(), SIGSTOP);
    GiveTerminalTo(tty, pid);
    ::kill(-pid, SIGCONT);
  }
  TakeTerminalBack(tty, pid);
}

size_t LockRun::TerminateLeftovers(pid_t pgid) {
  std::vector<pid_t> alive = LiveProcessesInGroup(pgid);
  if (alive.empty()) return 0;
  size_t left_behind = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // After a lost lock or a forwarded stop signal the group was already
    // told to stop, and the escalation runs.
    if (!terminated_ && stop_signal_ == 0) {
      left_behind = alive.size();
      StopGroupLocked();
    }
  }
  // Bounded by --kill-after (then SIGKILL); with --kill-after 0, by the
  // processes themselves: the lock is held (and renewed) until they exit.
  while (!LiveProcessesInGroup(pgid).empty()) {
    std::this_thread::sleep_for(kLeftoverPoll);
  }
  return left_behind;
}

void LockRun::StopGroupLocked() {
  ::kill(-group_, SIGTERM);
  ::kill(-group_, SIGCONT);  // a stopped process acts on SIGTERM only then
  escalation_.Arm();
}

int LockRun::ReportRedisError(const Error& error,
                              const RedisClient& redis) const {
  switch (error.code()) {
    case ErrorCode::kInvalidArgument:
      PrintError(error.what());
      return kExitUsage;
    case ErrorCode::kRedisUnavailable:
    case ErrorCode::kRedisTimeout:
    case ErrorCode::kRedisAuth:
    case ErrorCode::kRedisProtocol:
    case ErrorCode::kRedisScript:
    case ErrorCode::kRedisBusy:
    case ErrorCode::kRedisReplicas: {
      // lockcore's connection errors already name the server; say where
      // the others happened.
      const std::string url = redis.endpoint().Redacted();
      const std::string what = error.what();
      PrintError((what.find(url) == std::string::npos
                      ? "Redis at " + url + ": " + what
                      : what) +
                 " (" + std::string(ErrorCodeName(error.code())) + ")");
      return kExitUnavailable;
    }
    case ErrorCode::kKafka:
      PrintError(std::string(error.what()) + " (kafka)");
      return kExitUnavailable;
    case ErrorCode::kCancelled:
    case ErrorCode::kInternal:
      break;
  }
  PrintError(std::string("internal error (") +
             std::string(ErrorCodeName(error.code())) + "): " + error.what());
  return kExitSoftware;
}

void LockRun::OnSignal(int signal) {
  bool cancel = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (signal_ == 0) signal_ = signal;
    if (group_ > 0) {
      // The whole group, once: COMMAND is not in lockfleet's process group,
      // so a terminal's Ctrl-C did not reach it directly.
      ::kill(-group_, signal);
      // SIGHUP may mean "reload" to COMMAND; only a stop request escalates.
      if ((signal == SIGINT || signal == SIGTERM) && stop_signal_ == 0) {
        stop_signal_ = signal;
        escalation_.Arm();
      }
    } else {
      cancel = true;
    }
  }
  // Outside mu_: request_stop() runs lockcore's stop callbacks, which take
  // lockcore's locks.
  if (cancel) stop_.request_stop();
}

bool LockRun::MarkLostLocked(const std::string& name, int64_t fence) {
  for (LockGrant& grant : grants_) {
    if (grant.name == name && grant.fence == fence) {
      grant.lost = true;
      lost_ = true;
      return true;
    }
  }
  return false;
}

void LockRun::OnLost(const std::string& name, int64_t fence) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!MarkLostLocked(name, fence)) return;
  if (group_ > 0 && !terminated_) {
    StopGroupLocked();
    terminated_ = true;
  }
}

}  // namespace

int RunLock(const LockRequest& request, const Context& context) {
  return LockRun(request, context).Run();
}

}  // namespace lockfleet::cli
