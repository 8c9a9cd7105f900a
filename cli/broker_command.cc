#include "broker_command.h"

#include <algorithm>
#include <condition_variable>
#include <csignal>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lockfleet/lockcore/error.h"
#include "lockfleet/notifier/embedded_broker.h"

namespace lockfleet::cli {
namespace {

constexpr char kUnlockTopic[] = "lockfleet.unlock";
constexpr int kMaxPartitions = 10000;  // EmbeddedBroker's own limit

constexpr char kBrokerDescription[] =
    "Serve a throwaway Kafka broker on 127.0.0.1 for development, demos and "
    "tests (in memory, one process, no replication; production uses a real "
    "Kafka cluster).";

constexpr char kBrokerFooter[] =
    R"(FOR DEVELOPMENT, DEMOS AND TESTS ONLY. This is librdkafka's mock cluster:
one broker in this process, everything in memory, no replication, no
persistence. When it stops, every topic and offset is gone. In production,
point 'lockfleet lock --kafka' at a real Kafka cluster instead; lockfleet
works the same with either.

The first line on stdout is exactly "bootstrap: 127.0.0.1:PORT" (flushed at
once), the address to give 'lockfleet lock --kafka'. The broker creates the
topic lockfleet.unlock and every --topic, each with --partitions partitions,
and runs until SIGINT or SIGTERM.

With --port, clients can reconnect to a broker restarted on the same port
(its topics start empty again; lockfleet copes with that). Without it the
port changes on every start.

Exit status:
  0   stopped by SIGINT or SIGTERM
  2   bad arguments: port out of range or already in use, partitions < 1
  69  the broker could not start

Example:
  lockfleet broker --port 9092 &
  lockfleet lock --kafka 127.0.0.1:9092 nightly-backup -- ./backup.sh)";

struct BrokerArgs {
  int port = 0;
  int partitions = 4;
  std::vector<std::string> topics;
};

notifier::EmbeddedBrokerOptions Validate(const BrokerArgs& args) {
  if (args.port < 0 || args.port > 65535) {
    throw UsageError("--port " + std::to_string(args.port) +
                     ": must be 1..65535 (or 0 for any free port)");
  }
  if (args.partitions < 1 || args.partitions > kMaxPartitions) {
    throw UsageError("--partitions " + std::to_string(args.partitions) +
                     ": must be 1.." + std::to_string(kMaxPartitions));
  }
  notifier::EmbeddedBrokerOptions options;
  options.port = args.port;
  options.partitions = args.partitions;
  options.topics = {kUnlockTopic};
  for (const std::string& topic : args.topics) {
    if (topic.empty()) throw UsageError("--topic: name must not be empty");
    if (std::find(options.topics.begin(), options.topics.end(), topic) ==
        options.topics.end()) {
      options.topics.push_back(topic);
    }
  }
  return options;
}

int RunBroker(const BrokerArgs& args, const Context& context) {
  const notifier::EmbeddedBrokerOptions options = Validate(args);
  // The relays write to sockets whose peer may be gone; never die of it.
  std::signal(SIGPIPE, SIG_IGN);

  std::mutex mu;
  std::condition_variable stopped;
  int stop_signal = 0;  // guarded by mu
  ScopedSignalHandler on_signal(context.signals, [&](int signal) {
    std::lock_guard<std::mutex> lock(mu);
    if (stop_signal == 0) stop_signal = signal;
    stopped.notify_all();
  });

  std::unique_ptr<notifier::EmbeddedBroker> broker;
  try {
    broker = std::make_unique<notifier::EmbeddedBroker>(options);
  } catch (const Error& e) {
    // kInvalidArgument here is the port being taken.
    if (e.code() == ErrorCode::kInvalidArgument) {
      PrintError("--port " + std::to_string(options.port) + ": " + e.what());
      return kExitUsage;
    }
    PrintError(e.what());
    return kExitUnavailable;
  }
  std::cout << "bootstrap: " << broker->bootstrap() << std::endl;

  std::string topics;
  for (const std::string& topic : options.topics) {
    topics += (topics.empty() ? "" : ", ") + topic;
  }
  PrintError(
      "Kafka broker for development, demos and tests (in memory, one "
      "process, no replication) serving " +
      topics + " with " + std::to_string(options.partitions) +
      " partitions each; stop it with SIGINT or SIGTERM");

  {
    std::unique_lock<std::mutex> lock(mu);
    stopped.wait(lock, [&] { return stop_signal != 0; });
  }
  broker.reset();
  return kExitOk;
}

}  // namespace

Subcommand AddBrokerCommand(CLI::App& parent, HelpFormatter& formatter) {
  CLI::App* app = parent.add_subcommand("broker", kBrokerDescription);
  formatter.SetSynopsis(app, "[--port P] [--partitions N] [--topic NAME ...]");
  app->footer(kBrokerFooter);

  auto args = std::make_shared<BrokerArgs>();
  app->add_option("--port", args->port,
                  "TCP port on 127.0.0.1 to serve; restarting on the same port "
                  "lets clients reconnect. Default: 0, any free port")
      ->type_name("P");
  app->add_option("--partitions", args->partitions,
                  "Partitions of each topic. Default: 4")
      ->type_name("N");
  app->add_option("--topic", args->topics,
                  "Another topic to create, besides lockfleet.unlock; repeat "
                  "for more")
      ->type_name("NAME")
      ->allow_extra_args(false);  // one NAME per --topic

  Subcommand subcommand;
  subcommand.app = app;
  subcommand.takes_trailing_args = false;
  subcommand.run = [args](const Context& context) {
    return RunBroker(*args, context);
  };
  return subcommand;
}

}  // namespace lockfleet::cli
