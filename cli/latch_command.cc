#include "latch_command.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "child_process.h"
#include "connection_options.h"
#include "kafka_wakeups.h"
#include "lockfleet/config/duration.h"
#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/latch.h"
#include "option_range.h"

namespace lockfleet::cli {
namespace {

using std::chrono::milliseconds;

constexpr char kLatchDescription[] =
    "Countdown latches across processes: set a count, count it down as work "
    "finishes, wait until it reaches 0.";

constexpr char kLatchFooter[] =
    "A coordinator runs 'latch set NAME 12' once; each piece of work runs "
    "'latch count-down NAME --id shard-3' when done (an id counts once); "
    "the next step runs 'lockfleet latch wait NAME --timeout 1h && merge'. "
    "A latch that does not exist is not open. With Kafka (--kafka, "
    "$LOCKFLEET_KAFKA or the config's kafka), the count-down that opens it "
    "wakes every waiter at once; without, a waiter sees it within its park "
    "cap (locks.park_cap, 1s by default).";

struct LatchArgs {
  ConnectionArgs connection;
  std::string name;
  long long count = 0;
  std::string open_ttl = "10m";
  std::string id;
  std::string timeout;
  CLI::Option* timeout_option = nullptr;
};

// A LockClient for the connection (no publisher), inside Guarded.
int WithLatch(const Connection& connection, const std::string& name,
              const std::function<int(CountDownLatch&)>& body) {
  return Guarded(connection, [&] {
    LockClient locks(NewRedis(connection), connection.locks);
    CountDownLatch latch = locks.Latch(name);
    return body(latch);
  });
}

int RunSet(const LatchArgs& args) {
  CheckRange("COUNT", args.count, 1, kMaxLatchCount);
  const milliseconds open_ttl =
      ParseDurationOption("--open-ttl", args.open_ttl);
  if (open_ttl < kMinLatchOpenTtl || open_ttl > kMaxLatchOpenTtl)
    throw UsageError("--open-ttl " + args.open_ttl + ": must be 1m..30d");
  int status = kExitOk;
  const std::optional<Connection> connection =
      Connect(args.connection, &status);
  if (!connection) return status;
  return WithLatch(*connection, args.name, [&](CountDownLatch& latch) {
    if (latch.TrySetCount(args.count, {.open_ttl = open_ttl})) {
      std::cout << "latch " << Quoted(args.name) << " set to " << args.count
                << "\n";
      return kExitOk;
    }
    const int64_t left = latch.Count();
    std::cout << "latch " << Quoted(args.name) << " exists already: "
              << (left == 0 ? std::string("open")
                            : std::to_string(left) + " left")
              << "\n";
    return kExitNothing;
  });
}

int RunCount(const LatchArgs& args) {
  int status = kExitOk;
  const std::optional<Connection> connection =
      Connect(args.connection, &status);
  if (!connection) return status;
  return WithLatch(*connection, args.name, [&](CountDownLatch& latch) {
    const int64_t left = latch.Count();
    if (left < 0) {
      std::cout << "no latch " << Quoted(args.name) << "\n";
      return kExitNothing;
    }
    std::cout << left << "\n";
    return kExitOk;
  });
}

int RunCountDown(const LatchArgs& args) {
  if (args.id.empty()) {
    throw UsageError(
        "count-down needs --id: name the piece of work it reports (e.g. "
        "--id shard-3); an id counts once, so a count-down that failed can "
        "be run again");
  }
  if (args.id.size() > kMaxCountDownIdBytes) {
    throw UsageError("--id is " + std::to_string(args.id.size()) +
                     " bytes; the limit is " +
                     std::to_string(kMaxCountDownIdBytes));
  }
  int status = kExitOk;
  const std::optional<Connection> connection =
      Connect(args.connection, &status);
  if (!connection) return status;
  bool bad_kafka = false;
  std::shared_ptr<notifier::KafkaNotifier> kafka = StartOptionalKafka(
      connection->kafka, connection->kafka_source,
      "waiters in other processes see the opening within their park cap",
      &bad_kafka);
  if (bad_kafka) return kExitUsage;
  status = Guarded(*connection, [&] {
    LockClientOptions options = connection->locks;
    options.publisher = kafka;
    LockClient locks(NewRedis(*connection), options);
    const CountDownResult r = locks.Latch(args.name).CountDown(args.id);
    switch (r.status) {
      case CountDownStatus::kCounted:
        std::cout << "counted down " << Quoted(args.name) << ": " << r.remaining
                  << " left\n";
        return kExitOk;
      case CountDownStatus::kOpened:
        std::cout << "opened " << Quoted(args.name)
                  << (kafka ? "; published the opened event\n"
                            : "; no Kafka: waiters elsewhere see it within "
                              "their park cap\n");
        return kExitOk;
      case CountDownStatus::kAlreadyOpen:
        std::cout << "latch " << Quoted(args.name)
                  << " was open already: nothing counted\n";
        return kExitNothing;
      case CountDownStatus::kNoLatch:
        break;
    }
    std::cout << "no latch " << Quoted(args.name) << ": nothing counted\n";
    return kExitNothing;
  });
  return FinishWithKafka(std::move(kafka), status);
}

int RunWait(const LatchArgs& args, const Context& context) {
  std::optional<milliseconds> timeout;
  if (Given(args.timeout_option))
    timeout = ParseDurationOption("--timeout", args.timeout);
  if (timeout && *timeout < milliseconds(0))
    throw UsageError("--timeout " + args.timeout + ": must not be negative");
  int status = kExitOk;
  const std::optional<Connection> connection =
      Connect(args.connection, &status);
  if (!connection) return status;
  bool bad_kafka = false;
  std::shared_ptr<notifier::KafkaNotifier> kafka =
      StartOptionalKafka(connection->kafka, connection->kafka_source,
                         "the opening is seen within the park cap", &bad_kafka);
  if (bad_kafka) return kExitUsage;
  std::stop_source stop;
  std::atomic<int> signal{0};
  status = Guarded(*connection, [&] {
    const ScopedSignalHandler on_signal(context.signals, [&](int s) {
      signal.store(s);
      stop.request_stop();
    });
    LockClient locks(NewRedis(*connection), connection->locks);
    ScopedSubscription subscription(kafka.get(), &locks);
    CountDownLatch latch = locks.Latch(args.name);
    const AwaitStatus r =
        timeout ? latch.AwaitFor(*timeout, stop.get_token())
                : latch.AwaitUntil(Clock::TimePoint::max(), stop.get_token());
    switch (r) {
      case AwaitStatus::kOpened:
        return kExitOk;
      case AwaitStatus::kTimedOut:
        PrintError("latch " + Quoted(args.name) + " not open after " +
                   args.timeout);
        return kExitTimedOut;
      case AwaitStatus::kCancelled:
        break;
    }
    return kExitSignalBase + signal.load();
  });
  return FinishWithKafka(std::move(kafka), status);
}

// The options every latch subcommand shares: the connection and NAME.
std::shared_ptr<LatchArgs> AddCommon(CLI::App& app, bool kafka) {
  auto args = std::make_shared<LatchArgs>();
  AddConnectionOptions(app, args->connection, kafka);
  app.add_option("NAME", args->name, "The latch")->required()->type_name("");
  return args;
}

}  // namespace

Subcommand AddLatchCommand(CLI::App& parent, HelpFormatter& formatter) {
  CLI::App* app = parent.add_subcommand("latch", kLatchDescription);
  app->require_subcommand(1);
  app->footer(kLatchFooter);
  std::vector<Subcommand> chosen;

  CLI::App* set = app->add_subcommand(
      "set", "Set the count of a latch that does not exist yet");
  formatter.SetSynopsis(set, "NAME COUNT [--open-ttl D]");
  set->footer(ExitStatusFooter("", "set", "the latch exists already"));
  auto set_args = AddCommon(*set, false);
  set->add_option("COUNT", set_args->count, "1..1000000")
      ->required()
      ->type_name("");
  set->add_option("--open-ttl", set_args->open_ttl,
                  "How long the opened latch stays open (1m..30d). "
                  "Default: 10m")
      ->type_name("D");
  chosen.push_back(
      {set, false, [set_args](const Context&) { return RunSet(*set_args); }});

  CLI::App* down = app->add_subcommand(
      "count-down", "Count a latch down once (once per --id)");
  formatter.SetSynopsis(down, "NAME --id ID");
  down->footer(ExitStatusFooter(
      "", "counted, or opened it",
      "nothing counted: no such latch, or it was open already"));
  auto down_args = AddCommon(*down, true);
  down->add_option("--id", down_args->id,
                   "Required: the piece of work this reports; an ID counts "
                   "once, so a failed count-down (exit 69: it may have "
                   "counted) is run again with the same ID")
      ->type_name("ID");
  chosen.push_back({down, false, [down_args](const Context&) {
                      return RunCountDown(*down_args);
                    }});

  CLI::App* wait = app->add_subcommand(
      "wait", "Wait until a latch is open (its count reached 0)");
  formatter.SetSynopsis(wait, "NAME [--timeout D]");
  wait->footer(
      "Exit status:\n  0   open\n  2   bad arguments or --config file"
      "\n  69  Redis unreachable, timed out or refused authentication"
      "\n  75  not open within --timeout\n  128+N  stopped by signal N");
  auto wait_args = AddCommon(*wait, true);
  wait_args->timeout_option =
      wait->add_option("--timeout", wait_args->timeout,
                       "Give up after D (0: check once). Default: no limit")
          ->type_name("D");
  chosen.push_back({wait, false, [wait_args](const Context& context) {
                      return RunWait(*wait_args, context);
                    }});

  CLI::App* count = app->add_subcommand(
      "count", "Print the count a latch has left (0: open)");
  formatter.SetSynopsis(count, "NAME");
  count->footer(ExitStatusFooter("", "printed", "no such latch"));
  auto count_args = AddCommon(*count, false);
  chosen.push_back({count, false, [count_args](const Context&) {
                      return RunCount(*count_args);
                    }});

  Subcommand subcommand;
  subcommand.app = app;
  subcommand.run = [chosen](const Context& context) {
    for (const Subcommand& one : chosen) {
      if (one.app->parsed()) return one.run(context);
    }
    throw UsageError("a latch subcommand is required");
  };
  return subcommand;
}

}  // namespace lockfleet::cli
