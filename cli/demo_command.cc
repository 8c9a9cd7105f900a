#include "demo_command.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "child_process.h"
#include "demo_support.h"
#include "lockfleet/lockcore/redis_client.h"
#include "lockfleet/metrics/http.h"
#include "lockfleet/metrics/scrape.h"
#include "lockfleet/notifier/embedded_broker.h"
#include "lockfleet/notifier/job_topic.h"
#include "lockfleet/worker/builtin_handlers.h"
#include "lockfleet/worker/job.h"
#include "lockfleet/worker/runner.h"
#include "option_range.h"
#include "private_redis.h"
#include "supervised_process.h"

namespace lockfleet::cli {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

constexpr int kJobPartitions = 8;  // of each embedded topic

// A fresh random event key (32 bytes, hex) in a file only we can read.
bool WriteEventKey(const fs::path& path) {
  std::random_device random;
  std::string key;
  for (int i = 0; i < 8; ++i) {
    char word[9];
    std::snprintf(word, sizeof(word), "%08x", random());
    key += word;
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return false;
  key += '\n';
  const bool written =
      ::write(fd, key.data(), key.size()) == static_cast<ssize_t>(key.size());
  ::close(fd);
  return written;
}

constexpr char kDemoDescription[] =
    "Run the flash-sale demo: an embedded Kafka broker, a private "
    "redis-server and N worker processes compete for purchase jobs; prints "
    "a summary and exits 0 only if nothing was oversold and every job ran.";

constexpr char kDemoFooter[] =
    R"(Nothing needs to be running: the demo starts a Kafka broker inside this
process (librdkafka's mock cluster), a private redis-server (from PATH, or
$LOCKFLEET_REDIS_SERVER) on a unix socket in a temporary directory, and
--workers 'lockfleet worker' processes. It seeds --products products with
--units units each, produces --jobs purchase jobs round-robin over them, and
waits until every job has finished. While it runs, each worker serves
/metrics; the URLs are printed. Ctrl-C stops everything it started.

Invariants checked (exit 0 only if all hold): no product oversold (stock
never below 0, stock + sold = units); every job finished exactly once
(sold + sold out = jobs; each sale recorded once); no job failed or
dead-lettered; every worker shut down cleanly on SIGTERM.

Exit status:
  0   every invariant held
  1   an invariant failed, or the jobs did not finish within --timeout
  2   bad arguments
  69  redis-server or the broker could not be started
  130 interrupted (Ctrl-C); everything started was stopped)";

struct DemoArgs {
  int workers = 4;
  int threads = 4;
  int jobs = 2000;
  int products = 10;
  int units = 100;
  int timeout_s = 300;
  bool keep = false;
};

void Check(const DemoArgs& args) {
  CheckRange("--workers", args.workers, 1, 64);
  CheckRange("--threads", args.threads, 1, 256);
  CheckRange("--jobs", args.jobs, 1, 10'000'000);
  CheckRange("--products", args.products, 1, 100'000);
  CheckRange("--units", args.units, 0, 1'000'000'000);
  CheckRange("--timeout", args.timeout_s, 1, 86'400);
}

// The state shared with the signal handler.
struct Interrupt {
  std::atomic<bool> requested{false};
};

class Demo {
 public:
  Demo(const DemoArgs& args, Interrupt& interrupt)
      : args_(args), interrupt_(interrupt) {}

  int Run();

 private:
  bool Interrupted() const { return interrupt_.requested.load(); }
  int Setup();
  int Sell();
  bool WaitForGroup(std::chrono::seconds timeout);
  int Summarize(double elapsed_s);
  int Teardown(int status);

  const DemoArgs& args_;
  Interrupt& interrupt_;
  fs::path dir_;
  std::unique_ptr<SupervisedProcess> redis_server_;
  std::shared_ptr<RedisClient> redis_;
  std::unique_ptr<notifier::EmbeddedBroker> broker_;
  std::vector<std::unique_ptr<SupervisedProcess>> workers_;
  std::vector<Endpoint> endpoints_;
  long long commands_before_ = 0;
};

int Demo::Setup() {
  char pattern[] = "/tmp/lockfleet-demo-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) {
    PrintError(std::string("mkdtemp: ") + std::strerror(errno));
    return kExitUnavailable;
  }
  dir_ = pattern;

  const std::string redis_server = FindOnPath("redis-server");
  if (redis_server.empty()) {
    PrintError(
        "redis-server not found on PATH (Debian: apt install "
        "redis-server; or set LOCKFLEET_REDIS_SERVER)");
    return kExitUnavailable;
  }
  const std::string socket = PrivateRedisSocket(dir_);
  redis_server_ = StartPrivateRedis(redis_server, dir_);
  redis_ = std::make_shared<RedisClient>(
      RedisOptions{.url = "unix://" + socket, .pool_size = 2});
  if (std::string error;
      !WaitForRedis(*redis_, redis_server_.get(), seconds(20), &error)) {
    PrintError("redis-server did not start: " + error + "\n" +
               Tail(dir_ / "redis.log"));
    return kExitUnavailable;
  }

  broker_ = std::make_unique<notifier::EmbeddedBroker>(
      notifier::EmbeddedBrokerOptions{
          .partitions = kJobPartitions,
          .topics = {"lockfleet.unlock", "lockfleet.jobs"}});

  // One key for the whole fleet, as a deployment's secret would be: the
  // workers sign their unlock events and ignore any others.
  const fs::path event_key = dir_ / "event-key";
  if (!WriteEventKey(event_key)) {
    PrintError("cannot write " + event_key.string() + ": " +
               std::strerror(errno));
    return kExitUnavailable;
  }

  const fs::path config = dir_ / "fleet.yaml";
  // The config file's text, given the workers' metrics.targets ("" first).
  const auto fleet_yaml = [&](const std::string& targets) {
    std::ostringstream out;
    out << "# Written by 'lockfleet demo': one file drives every worker.\n"
        << "redis:\n  url: unix://" << socket
        << "\n  pool_size: " << args_.threads + 2 << "\n"
        << "kafka:\n  bootstrap: " << broker_->bootstrap()
        << "\n  fetch_wait: 1ms\n  event_key_file: " << event_key.string()
        << "\n"
        << "locks:\n  lease: 10s\n"
        << "worker:\n  threads: " << args_.threads << "\n  grace_period: 5s\n"
        << "  sources:\n    kafka_jobs:\n      enabled: true\n"
        << "      group: lockfleet-demo\n"
        << "metrics:\n  listen: 127.0.0.1:0\n";
    if (!targets.empty()) out << "  targets: [" << targets << "]\n";
    out << "logging:\n  level: warning\n";
    return out.str();
  };
  std::ofstream(config) << fleet_yaml("");

  std::cout << "lockfleet demo: flash sale of " << args_.jobs
            << " purchase jobs over " << args_.products << " products x "
            << args_.units << " units; " << args_.workers << " workers x "
            << args_.threads << " threads\n"
            << "  redis-server  unix://" << socket << "\n"
            << "  kafka broker  " << broker_->bootstrap()
            << " (embedded)\n  config        " << config.string()
            << "\n  event key     " << event_key.string()
            << " (unlock events signed)\n";

  const std::string self = SelfExe();
  for (int i = 0; i < args_.workers; ++i) {
    const std::string id = "worker-" + std::to_string(i + 1);
    workers_.push_back(std::make_unique<SupervisedProcess>(
        std::vector<std::string>{self, "worker", "--config", config.string(),
                                 "--id", id},
        (dir_ / (id + ".log")).string(), true));
  }
  for (size_t i = 0; i < workers_.size(); ++i) {
    std::optional<std::string> ready;
    for (auto deadline = steady_clock::now() + seconds(60);
         !ready && !Interrupted() && steady_clock::now() < deadline;) {
      ready = workers_[i]->ReadLine(milliseconds(200));
      if (!ready && workers_[i]->WaitFor(milliseconds(0))) break;  // died
    }
    if (Interrupted()) return kExitSignalBase + SIGINT;
    std::optional<Endpoint> endpoint;
    if (ready) endpoint = ParseMetricsUrl(*ready);
    if (!endpoint) {
      PrintError("worker-" + std::to_string(i + 1) + " did not start:\n" +
                 Tail(dir_ / ("worker-" + std::to_string(i + 1) + ".log")));
      return kExitUnavailable;
    }
    std::cout << "  worker-" << i + 1 << "      pid " << workers_[i]->pid()
              << ", metrics " << endpoint->url << "\n";
    endpoints_.push_back(*endpoint);
  }
  // The workers have read the file; now it also names their endpoints, for
  // `lockfleet top` (which finds the running demo through the registry).
  std::string targets;
  for (const Endpoint& endpoint : endpoints_) {
    targets += (targets.empty() ? "" : ", ") + endpoint.address;
  }
  const fs::path written = dir_ / "fleet.yaml.new";
  std::ofstream(written) << fleet_yaml(targets);
  std::error_code ec;
  fs::rename(written, config, ec);
  if (!ec && RegisterDemo(config)) {
    std::cout << "  watch it      lockfleet top   (in another terminal)\n";
  }
  std::cout << std::flush;
  return kExitOk;
}

// Waits until the workers' consumer group is stable — every partition of the
// jobs topic assigned, every worker holding some — so that the sale is timed
// without the group's joins (a rebalance pauses consumption for seconds).
// Returns false when interrupted or after `timeout` (the sale then simply
// starts; the group still forms).
bool Demo::WaitForGroup(std::chrono::seconds timeout) {
  const auto deadline = steady_clock::now() + timeout;
  int stable_rounds = 0;
  while (!Interrupted() && steady_clock::now() < deadline) {
    double total = 0;
    bool each = true;
    for (const Endpoint& endpoint : endpoints_) {
      const double partitions = metrics::SumSamples(
          ScrapeAll({endpoint}), "lockfleet_jobs_consumer_partitions");
      total += partitions;
      each = each && partitions >= 1;
    }
    const bool stable =
        total == kJobPartitions &&
        (each || static_cast<int>(endpoints_.size()) > kJobPartitions);
    stable_rounds = stable ? stable_rounds + 1 : 0;
    if (stable_rounds >= 3) return true;  // unchanged for ~1.5 s
    std::this_thread::sleep_for(milliseconds(500));
  }
  return false;
}

int Demo::Sell() {
  for (int p = 0; p < args_.products; ++p) {
    worker::SeedStock(*redis_, "lockfleet", "product:" + std::to_string(p),
                      args_.units);
  }
  commands_before_ = TotalCommands(*redis_);
  notifier::JobProducer producer(notifier::JobProducerOptions{
      .bootstrap = broker_->bootstrap(), .topic = "lockfleet.jobs"});
  for (int i = 0; i < args_.jobs; ++i) {
    const worker::Job job = worker::FlashSaleJob(i, args_.products);
    // Keyed by the job id, not the lock: jobs of one product spread over
    // every partition and so every worker, which is what a flash sale
    // looks like (and what makes the lock necessary). `jobs produce` keys
    // by lock, which keeps one product's jobs on one worker.
    producer.Produce(job.id, worker::EncodeJob(job));
  }
  if (const uint64_t undelivered = producer.Flush(seconds(30));
      undelivered != 0) {
    PrintError(std::to_string(undelivered) + " jobs could not be produced");
    return 1;
  }
  std::cout << "produced " << args_.jobs << " jobs to lockfleet.jobs\n"
            << std::flush;
  return kExitOk;
}

int Demo::Run() {
  int status = Setup();
  if (status != kExitOk || Interrupted()) return Teardown(status);
  std::cout << "waiting for the workers to join the consumer group ...\n"
            << std::flush;
  WaitForGroup(seconds(60));
  if (Interrupted()) return Teardown(kExitSignalBase + SIGINT);
  const auto started = steady_clock::now();
  status = Sell();
  if (status != kExitOk) return Teardown(status);

  const bool tty = ::isatty(STDOUT_FILENO) != 0;
  const auto deadline = started + seconds(args_.timeout_s);
  auto next_line = steady_clock::now();
  while (!Interrupted()) {
    const std::vector<metrics::Sample> samples = ScrapeAll(endpoints_);
    const double done = Jobs(samples, "ok") + Jobs(samples, "rejected") +
                        Jobs(samples, "failed") + Jobs(samples, "timeout");
    const double elapsed =
        std::chrono::duration<double>(steady_clock::now() - started).count();
    if (tty || steady_clock::now() >= next_line || done >= args_.jobs) {
      char line[160];
      std::snprintf(line, sizeof(line),
                    "%s  jobs %6.0f/%d  sold %6.0f  sold out %6.0f  %5.1f s",
                    tty ? "\r" : "", done, args_.jobs, Jobs(samples, "ok"),
                    Jobs(samples, "rejected"), elapsed);
      std::cout << line << (tty ? "" : "\n") << std::flush;
      next_line = steady_clock::now() + seconds(2);
    }
    if (done >= args_.jobs) {
      if (tty) std::cout << "\n";
      return Teardown(Summarize(elapsed));
    }
    for (size_t i = 0; i < workers_.size(); ++i) {
      if (std::optional<int> exited = workers_[i]->WaitFor(milliseconds(0))) {
        PrintError("worker-" + std::to_string(i + 1) + " died (" +
                   DescribeWaitStatus(*exited) + "):\n" +
                   Tail(dir_ / ("worker-" + std::to_string(i + 1) + ".log")));
        return Teardown(1);
      }
    }
    if (steady_clock::now() > deadline) {
      PrintError("the jobs did not finish within --timeout " +
                 std::to_string(args_.timeout_s) + "s");
      return Teardown(1);
    }
    std::this_thread::sleep_for(milliseconds(200));
  }
  return Teardown(kExitSignalBase + SIGINT);
}

int Demo::Summarize(double elapsed_s) {
  const std::vector<metrics::Sample> s = ScrapeAll(endpoints_);
  const long long commands = TotalCommands(*redis_) - commands_before_;
  std::vector<std::string> broken;

  const double ok = Jobs(s, "ok"), rejected = Jobs(s, "rejected"),
               duplicate = Jobs(s, "duplicate"), failed = Jobs(s, "failed"),
               timeout = Jobs(s, "timeout");
  std::cout << "\nsummary\n";
  std::printf(
      "  jobs done       %.0f of %d: sold %.0f, sold out %.0f, "
      "duplicates skipped %.0f, failed %.0f, timed out %.0f\n",
      ok + rejected, args_.jobs, ok, rejected, duplicate, failed, timeout);
  if (ok + rejected != args_.jobs)
    broken.push_back("not every job finished once");
  if (failed + timeout != 0) broken.push_back("some jobs failed");

  int64_t sold_total = 0, oversold = 0;
  std::string per_product;
  for (int p = 0; p < args_.products; ++p) {
    const std::string product = "product:" + std::to_string(p);
    const worker::StockAudit audit =
        worker::AuditStock(*redis_, "lockfleet", product);
    sold_total += audit.sold;
    oversold += audit.oversold();
    if (!audit.consistent()) broken.push_back(product + " inconsistent");
    if (p < 12) {
      per_product += "  " + product + " " + std::to_string(audit.sold) + "/" +
                     std::to_string(audit.initial);
    }
  }
  if (args_.products > 12) per_product += "  ...";
  std::printf("  units sold     %s\n", per_product.c_str());
  std::printf("  oversold        %lld\n", static_cast<long long>(oversold));
  if (oversold != 0) broken.push_back("oversold");
  if (sold_total != static_cast<int64_t>(ok)) {
    broken.push_back("sales recorded (" + std::to_string(sold_total) +
                     ") != jobs that sold (" +
                     std::to_string(static_cast<int64_t>(ok)) + ")");
  }
  const long long dead =
      redis_->Execute({"LLEN", worker::JobRunner::DeadLetterKey("lockfleet")})
          .integer;
  if (dead != 0) broken.push_back(std::to_string(dead) + " dead-lettered jobs");

  const auto wait = metrics::HistogramBuckets(s, "lockfleet_lock_wait_seconds",
                                              {{"kind", "lock"}});
  const double acquired =
      metrics::SumSamples(s, "lockfleet_lock_acquisitions_total",
                          {{"kind", "lock"}, {"result", "acquired"}});
  const double contended =
      metrics::SumSamples(s, "lockfleet_lock_contended_total");
  std::printf(
      "  lock wait       p50 %s, p99 %s (%.0f acquisitions, %.0f%% "
      "contended)\n",
      Ms(metrics::HistogramQuantile(0.5, wait)).c_str(),
      Ms(metrics::HistogramQuantile(0.99, wait)).c_str(), acquired,
      acquired > 0 ? 100 * contended / acquired : 0.0);
  std::printf(
      "  wake-ups        kafka event %.0f, same process %.0f, spin %.0f, "
      "bound expired %.0f\n",
      metrics::SumSamples(s, "lockfleet_lock_wakeups_total",
                          {{"cause", "event"}}),
      metrics::SumSamples(s, "lockfleet_lock_wakeups_total",
                          {{"cause", "local"}}),
      metrics::SumSamples(s, "lockfleet_lock_wakeups_total",
                          {{"cause", "spin"}}),
      metrics::SumSamples(s, "lockfleet_lock_wakeups_total",
                          {{"cause", "bound"}}));
  const auto delay =
      metrics::HistogramBuckets(s, "lockfleet_notification_delay_seconds");
  std::printf(
      "  unlock events   published %.0f, consumed %.0f, malformed %.0f; "
      "delay p50 %s, p99 %s\n",
      metrics::SumSamples(s, "lockfleet_unlock_events_published_total"),
      metrics::SumSamples(s, "lockfleet_unlock_events_consumed_total"),
      metrics::SumSamples(s, "lockfleet_unlock_events_malformed_total"),
      Ms(metrics::HistogramQuantile(0.5, delay)).c_str(),
      Ms(metrics::HistogramQuantile(0.99, delay)).c_str());
  const double round_trips =
      metrics::SumSamples(s, "lockfleet_redis_round_trips_total");
  std::printf(
      "  redis           %.1f round trips and %.1f commands per "
      "acquisition (job work and scripts' own commands included)\n",
      acquired > 0 ? round_trips / acquired : 0.0,
      acquired > 0 ? commands / acquired : 0.0);
  std::printf("  elapsed         %.1f s, %.0f jobs/s\n", elapsed_s,
              elapsed_s > 0 ? args_.jobs / elapsed_s : 0.0);
  std::fflush(stdout);
  for (const std::string& problem : broken) {
    PrintError("invariant broken: " + problem);
  }
  return broken.empty() ? kExitOk : 1;
}

int Demo::Teardown(int status) {
  UnregisterDemo();
  // Graceful first: every worker gets SIGTERM at once, then each is waited
  // for; a worker that does not stop in time is killed and fails the demo.
  for (auto& worker : workers_) worker->Signal(SIGTERM);
  for (size_t i = 0; i < workers_.size(); ++i) {
    std::optional<int> exited = workers_[i]->WaitFor(seconds(20));
    if (!exited) {
      workers_[i]->Signal(SIGKILL);
      exited = workers_[i]->WaitFor(seconds(5));
    }
    if (exited && *exited != 0 && status == kExitOk) {
      PrintError("worker-" + std::to_string(i + 1) +
                 " did not shut down "
                 "cleanly (" +
                 DescribeWaitStatus(*exited) + "):\n" +
                 Tail(dir_ / ("worker-" + std::to_string(i + 1) + ".log")));
      status = 1;
    }
  }
  workers_.clear();
  redis_.reset();
  if (redis_server_) redis_server_->Stop(seconds(5));
  redis_server_.reset();
  broker_.reset();
  if (!dir_.empty()) {
    if (args_.keep || status != kExitOk) {
      std::cerr << "lockfleet: logs kept in " << dir_.string() << "\n";
    } else {
      std::error_code ec;
      fs::remove_all(dir_, ec);
    }
  }
  if (status == kExitOk) std::cout << "invariants: all hold\n";
  return status;
}

}  // namespace

Subcommand AddDemoCommand(CLI::App& parent, HelpFormatter& formatter) {
  CLI::App* app = parent.add_subcommand("demo", kDemoDescription);
  formatter.SetSynopsis(app,
                        "[--workers N] [--threads N] [--jobs N] "
                        "[--products N] [--units N] [--timeout S] [--keep]");
  app->footer(kDemoFooter);
  auto args = std::make_shared<DemoArgs>();
  app->add_option("--workers", args->workers, "Worker processes. Default: 4")
      ->type_name("N");
  app->add_option("--threads", args->threads, "Threads per worker. Default: 4")
      ->type_name("N");
  app->add_option("--jobs", args->jobs, "Purchase jobs. Default: 2000")
      ->type_name("N");
  app->add_option("--products", args->products, "Products. Default: 10")
      ->type_name("N");
  app->add_option("--units", args->units, "Units of each product. Default: 100")
      ->type_name("N");
  app->add_option("--timeout", args->timeout_s,
                  "Fail if the jobs have not finished after S seconds. "
                  "Default: 300")
      ->type_name("S");
  app->add_flag("--keep", args->keep,
                "Keep the temporary directory (config, logs) afterwards");
  Subcommand subcommand;
  subcommand.app = app;
  subcommand.run = [args](const Context& context) {
    Check(*args);
    Interrupt interrupt;
    ScopedSignalHandler on_signal(context.signals,
                                  [&](int) { interrupt.requested = true; });
    Demo demo(*args, interrupt);
    try {
      return demo.Run();
    } catch (const std::exception& e) {
      PrintError(e.what());
      return kExitUnavailable;
    }
  };
  return subcommand;
}

}  // namespace lockfleet::cli
