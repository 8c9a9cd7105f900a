#include "jobs_command.h"

#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "config_options.h"
#include "jobs_dead_command.h"
#include "jobs_status_command.h"
#include "lockfleet/config/config.h"
#include "lockfleet/config/error.h"
#include "lockfleet/lockcore/error.h"
#include "lockfleet/notifier/job_topic.h"
#include "lockfleet/worker/builtin_handlers.h"
#include "lockfleet/worker/job.h"

namespace lockfleet::cli {
namespace {

constexpr char kJobsDescription[] =
    "Work with the jobs: feed the jobs topic, see how the fleet stands on it, "
    "and deal with dead letters.";
constexpr char kProduceDescription[] =
    "Produce jobs to the jobs topic: JSON lines from FILE (or stdin), or a "
    "generated flash sale.";
constexpr char kProduceFooter[] =
    R"(Each input line is one job, {"id","lock","type","payload"}, optionally
with "limit" and "lock_mode" (see docs/worker.md); blank lines and lines
starting with '#' are skipped. Every
line is checked before anything is sent, so a bad file sends nothing. Records
are keyed by the job's lock. --flash-sale N generates N inventory.purchase
jobs ("order-<i>" on "product:<i mod --products>", buyer "buyer-<i>")
instead of reading input.

The broker comes from --config (kafka.bootstrap, kafka.jobs_topic, and its
properties) or from --bootstrap/--topic.

Exit status:
  0   every job delivered (acknowledged by the broker)
  2   bad arguments, config or input line (named with its line number)
  69  some jobs were not delivered within --timeout (broker down?)

Examples:
  lockfleet jobs produce --config fleet.yaml jobs.jsonl
  lockfleet jobs produce --bootstrap 127.0.0.1:9092 --flash-sale 2000 --products 10)";

// Generated jobs are built in memory (about 150 bytes each) before sending.
constexpr int kMaxFlashSale = 10'000'000;

struct ProduceArgs {
  std::string config_path;
  std::string bootstrap;
  std::string topic = "lockfleet.jobs";
  std::string input;   // "" or "-": stdin
  int flash_sale = 0;  // 0: not given
  int products = 10;
  int timeout_s = 30;
};

std::vector<std::string> ReadJobs(std::istream& in, const std::string& name) {
  std::vector<std::string> records;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const size_t start = line.find_first_not_of(" \t\r");
    if (start == std::string::npos || line[start] == '#') continue;
    try {
      records.push_back(worker::EncodeJob(worker::ParseJob(line)));
    } catch (const worker::JobError& e) {
      throw UsageError(name + ":" + std::to_string(number) + ": " + e.what());
    }
  }
  return records;
}

int RunProduce(const ProduceArgs& args) {
  notifier::JobProducerOptions options;
  if (!args.config_path.empty()) {
    try {
      const config::Config config = config::LoadFile(args.config_path);
      if (!config.kafka) {
        throw UsageError(args.config_path + ": has no kafka section");
      }
      options = JobProducerOptionsFrom(*config.kafka);
    } catch (const config::ConfigErrors& e) {
      for (const config::Diagnostic& d : e.errors()) PrintError(d.ToString());
      return kExitUsage;
    }
  } else if (args.bootstrap.empty()) {
    throw UsageError("give --config FILE or --bootstrap HOST:PORT");
  } else {
    options.bootstrap = args.bootstrap;
    options.topic = args.topic;
  }
  if (args.timeout_s < 1) throw UsageError("--timeout must be >= 1");
  // Checked before anything is built: a negative count used to read stdin
  // instead, and a huge one to build every record in memory first.
  if (args.flash_sale < 0 || args.flash_sale > kMaxFlashSale) {
    throw UsageError("--flash-sale " + std::to_string(args.flash_sale) +
                     ": must be 1.." + std::to_string(kMaxFlashSale));
  }

  std::vector<std::pair<std::string, std::string>> records;  // key, value
  if (args.flash_sale > 0) {
    if (args.products < 1) throw UsageError("--products must be >= 1");
    for (int i = 0; i < args.flash_sale; ++i) {
      const worker::Job job = worker::FlashSaleJob(i, args.products);
      records.emplace_back(job.lock, worker::EncodeJob(job));
    }
  } else {
    std::vector<std::string> jobs;
    if (args.input.empty() || args.input == "-") {
      jobs = ReadJobs(std::cin, "stdin");
    } else {
      std::ifstream file(args.input);
      if (!file) throw UsageError(args.input + ": cannot open");
      jobs = ReadJobs(file, args.input);
    }
    for (std::string& job : jobs) {
      std::string lock = worker::ParseJob(job).lock;
      records.emplace_back(std::move(lock), std::move(job));
    }
  }

  options.message_timeout = std::chrono::seconds(args.timeout_s);
  notifier::JobProducer producer(options);
  for (const auto& [key, value] : records) producer.Produce(key, value);
  const uint64_t undelivered =
      producer.Flush(std::chrono::seconds(args.timeout_s));
  if (undelivered != 0) {
    PrintError(std::to_string(undelivered) + " of " +
               std::to_string(records.size()) + " jobs not delivered to " +
               options.topic + " at " + options.bootstrap);
    return kExitUnavailable;
  }
  std::cout << "produced " << records.size() << " jobs to " << options.topic
            << "\n";
  return kExitOk;
}

}  // namespace

Subcommand AddJobsCommand(CLI::App& parent, HelpFormatter& formatter) {
  CLI::App* app = parent.add_subcommand("jobs", kJobsDescription);
  app->require_subcommand(1);
  CLI::App* produce = app->add_subcommand("produce", kProduceDescription);
  formatter.SetSynopsis(produce,
                        "(--config FILE | --bootstrap HOST:PORT [--topic T]) "
                        "[FILE | --flash-sale N [--products P]]");
  produce->footer(kProduceFooter);
  auto args = std::make_shared<ProduceArgs>();
  produce->add_option("--config", args->config_path, "The deployment config")
      ->type_name("FILE");
  produce->add_option("--bootstrap", args->bootstrap, "Kafka bootstrap servers")
      ->type_name("HOST:PORT");
  produce
      ->add_option("--topic", args->topic,
                   "Jobs topic (with --bootstrap). Default: lockfleet.jobs")
      ->type_name("T");
  produce
      ->add_option("input", args->input,
                   "JSON lines, one job each; '-' or none: stdin")
      ->type_name("FILE");
  produce
      ->add_option("--flash-sale", args->flash_sale,
                   "Generate N inventory.purchase jobs instead (1..10000000)")
      ->type_name("N");
  produce
      ->add_option("--products", args->products,
                   "Products for --flash-sale. Default: 10")
      ->type_name("P");
  produce
      ->add_option("--timeout", args->timeout_s,
                   "Seconds to wait for delivery. Default: 30")
      ->type_name("S");
  std::vector<Subcommand> chosen;
  chosen.push_back({produce, false, [args](const Context&) {
                      try {
                        return RunProduce(*args);
                      } catch (const Error& e) {
                        PrintError(e.what());
                        return e.code() == ErrorCode::kInvalidArgument
                                   ? kExitUsage
                                   : kExitUnavailable;
                      }
                    }});
  for (Subcommand& dead : AddDeadCommands(*app, formatter)) {
    chosen.push_back(std::move(dead));
  }
  chosen.push_back(AddStatusCommand(*app, formatter));
  Subcommand subcommand;
  subcommand.app = app;
  subcommand.run = [chosen](const Context& context) {
    for (const Subcommand& one : chosen) {
      if (one.app->parsed()) return one.run(context);
    }
    throw UsageError("a jobs subcommand is required");
  };
  return subcommand;
}

}  // namespace lockfleet::cli
