#include "bench_command.h"

#include <atomic>
#include <memory>
#include <string>

#include "bench_contender.h"
#include "bench_options.h"
#include "bench_run.h"

namespace lockfleet::cli {
namespace {

constexpr char kDescription[] =
    "Measure what the lock costs under contention: P processes x T threads "
    "compete for K locks; prints violations, hand-off latency, Redis cost, "
    "fairness and wake-ups.";

constexpr char kFooter[] =
    R"(Each of --processes contender processes (this binary again, killed if
this one dies) runs --threads threads with one LockClient per process, as
production does: in --mode kafka one KafkaNotifier per process publishes
unlock events and wakes its waiters; --mode local uses no Kafka (same-process
wake-ups and bounded parks only); --mode poll is a naive baseline that calls
TryAcquire every --poll-interval-ms (default 10); --mode floor is the
physical reference and NOT a lock: one token per lock name in a Redis list,
taken with BLPOP and given back with RPUSH (no lease, no owner token, no
fencing), the fastest hand-off Redis can do. Every thread loops: wait for
one of --locks locks (picked at random), hold it --hold-ms, release, think
--think-ms. All start on a common barrier after warm-up and stop after
--seconds; the costs (round trips, commands, wake-ups, Redis CPU) are
counted over that window, and a wait the end cuts short is cancelled.

--primitive rwlock: the threads take one read-write lock per pick (a read
with probability --read-share %, else a write); --primitive semaphore: one
permit of a semaphore of --permits permits; --primitive multilock: all
--names lock names at once (AcquireAllFor). Violations are then: a write
overlapping any other section, or a read overlapping a write (rwlock);
more than --permits sections at one instant (semaphore); any overlap
(multilock). Their hand-off gap is that of acquisitions that waited:
acquire - the latest release before it on the same name; round trips of
the acquire call alone are reported per class (reads joining readers,
writes, waited, not waited).

Without --redis a private redis-server (from PATH, or
$LOCKFLEET_REDIS_SERVER) is started on a unix socket; without --kafka (in
kafka mode) an embedded broker is started in this process; with --kafka
kafka-local a private real Apache Kafka broker is started with the
kafka-local script ($LOCKFLEET_KAFKA_LOCAL, else ../shared/kafka beside the
source tree; needs java). All are stopped at the end. Against a shared
Redis, the server-side figures (commands, CPU, clients) include other
clients' load.

Every critical section records its acquire and release time (wall clock);
the records of all processes are merged per lock:
  violations      sections that overlap on one lock (must be 0)
  hand-off gap    next acquire - previous release on one lock, overall, to
                  another process, to another thread of the same process
  round trips     Redis round trips per acquisition, counted by the clients
  commands        Redis commands executed per acquisition (INFO commandstats
                  delta, commands inside scripts included)
  Jain            Jain's fairness index over per-contender acquisitions
  releaser share  hand-offs that went back to the releasing contender
  wake-ups        by cause: event (Kafka), local (same process), direct
                  (same process, woken holding the lock: a direct grant),
                  bound (park bound expired), poll (poll-interval sleeps)
  errors          Redis/Kafka errors inside contenders, by code (retried)
  resources       contenders' RSS and open descriptors after warm-up and at
                  the end; Redis connected_clients before, during, after
  host cpu        the whole machine's busy CPU over the run (/proc/stat), in
                  % of all its cores
--event-latency N then measures the broker's one-way event latency with N
events (kafka mode). --json prints all of it as one JSON object.
--repeat N runs the whole benchmark N times (each run starts its own
private redis-server and embedded broker where those are started; one
kafka-local broker serves all runs) and reports each figure's
median and spread (min - max); with --json: {"repeat", "summary",
"violations", "failed_processes", "runs": [one object per run]}.

Exit status:
  0   the run completed with 0 violations
  1   violations found
  2   bad arguments
  3   a contender process failed or had to be killed (see its line)
  69  Redis or Kafka unreachable at start, or redis-server not startable
  130 interrupted; everything started was stopped

Example:
  lockfleet bench --processes 8 --hold-ms 1 --seconds 5
  lockfleet bench --mode floor --processes 8 --repeat 3
  lockfleet bench --kafka kafka-local --processes 32 --repeat 3 --json
  lockfleet bench --mode poll --poll-interval-ms 1 --processes 8 --json)";

}  // namespace

Subcommand AddBenchCommand(CLI::App& parent, HelpFormatter& formatter) {
  CLI::App* app = parent.add_subcommand("bench", kDescription);
  formatter.SetSynopsis(
      app,
      "[--mode kafka|local|poll|floor] "
      "[--primitive lock|rwlock|semaphore|multilock] [--processes P] "
      "[--threads T] "
      "[--locks K] [--seconds S] [--hold-ms H] [--fair|--no-fair] "
      "[--redis URL] [--kafka BOOTSTRAP|kafka-local] [--repeat N] [--json] "
      "...");
  app->footer(kFooter);
  auto args = std::make_shared<BenchArgs>();
  app->add_option("--mode", args->mode_name,
                  "kafka (the product), local (no Kafka), poll (baseline) or "
                  "floor (BLPOP on a token: a reference, not a lock). "
                  "Default: kafka")
      ->type_name("MODE");
  app->add_option("--primitive", args->primitive_name,
                  "lock, rwlock (one read-write lock; --read-share), "
                  "semaphore (--permits, 1 permit per acquisition) or "
                  "multilock (--names names per acquisition). Default: lock")
      ->type_name("PRIMITIVE");
  CLI::Option* read_share =
      app->add_option("--read-share", args->read_share,
                      "--primitive rwlock: % of acquisitions that are reads, "
                      "0..100. Default: 90")
          ->type_name("PCT");
  CLI::Option* permits =
      app->add_option("--permits", args->permits,
                      "--primitive semaphore: its permits. Default: 4")
          ->type_name("N");
  CLI::Option* names =
      app->add_option("--names", args->names,
                      "--primitive multilock: lock names every acquisition "
                      "takes (LockClient::AcquireAllFor), 1..256. Default: 4")
          ->type_name("K");
  app->add_option("--processes", args->processes,
                  "Contender processes, 1..256. Default: 2")
      ->type_name("P");
  app->add_option("--threads", args->threads,
                  "Threads per process, 1..256. Default: 1")
      ->type_name("T");
  app->add_option("--locks", args->locks,
                  "Lock names the contenders pick from at random. Default: 1")
      ->type_name("K");
  app->add_option("--seconds", args->seconds,
                  "Length of the timed run, 1..3600. Default: 5")
      ->type_name("S");
  app->add_option("--hold-ms", args->hold_ms,
                  "Time each critical section holds the lock. Default: 1")
      ->type_name("H");
  app->add_option("--think-ms", args->think_ms,
                  "Pause after each release. Default: 0")
      ->type_name("MS");
  CLI::Option* poll_interval =
      app->add_option("--poll-interval-ms", args->poll_interval_ms,
                      "--mode poll: pause between attempts. Default: 10")
          ->type_name("I");
  app->add_flag("--fair", args->fair_flag,
                "Waiters queue in arrival order (the product's default)");
  app->add_flag("--no-fair", args->no_fair_flag,
                "Barging: every waiter races for a freed lock");
  app->add_option("--fetch-wait-ms", args->fetch_wait_ms,
                  "--mode kafka: the consumers' fetch wait. Default: the "
                  "notifier's (auto: 1 ms on the embedded broker, 500 ms on "
                  "a real one)")
      ->type_name("MS");
  app->add_option("--fan-out", args->fan_out,
                  "--mode kafka: broadcast (every process fetches every "
                  "unlock event) or targeted (only the partitions of the "
                  "names it waits on). Default: the config's, else broadcast")
      ->type_name("F");
  app->add_option("--targeted-linger-ms", args->targeted_linger_ms,
                  "--fan-out targeted: how long a partition stays fetched "
                  "after its last wait. Default: the config's, else 2000")
      ->type_name("MS");
  app->add_option("--partitions", args->partitions,
                  "--mode kafka: the unlock topic's partitions on the "
                  "broker the run starts (embedded or kafka-local). "
                  "Default: 4 embedded, 3 kafka-local")
      ->type_name("N");
  app->add_option("--park-cap-ms", args->park_cap_ms,
                  "Longest single park of a waiter. Default: the product's "
                  "(1000)")
      ->type_name("MS");
  app->add_option("--spin-max-hold-ms", args->spin_max_hold_ms,
                  "Fair modes: the queue head spins on locks held at most "
                  "this long; 0 turns spinning off. Default: the product's "
                  "(5)")
      ->type_name("MS");
  app->add_option("--event-latency", args->event_latency,
                  "--mode kafka: afterwards, measure one-way event latency "
                  "with N events. Default: 0 (off)")
      ->type_name("N");
  app->add_option("--config", args->config_path,
                  "Bench the deployment of this config file: its Redis (URL, "
                  "timeouts) and its Kafka (bootstrap, unlock topic, "
                  "properties such as SASL/SSL, event key). The locks keep "
                  "their own key prefix; --redis and --kafka override")
      ->type_name("FILE");
  app->add_option("--redis", args->redis,
                  "Redis URL. Default: the config's, else start a private "
                  "redis-server")
      ->type_name("URL");
  app->add_option("--kafka", args->kafka,
                  "--mode kafka: broker list, or kafka-local to start a "
                  "private real broker. Default: the config's, else start "
                  "an embedded broker")
      ->type_name("BOOTSTRAP");
  app->add_option("--repeat", args->repeat,
                  "Runs, 1..100; more than 1 reports each figure's median "
                  "and spread. Default: 1")
      ->type_name("N");
  AddEventKeyOptions(*app, args->event_key);
  app->add_flag("--json", args->json, "Print one JSON object");
  // The contender processes' own mode (bench_contender.h).
  app->add_option("--child-index", args->child_index)->group("");
  app->add_option("--run-dir", args->run_dir)->group("");
  Subcommand subcommand;
  subcommand.app = app;
  subcommand.run = [args, poll_interval, read_share, permits,
                    names](const Context& context) {
    args->poll_interval_given = poll_interval->count() > 0;
    args->read_share_given = read_share->count() > 0;
    args->permits_given = permits->count() > 0;
    args->names_given = names->count() > 0;
    try {
      CheckBenchArgs(*args);
    } catch (const config::ConfigErrors& e) {
      for (const config::Diagnostic& d : e.errors()) PrintError(d.ToString());
      return kExitUsage;
    }
    if (args->child()) {
      if (args->run_dir.empty() || args->redis.empty()) {
        throw UsageError("--child-index needs --run-dir and --redis");
      }
      return RunContender(*args, context);
    }
    std::atomic<bool> interrupted{false};
    ScopedSignalHandler on_signal(context.signals,
                                  [&](int) { interrupted = true; });
    try {
      return RunBench(*args, interrupted);
    } catch (const std::exception& e) {
      PrintError(e.what());
      return kExitUnavailable;
    }
  };
  return subcommand;
}

}  // namespace lockfleet::cli
