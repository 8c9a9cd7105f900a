#include "lock_command.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "connection_options.h"
#include "lock_run.h"
#include "lockfleet/config/config.h"
#include "lockfleet/config/duration.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/multi_lock.h"
#include "lockfleet/lockcore/rwlock.h"
#include "lockfleet/lockcore/semaphore.h"
#include "option_range.h"

namespace lockfleet::cli {
namespace {

using std::chrono::milliseconds;

// A waiter silent for 3 park caps loses its place in line; beyond an hour
// that only keeps dead waiters around.
constexpr milliseconds kMaxParkCap = std::chrono::hours(1);

// The help footer (a function: it names kMaxMultiLockNames).
std::string LockFooter() {
  return
      R"(COMMAND runs with extra environment variables: LOCKFLEET_NAME (the lock
name) and LOCKFLEET_FENCE (the fencing token of this grant; tokens strictly
increase per lock name, so a resource can reject writes from a stale holder).
While COMMAND runs, the lease is renewed in the background every lease/3, so
COMMAND may run far longer than the lease.

Several NAMEs (a multi-lock): lockfleet takes every one of the locks,
all-or-nothing, one at a time in one canonical order (the names sorted by
their bytes, whatever order they were given in), so two lockfleet processes
locking overlapping names in opposite orders never deadlock. --wait covers
them all: when one is not granted in time, the ones already taken are given
back (exit 75 names the lock it waited for and its holder). COMMAND runs
once all are held; losing any of them stops COMMAND as for one lock (exit
76); all are released when it ends, newest first. Each is an ordinary lock:
'lockfleet lock A' elsewhere excludes 'lockfleet lock A B'. At most )" +
      std::to_string(kMaxMultiLockNames) + R"( NAMEs.

Read-write locks (--read, --write): many readers of a catalogue, one writer
of it. With --read, lockfleet takes the read lock of the read-write lock
NAME: any number of 'lockfleet lock --read NAME' commands run at once. With
--write, its write lock: the command runs alone, with no reader and no
other writer of NAME. Waiting is in arrival order: a --write waits for the
readers before it, and readers that come after a waiting --write wait for
it (a stream of readers never starves a writer); a release that frees the
lock lets every reader at the head of the line run at once. The read-write
lock NAME is not the lock NAME: 'lockfleet lock NAME' (without --read or
--write) does not exclude either, so give every command on one NAME the
same kind. One NAME only (no multi-lock of read-write locks). COMMAND gets
LOCKFLEET_NAME, LOCKFLEET_MODE (read or write) and LOCKFLEET_TOKEN: under
--write the fencing token of this grant, which it also gets as
LOCKFLEET_FENCE; under --read the token of the last write grant (0: never
written: what state it reads), and no LOCKFLEET_FENCE (every reader has
that token: it fences nothing). Also LOCKFLEET_LOCKS=1, LOCKFLEET_NAME_1
and, under --write, LOCKFLEET_FENCE_1. --no-fair, --wait, --lease, signals,
Kafka and the exit statuses work as for a lock (75: the holders are named;
76: the hold's lease expired).

Whatever the number of NAMEs, COMMAND also gets LOCKFLEET_LOCKS (how many)
and, for the i-th NAME as given (i = 1, 2, ...), LOCKFLEET_NAME_<i> and
LOCKFLEET_FENCE_<i>; with several NAMEs, LOCKFLEET_NAME and LOCKFLEET_FENCE
are not set (no one fence stands for all the locks). One variable per value,
so any name (spaces, newlines) is safe in a shell script:
  i=1; while [ "$i" -le "$LOCKFLEET_LOCKS" ]; do
    eval "name=\$LOCKFLEET_NAME_$i fence=\$LOCKFLEET_FENCE_$i"
    ...; i=$((i + 1)); done

COMMAND runs in a process group of its own, and no process of that group
outlives the lock: signals go to the whole group; processes COMMAND leaves
behind when it exits get SIGTERM (then SIGKILL after --kill-after) before the
lock is released; if lockfleet itself dies (even by SIGKILL), the group is
killed. Only processes that leave the group (setsid, as daemons do) escape.

Signals: SIGINT, SIGTERM or SIGHUP while waiting cancel the wait (nothing is
left locked); while COMMAND runs they are forwarded to COMMAND's group, once,
and lockfleet waits for it, releases the lock and exits with COMMAND's status.
A group still running --kill-after after a forwarded SIGINT or SIGTERM, or
after the SIGTERM sent when the lock is lost, gets SIGKILL. In the foreground
of a terminal, COMMAND's group gets the terminal: it can read it, and Ctrl-C
reaches COMMAND directly, not lockfleet.

Kafka (optional): with --kafka, releasing the lock publishes an unlock event
and lockfleet processes waiting for it elsewhere wake at once; without Kafka
they notice within --park-cap (1s by default). Kafka only speeds up waiting:
if it is unreachable, lockfleet warns and carries on without it, with the
same locking, COMMAND and exit status. 'lockfleet broker' serves a throwaway
broker for development and tests. With an event key (--event-key-env,
--event-key-file or $LOCKFLEET_EVENT_KEY) unlock events are signed
(HMAC-SHA256), and events that are unsigned or signed with another key are
ignored: give every process that shares the topic the same key.

Exit status:
  N        COMMAND's own exit status (128+S if signal S killed it)
  2        bad arguments: missing NAME or COMMAND, an empty or repeated
           NAME, too many NAMEs, --read with --write, or either with
           several NAMEs, bad duration, bad URL, Kafka bootstrap or
           event key, or a bad --config file (each error names
           FILE:LINE:COL)
  69       Redis unreachable, timed out or refused authentication, or
           fewer replicas than --min-replicas confirmed the lock (several
           NAMEs: the locks already taken are given back; one Redis cannot
           be reached to give back stays held until its lease runs out)
  75       lock not acquired within --wait; the message names the holder
           (several NAMEs: the lock not granted, and its holder; none of
           the locks is left held)
  76       lock lost while COMMAND ran (lease expired or force-unlocked;
           several NAMEs: any of them); COMMAND's group was sent SIGTERM,
           and SIGKILL after --kill-after
  126/127  COMMAND could not be executed / was not found
  128+S    signal S (SIGINT 130, SIGTERM 143) arrived while waiting

Config: with --config FILE, the settings come from the deployment's config
file (the one 'lockfleet worker' reads; see 'lockfleet config example'):
redis (url, timeouts, key_prefix), locks (lease, wait, park_cap, fair,
windows) and kafka (bootstrap, unlock_topic, properties such as SASL/SSL,
the event key), so the lock is the same lock the fleet takes. The options
above override what they name; the environment variables below are then
not read.

Environment (without --config):
  LOCKFLEET_REDIS  Redis URL used when --redis is not given
  LOCKFLEET_KAFKA  Kafka bootstrap servers used when --kafka is not given
  LOCKFLEET_EVENT_KEY  the unlock-event key(s) when neither --event-key-env
                   nor --event-key-file is given

Examples:
  lockfleet lock --wait 30s nightly-backup -- ./backup.sh --full
  lockfleet lock --wait 1m stock:A stock:B -- ./move-stock.sh A B
  lockfleet lock --read catalogue -- ./export-catalogue.sh
  lockfleet lock --write --wait 10m catalogue -- ./rebuild-catalogue.sh
  lockfleet lock --kafka kafka1:9092,kafka2:9092 deploy -- ./deploy.sh
  lockfleet lock --config /etc/lockfleet/worker.yaml reindex -- ./reindex)";
}

// The semaphore command's help footer.
std::string SemaphoreFooter() {
  return R"(A counting semaphore across machines: at most N holders of its permits at
once ("at most 3 exports against the partner API"). lockfleet takes --take
permits (1 by default) of semaphore NAME as one permit set, runs COMMAND
while the watchdog renews the set's lease every lease/3, and gives the
permits back when COMMAND ends. A lockfleet (or a machine) that dies gives
its permits back when their lease runs out: permits never stay taken for
ever. --permits N sets the number of permits first (every process of a
fleet may pass the same N; the last one set counts); without it the
semaphore must exist. Waiters are served in arrival order: one that needs 3
permits is not overtaken by later ones that need 1.

COMMAND runs with LOCKFLEET_SEMAPHORE (the name), LOCKFLEET_PERMITS (how
many it holds) and LOCKFLEET_PERMIT_ID (the set's id) in its environment.
Process group, signals, Kafka, --config and the exit statuses are those of
'lockfleet lock' (see 'lockfleet lock --help'); 75 means the permits were
not free within --wait (the message says how many were free), 76 that the
permit set was lost while COMMAND ran (its lease ran out, or it was released
by id), and 2 also covers --take above the semaphore's permits, or a
semaphore that does not exist without --permits.

Examples:
  lockfleet semaphore partner-api --permits 3 --wait 10m -- ./export.sh
  lockfleet semaphore gpu --permits 4 --take 2 -- ./train.sh)";
}

// Raw option values as CLI11 stores them.
struct LockArgs {
  ConnectionArgs connection;  // --config, --redis, --kafka, event key
  std::string wait;
  std::string lease;
  std::string park_cap;
  std::string kill_after;
  int min_replicas = 0;
  std::string replica_timeout;
  bool verbose = false;
  bool no_fair = false;
  bool read = false;               // lock: --read
  bool write = false;              // lock: --write
  std::vector<std::string> names;  // every word before "--" but options
  long long permits = 0;           // semaphore: --permits
  long long take = 1;              // semaphore: --take
  CLI::Option* permits_option = nullptr;
  CLI::Option* name_option = nullptr;
  CLI::Option* wait_option = nullptr;
  CLI::Option* lease_option = nullptr;
  CLI::Option* park_cap_option = nullptr;
  CLI::Option* kill_after_option = nullptr;
  CLI::Option* min_replicas_option = nullptr;
  CLI::Option* replica_timeout_option = nullptr;
};

// The names given more than once, each once, sorted.
std::vector<std::string> RepeatedLockNames(
    const std::vector<std::string>& names) {
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::string> repeated;
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i] == sorted[i - 1] &&
        (repeated.empty() || repeated.back() != sorted[i])) {
      repeated.push_back(sorted[i]);
    }
  }
  return repeated;
}

// Checks the NAMEs and COMMAND. Without "--" every word is taken for a
// NAME, so several words then most likely are NAME and COMMAND run together:
// only the first is shown, since COMMAND's arguments may hold a password.
void ValidateLockNames(const LockArgs& args, const Context& context) {
  if (args.name_option->count() == 0 || args.names.empty()) {
    throw UsageError(context.has_trailing_args
                         ? "missing lock NAME before '--'"
                         : "missing lock NAME and '-- COMMAND'");
  }
  const std::vector<std::string>& names = args.names;
  if (!context.has_trailing_args && names.size() > 1) {
    const size_t more = names.size() - 1;
    throw UsageError("missing '-- COMMAND' after lock NAME " +
                     Quoted(names[0]) + " and " + std::to_string(more) +
                     (more == 1 ? " more word" : " more words") +
                     ": put '--' between the NAME(s) and COMMAND");
  }
  for (size_t i = 0; i < names.size(); ++i) {
    if (!names[i].empty()) continue;
    throw UsageError(names.size() == 1
                         ? "lock NAME must not be empty"
                         : "lock NAME " + std::to_string(i + 1) + " of " +
                               std::to_string(names.size()) +
                               " is empty: lock names must not be empty");
  }
  if (!context.has_trailing_args) {
    throw UsageError("missing '-- COMMAND' after lock NAME " +
                     Quoted(names[0]));
  }
  if (names.size() > kMaxMultiLockNames) {
    throw UsageError(std::to_string(names.size()) + " lock NAMEs: at most " +
                     std::to_string(kMaxMultiLockNames) + " at once");
  }
  const std::vector<std::string> repeated = RepeatedLockNames(names);
  if (!repeated.empty()) {
    throw UsageError("lock NAME" +
                     std::string(repeated.size() == 1 ? "" : "s") +
                     " given more than once: " + QuotedList(repeated));
  }
  if (context.trailing_args.empty() || context.trailing_args[0].empty()) {
    throw UsageError("missing COMMAND after '--'");
  }
}

// The semaphore's NAME (one), --permits, --take and COMMAND.
SemaphoreRequest ValidateSemaphore(const LockArgs& args,
                                   const Context& context) {
  if (args.name_option->count() == 0 || args.names.empty()) {
    throw UsageError(context.has_trailing_args
                         ? "missing semaphore NAME before '--'"
                         : "missing semaphore NAME and '-- COMMAND'");
  }
  if (args.names.size() > 1) {
    // Without "--", NAME and COMMAND run together: only the first word is
    // shown (COMMAND's arguments may hold a password).
    throw UsageError(context.has_trailing_args
                         ? "one semaphore NAME, not " +
                               std::to_string(args.names.size())
                         : "missing '-- COMMAND' after semaphore NAME " +
                               Quoted(args.names[0]) +
                               ": put '--' between NAME and COMMAND");
  }
  if (args.names[0].empty())
    throw UsageError("semaphore NAME must not be empty");
  if (!context.has_trailing_args) {
    throw UsageError("missing '-- COMMAND' after semaphore NAME " +
                     Quoted(args.names[0]));
  }
  if (context.trailing_args.empty() || context.trailing_args[0].empty()) {
    throw UsageError("missing COMMAND after '--'");
  }
  SemaphoreRequest semaphore;
  CheckRange("--take", args.take, 1, kMaxSemaphorePermits);
  semaphore.take = args.take;
  if (args.permits_option->count() > 0) {
    CheckRange("--permits", args.permits, 1, kMaxSemaphorePermits);
    if (args.take > args.permits) {
      throw UsageError("--take " + std::to_string(args.take) +
                       " is more than --permits " +
                       std::to_string(args.permits));
    }
    semaphore.permits = args.permits;
  }
  return semaphore;
}

// --read / --write: one of them, with one NAME (ValidateLockNames first).
std::optional<RwMode> ValidateRwMode(const LockArgs& args) {
  if (!args.read && !args.write) return std::nullopt;
  const std::string flag = args.read ? "--read" : "--write";
  if (args.names.size() > 1) {
    throw UsageError(flag + " takes one lock NAME, not " +
                     std::to_string(args.names.size()) +
                     ": a read-write lock is one lock (several NAMEs, a "
                     "multi-lock, are plain locks only)");
  }
  return args.read ? RwMode::kRead : RwMode::kWrite;
}

LockRequest Validate(const LockArgs& args, const Context& context,
                     bool semaphore) {
  LockRequest request;
  if (semaphore) {
    request.semaphore = ValidateSemaphore(args, context);
  } else {
    if (args.read && args.write) {
      throw UsageError(
          "--read and --write exclude each other: a hold of a read-write "
          "lock is one or the other");
    }
    ValidateLockNames(args, context);
    request.rw_mode = ValidateRwMode(args);
  }
  request.names = args.names;
  request.command = context.trailing_args;

  // Settings: a flag, else the --config file, else the environment, else
  // the defaults.
  Connection connection = ResolveConnection(args.connection);
  request.redis = std::move(connection.redis);
  request.redis_source = std::move(connection.redis_source);
  request.locks = std::move(connection.locks);
  request.kafka = std::move(connection.kafka);
  request.kafka_source = std::move(connection.kafka_source);
  const bool from_config = connection.config.has_value();
  if (from_config) request.wait = connection.config->locks.wait;

  if (args.wait_option->count() > 0) {
    request.wait = ParseDurationOption("--wait", args.wait);
  }
  if (args.lease_option->count() > 0) {
    request.locks.default_lease = ParseDurationOption("--lease", args.lease);
  }
  if (args.park_cap_option->count() > 0) {
    const milliseconds park_cap =
        ParseDurationOption("--park-cap", args.park_cap);
    if (park_cap <= milliseconds(0) || park_cap > kMaxParkCap) {
      throw UsageError("--park-cap " + args.park_cap + ": must be 1ms.." +
                       config::FormatDuration(kMaxParkCap));
    }
    request.locks.park_cap = park_cap;
    if (!from_config) {
      // In fair mode a queued waiter also wakes every presence_window / 3
      // to keep its place, which would override a longer park cap: tie both
      // to it. A park cap of 1s gives lockcore's defaults (3s, 2s). Claim
      // within 2/3 of it: more than a park (presence/3), at most presence,
      // so a killed waiter delays the queue by one presence window at most.
      // (A config's windows are the fleet's: kept.)
      request.locks.presence_window = std::max(3 * park_cap, milliseconds(30));
      request.locks.claim_window = request.locks.presence_window * 2 / 3;
    }
  }
  if (args.min_replicas_option->count() > 0) {
    CheckRange("--min-replicas", args.min_replicas, 0, 100);
    request.locks.min_replicas = args.min_replicas;
  }
  if (args.replica_timeout_option->count() > 0) {
    const milliseconds timeout =
        ParseDurationOption("--replica-timeout", args.replica_timeout);
    if (timeout <= milliseconds(0)) {
      throw UsageError("--replica-timeout " + args.replica_timeout +
                       ": must be more than 0");
    }
    request.locks.replica_timeout = timeout;
  }
  if (args.no_fair) request.locks.fair = false;
  if (args.kill_after_option->count() > 0) {
    request.kill_after = ParseDurationOption("--kill-after", args.kill_after);
  }
  request.verbose = args.verbose;
  return request;
}

// `lock` (semaphore false) or `semaphore`: the same options but NAME's,
// --permits, --take and --no-fair, and the same run.
Subcommand AddHoldCommand(CLI::App& parent, HelpFormatter& formatter,
                          bool semaphore) {
  CLI::App* app = nullptr;
  if (semaphore) {
    app = parent.add_subcommand(
        "semaphore",
        "Run COMMAND while holding permits of the semaphore NAME: at most N "
        "such commands at once, across machines.");
    formatter.SetSynopsis(
        app, "[OPTIONS] NAME [--permits N] [--take K] -- COMMAND [ARGS...]");
    app->footer(SemaphoreFooter());
  } else {
    app = parent.add_subcommand(
        "lock",
        "Run COMMAND while holding the distributed lock NAME, or all of "
        "several (flock(1) across machines).");
    formatter.SetSynopsis(app,
                          "[OPTIONS] NAME -- COMMAND [ARGS...]\n"
                          "   or: lockfleet lock [OPTIONS] NAME NAME... -- "
                          "COMMAND [ARGS...]\n"
                          "   or: lockfleet lock [OPTIONS] --read|--write "
                          "NAME -- COMMAND [ARGS...]");
    app->footer(LockFooter());
  }
  // "the lock ... are" reads oddly; "the lock(s)" covers a multi-lock.
  const std::string held = semaphore ? "the permits" : "the lock(s)";

  auto args = std::make_shared<LockArgs>();
  args->connection.config_option =
      app->add_option(
             "--config", args->connection.config_path,
             "Read Redis, lock and Kafka settings (key prefix, lease, wait, "
             "park cap, windows, kafka.properties such as SASL/SSL, event "
             "key) from the deployment's config file, as 'lockfleet worker' "
             "does; the options below override it")
          ->type_name("FILE");
  args->connection.redis_option =
      app->add_option("--redis", args->connection.redis_url,
                      "Redis server: redis://[[user]:password@]host[:port][/db]"
                      ", rediss://... (TLS), unix:///path/to/redis.sock, "
                      "redis+sentinel://host:port[,host:port...]/MASTER or "
                      "redis+cluster://host:port[,host:port...]. "
                      "Default: the config's redis.url, else $LOCKFLEET_REDIS, "
                      "else redis://127.0.0.1:6379")
          ->type_name("URL");
  args->wait_option =
      app->add_option(
             "--wait", args->wait,
             "How long to wait for " + held +
                 (semaphore ? "" : " (several NAMEs: for all of them)") +
                 ", e.g. 500ms, 2s, 1.5m, 1h; 0 tries once. "
                 "Default: the config's locks.wait, else "
                 "wait without limit")
          ->type_name("DURATION");
  args->lease_option =
      app->add_option(
             "--lease", args->lease,
             "Watchdog lease of " + held +
                 ": renewed every lease/3 while COMMAND runs, so it does not "
                 "limit how long COMMAND may run; it bounds how long " +
                 held +
                 " outlive a killed or frozen lockfleet. "
                 "Default: the config's locks.lease, else " +
                 config::FormatDuration(LockClientOptions{}.default_lease))
          ->type_name("DURATION");
  args->connection.kafka_option =
      app->add_option(
             "--kafka", args->connection.kafka,
             "Kafka bootstrap servers (HOST:PORT[,HOST:PORT...]) for unlock "
             "events, which wake waiters in other processes at once. Optional:"
             " if Kafka is unreachable, lockfleet warns and works without it. "
             "Default: the config's kafka.bootstrap (with --config, "
             "$LOCKFLEET_KAFKA is not read), else $LOCKFLEET_KAFKA, else no "
             "Kafka; '' turns it off")
          ->type_name("BOOTSTRAP");
  AddEventKeyOptions(*app, args->connection.event_key);
  args->kill_after_option =
      app->add_option(
             "--kill-after", args->kill_after,
             "Send COMMAND's process group SIGKILL if it still runs this long "
             "after it was asked to stop (a forwarded SIGINT/SIGTERM, SIGTERM "
             "when " +
                 held +
                 " are lost, or for processes left behind by "
                 "COMMAND); 0 never kills. Default: " +
                 config::FormatDuration(LockRequest{}.kill_after))
          ->type_name("DURATION");
  if (!semaphore) {
    app->add_flag("--read", args->read,
                  "Hold the read lock of the read-write lock NAME: run beside "
                  "other --read holders of NAME, never beside a --write one "
                  "(one NAME)");
    app->add_flag("--write", args->write,
                  "Hold the write lock of the read-write lock NAME: run alone, "
                  "with no --read or other --write holder of NAME (one NAME; "
                  "the read-write lock NAME is not the lock NAME)");
    app->add_flag(
        "--no-fair", args->no_fair,
        "Barge instead of queueing: do not wait in line behind earlier "
        "waiters (by default waiters are served in arrival order and a "
        "release hands the lock straight to the next one; with --config, "
        "as its locks.fair says)");
  } else {
    args->permits_option =
        app->add_option("--permits", args->permits,
                        "Set the semaphore's number of permits (1..1e9) "
                        "before taking any; without it the semaphore must "
                        "exist")
            ->type_name("N");
    app->add_option("--take", args->take,
                    "Permits to hold while COMMAND runs. Default: 1")
        ->type_name("K");
  }
  app->add_flag("-v,--verbose", args->verbose,
                "Report on stderr when waiting starts (and whether Kafka "
                "wake-ups are on) and when " +
                    held + " are acquired");
  args->park_cap_option =
      app->add_option(
             "--park-cap", args->park_cap,
             "Longest single sleep while waiting before checking Redis again; "
             "a safety net under Kafka wake-ups (a missed event costs at most "
             "this). Without --config, a waiter in the queue for the lock also "
             "renews its place this often, and loses it when silent for 3 "
             "times this (a killed waiter); a config's locks.presence_window "
             "decides that instead. At most 1h. Default: the config's "
             "locks.park_cap, else " +
                 config::FormatDuration(LockClientOptions{}.park_cap))
          ->type_name("DURATION")
          ->group("Advanced");
  args->min_replicas_option =
      app->add_option(
             "--min-replicas", args->min_replicas,
             "Replicas that must confirm every change of the lock (Redis "
             "WAIT) before it counts: a grant fewer confirm within "
             "--replica-timeout is given back and lockfleet exits 69. 0..100, "
             "0 = do not wait. Default: the config's redis.min_replicas, "
             "else 0")
          ->type_name("N")
          ->group("Advanced");
  args->replica_timeout_option =
      app->add_option(
             "--replica-timeout", args->replica_timeout,
             "How long --min-replicas waits for the replicas. "
             "Default: the config's redis.replica_timeout, else " +
                 config::FormatDuration(LockClientOptions{}.replica_timeout))
          ->type_name("DURATION")
          ->group("Advanced");
  args->name_option =
      app->add_option("NAME", args->names,
                      semaphore ? std::string("Name of the semaphore (any "
                                              "non-empty string)")
                                : "Name of the lock (any non-empty string). "
                                  "Several NAMEs: all of the locks, "
                                  "all-or-nothing (at most " +
                                      std::to_string(kMaxMultiLockNames) + ")")
          ->type_name("");

  Subcommand subcommand;
  subcommand.app = app;
  subcommand.takes_trailing_args = true;
  subcommand.run = [args, semaphore](const Context& context) {
    LockRequest request;
    try {
      request = Validate(*args, context, semaphore);
    } catch (const config::ConfigErrors& e) {
      for (const config::Diagnostic& d : e.errors()) PrintError(d.ToString());
      return kExitUsage;
    }
    return RunLock(request, context);
  };
  return subcommand;
}

}  // namespace

Subcommand AddLockCommand(CLI::App& parent, HelpFormatter& formatter) {
  return AddHoldCommand(parent, formatter, /*semaphore=*/false);
}

Subcommand AddSemaphoreCommand(CLI::App& parent, HelpFormatter& formatter) {
  return AddHoldCommand(parent, formatter, /*semaphore=*/true);
}

}  // namespace lockfleet::cli
