// Handlers: the code a job runs, registered by name.
//
// A handler runs with the job's lock held and returns kOk (did its work),
// kRejected (refused by a business rule — sold out, say — which is final, not
// retried) or kDuplicate (it found its own effect already applied). Throwing
// any exception is a failure: the worker releases the lock, backs off and
// retries up to worker.max_attempts times (re-checking whether the job is done
// meanwhile), then gives the job up as failed.
//
// Writing safely. The lock is a lease: a holder paused past it (GC, SIGSTOP,
// a partition) may still be running when another worker already holds the
// lock. Writes to shared state must therefore go through
// `context.resource` (a FencedResource for the job's lock) with
// `context.grant` (the hold's grant: fencing token and owner): a stale
// holder's write is refused, and so is another grant's that repeats the
// token after a Redis rollback. Throw when that happens; the retry
// re-acquires the lock and re-checks. A handler that reads the resource
// before its first fenced write, or works a while first, calls
// context.resource.Claim(context.grant) at its start (fenced_resource.h,
// "Claim"); the worker does not claim for it, as the claim leaves a fence key
// per lock name for good. Make keys with context.resource.Key({"part", id}):
// ids go in parts of their own.
//
// Read-write locks. A job with a lock_mode (job.h) holds the read-write lock
// job.lock instead of the plain lock: `context.rw_lease` is that hold and
// `context.lease` holds nothing. A write hold fences like a lock's lease
// (context.grant: its fencing token and owner). A read hold is shared with
// the other readers and its token is the last write grant's (what state it
// reads): readers write nothing through the fence — a resource that a
// writer wrote under that token refuses them, one it did not may accept
// them.
//
// Exactly-once effects. The worker marks a job done (context.done_key) after
// the handler returns, so a crash between the two re-runs the handler when
// the job is redelivered. A handler that writes through `context.resource`
// can set done_key in the same script (see builtin_handlers.cc) and then never
// applies its effect twice.
//
// Stopping. `context.stop` is requested when shutdown's grace period ends
// *or* when the job's lease is lost (Lease::stop_token(), or the read-write
// hold's: Redis says the lock is no longer ours, its validity ran out, or the
// LockClient went away) —
// from then on another worker may hold the lock and run the same job. Check
// it at your natural check points (before each step, before a fenced write,
// in every wait: std::condition_variable_any::wait takes it) and stop
// promptly by throwing JobCancelled; write nothing more. The token may fire
// from another thread at any moment (the watchdog's or shutdown's); register
// a std::stop_callback on it for work that cannot poll.
//   - On shutdown the job is handed back to the fleet (kCancelled).
//   - On a lost lease the run counts as kLeaseLost, the job is not marked
//     done, and the runner runs it again from the top under a new hold
//     (acquire, done marker, handler) — a redelivery; the stopped run costs
//     none of worker.max_attempts. Any exception a handler throws once its
//     lease is lost is treated so.
// Throwing JobCancelled without a stop request is an ordinary failure.
//
// The fencing rule. A run whose lease was lost is recorded done only if its
// fenced effect was accepted: if the handler returns normally although its
// lease is lost (it did not check, or finished just then), the runner writes
// the done marker through context.resource with the lost lease; the fence
// accepts it only if no newer grant has written to the resource since, and
// otherwise the job is not done and runs again (kLeaseLost). A handler whose
// effect and done marker are one fenced script (see "Exactly-once effects")
// is thus never applied twice; one with unfenced effects may be. A read
// hold cannot fence: a read job whose hold was lost (a writer may have run
// beside it) is never recorded done, and runs again.
//
//   HandlerRegistry handlers;
//   RegisterBuiltinHandlers(handlers);
//   handlers.Register("email.send", {
//       .run = [](JobContext& c) { Send(*GetString(c.job.payload, "to"));
//                                  return JobResult::kOk; },
//       .settings = {"smtp_host"}});
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "lockfleet/lockcore/fenced_resource.h"
#include "lockfleet/lockcore/lease.h"
#include "lockfleet/lockcore/redis_client.h"
#include "lockfleet/lockcore/rwlock.h"
#include "lockfleet/worker/job.h"
#include "lockfleet/worker/observer.h"

namespace lockfleet::worker {

struct JobContext {
  const Job& job;
  JobSource source;
  // The plain lock's lease, held for the whole call; with a lock_mode it
  // holds nothing (see rw_lease).
  const Lease& lease;
  FencedResource& resource;     // the resource guarded by job.lock
  RedisClient& redis;           // for reads and unfenced bookkeeping
  const Settings& settings;     // worker.handlers[<name>] from the config
  const std::string& done_key;  // the job's done marker (resource's slot)
  std::chrono::milliseconds dedup_ttl;  // how long done_key should live
  // Requested when shutdown's grace runs out or the job's lease is lost
  // (see "Stopping" above). Valid for the call only.
  std::stop_token stop;
  // With job.lock_mode: the hold of the read-write lock job.lock, held for
  // the whole call (its mode, token, stop token). Else nullptr.
  const RwLease* rw_lease = nullptr;
  // The grant to fence writes with: the lease's, or the read-write hold's
  // token and owner (see "Read-write locks" above for a read hold).
  FenceGrant grant;
};

// Thrown by a handler that stopped because context.stop was requested.
class JobCancelled : public std::runtime_error {
 public:
  JobCancelled()
      : std::runtime_error("stopped (shutdown, or the job's lease was lost)") {}
};

using HandlerFn = std::function<JobResult(JobContext& context)>;

struct HandlerSpec {
  HandlerFn run;  // required; returns kOk, kRejected or kDuplicate, or throws
  // The setting keys it understands: the worker refuses to start with a
  // configured setting not listed here (a typo would otherwise be ignored).
  std::vector<std::string> settings;
};

// Not thread-safe to modify; register everything before the worker starts.
// Const access (Find) may happen from any thread.
class HandlerRegistry {
 public:
  // Throws std::invalid_argument for an empty or duplicate name, or a spec
  // without `run`.
  void Register(std::string name, HandlerSpec spec);

  // nullptr when no handler has that name.
  const HandlerSpec* Find(std::string_view name) const;

  std::vector<std::string> Names() const;

  // Checks configured handler settings against the registry: every name must
  // be registered and every key known to it. Returns one message per problem
  // ("worker.handlers.sleep.defalt_ms: unknown setting (known: default_ms)").
  std::vector<std::string> Validate(
      const std::map<std::string, Settings>& configured) const;

 private:
  std::map<std::string, HandlerSpec, std::less<>> handlers_;
};

// Registers "inventory.purchase" and "sleep" (see builtin_handlers.h).
void RegisterBuiltinHandlers(HandlerRegistry& registry);

}  // namespace lockfleet::worker
