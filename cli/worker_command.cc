#include "worker_command.h"

#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "fleet.h"
#include "lockfleet/config/config.h"
#include "lockfleet/config/error.h"
#include "lockfleet/lockcore/error.h"
#include "lockfleet/worker/builtin_handlers.h"
#include "systemd_notify.h"

namespace lockfleet::cli {
namespace {

constexpr char kWorkerDescription[] =
    "Run one process of the job-worker fleet: take jobs from the Kafka jobs "
    "topic and the configured schedules, run each under its lock, serve "
    "/metrics, /livez and /readyz. Start as many as you like, on any machines.";

constexpr char kWorkerFooter[] =
    R"(Everything comes from the config file (see 'lockfleet config example').
The process runs until SIGTERM or SIGINT, then shuts down gracefully: it
stops taking jobs, gives running ones worker.grace_period to finish (then
cancels them and hands them back to the fleet), releases its locks, commits
the jobs-topic offsets of finished jobs and flushes its unlock events.

A second SIGTERM or SIGINT during that shutdown exits at once (status 1):
running jobs are redelivered and their locks run out after locks.lease. So
does a shutdown still unfinished 30 s after the grace period (a handler that
ignores cancellation, a Kafka broker that is gone).

Once serving, it prints one line on stdout:
  ready worker=ID metrics=URL|- health=URL|-

Exit status:
  0   stopped by SIGTERM or SIGINT after a graceful shutdown
  1   a second signal during the shutdown, or the shutdown overran the
      grace period by 30 s: exited at once
  2   bad arguments or config (the errors name FILE:LINE:COL and the key),
      or a listen address that is malformed or in use
  69  Redis unreachable at start

Example:
  lockfleet worker --config /etc/lockfleet/worker.yaml)";

// How long shutdown may take beyond worker.grace_period (committing
// offsets, leaving the group, flushing unlock events) before the process
// exits regardless.
constexpr std::chrono::milliseconds kShutdownSlack{30000};

struct WorkerArgs {
  std::string config_path;
  FleetOverrides overrides;
};

// "; unlock events signed and checked (2 keys from $VAR)", or "" without a
// key. Where the keys came from, never what they are.
std::string EventKeySummary(const config::Config& config) {
  if (!config.kafka || config.kafka->event_keys.empty()) return "";
  const size_t keys = config.kafka->event_keys.size();
  const std::string source = config.kafka->event_key_env.empty()
                                 ? "file " + config.kafka->event_key_file
                                 : "$" + config.kafka->event_key_env;
  return "; unlock events signed and checked (" + std::to_string(keys) +
         (keys == 1 ? " key" : " keys") + " from " + source + ")";
}

int RunWorker(const WorkerArgs& args, const Context& context) {
  config::Config config;
  try {
    config = config::LoadFile(args.config_path);
  } catch (const config::ConfigErrors& e) {
    for (const config::Diagnostic& d : e.errors()) PrintError(d.ToString());
    return kExitUsage;
  }
  const Logger logger(config.logging);
  std::signal(SIGPIPE, SIG_IGN);
  // Under systemd (Type=notify): READY=1 once serving, WATCHDOG=1 while the
  // process runs and drains (what /livez answers: the process runs; a Redis
  // outage is no reason to be restarted), STOPPING=1 when the drain starts.
  const SystemdNotifier systemd;
  if (!systemd.error().empty()) {
    logger.Log(config::LogLevel::kWarning, "worker",
               "not notifying systemd: " + systemd.error());
  }

  std::mutex mu;
  std::condition_variable signalled;
  int stop_signal = 0;  // guarded by mu
  ScopedSignalHandler on_signal(context.signals, [&](int signal) {
    std::lock_guard lock(mu);
    if (stop_signal == 0) {
      stop_signal = signal;
    } else {
      // The operator insists: leave now. Nothing is lost — running jobs are
      // redelivered and their locks run out after locks.lease.
      logger.Log(config::LogLevel::kWarning, "worker",
                 "second signal: exiting at once; running jobs will be "
                 "redelivered");
      std::_Exit(1);
    }
    signalled.notify_all();
  });

  auto handlers = std::make_shared<worker::HandlerRegistry>();
  worker::RegisterBuiltinHandlers(*handlers);
  std::unique_ptr<Fleet> fleet;
  try {
    fleet = std::make_unique<Fleet>(config, args.overrides, handlers, logger);
  } catch (const config::ConfigError& e) {
    PrintError(args.config_path + ": " + e.what());
    return kExitUsage;
  } catch (const Error& e) {
    PrintError(e.what());
    return e.code() == ErrorCode::kInvalidArgument ? kExitUsage
                                                   : kExitUnavailable;
  }
  fleet->Start();
  const auto or_dash = [](const std::string& url) {
    return url.empty() ? std::string("-") : url;
  };
  std::cout << "ready worker=" << fleet->worker_id()
            << " metrics=" << or_dash(fleet->metrics_url())
            << " health=" << or_dash(fleet->health_url()) << std::endl;
  logger.Log(config::LogLevel::kInfo, "worker",
             "started " + std::to_string(config.worker.threads) +
                 " threads; jobs topic " +
                 (config.worker.sources.kafka_jobs.enabled ? "on" : "off") +
                 ", " + std::to_string(config.worker.sources.schedules.size()) +
                 " schedules" + EventKeySummary(config));
  if (!systemd.Notify("READY=1\nSTATUS=serving with " +
                      std::to_string(config.worker.threads) + " threads") &&
      systemd.enabled()) {
    logger.Log(config::LogLevel::kWarning, "worker",
               "could not tell systemd READY=1 ($NOTIFY_SOCKET does not "
               "take it); a Type=notify unit will time out the start");
  }
  // The watchdog pings, from a thread of their own until the drain is over
  // (it may outlast the watchdog; the backstop below bounds it). They never
  // take mu: a notify socket that stops taking them must never hold up the
  // signal handler.
  std::jthread pings;
  if (const auto interval = systemd.watchdog_interval()) {
    pings = std::jthread([&systemd, interval](std::stop_token stop) {
      std::mutex m;
      std::condition_variable_any cv;
      std::unique_lock lock(m);
      while (!cv.wait_for(lock, stop, *interval, [] { return false; }) &&
             !stop.stop_requested()) {
        systemd.Notify("WATCHDOG=1");
      }
    });
  }
  {
    std::unique_lock lock(mu);
    signalled.wait(lock, [&] { return stop_signal != 0; });
  }
  logger.Log(config::LogLevel::kInfo, "worker",
             std::string("shutting down (") + strsignal(stop_signal) + ")");
  systemd.Notify("STOPPING=1\nSTATUS=draining");
  // Backstop: shutdown must end even if something below it does not (a
  // handler ignoring its stop token, a Kafka client waiting on a broker
  // that is gone). Past the grace period plus kShutdownSlack the process
  // exits at once; nothing is lost (at-least-once: unfinished jobs are
  // redelivered, their locks run out after locks.lease).
  std::thread backstop(
      [&logger, deadline = config.worker.grace_period + kShutdownSlack] {
        std::this_thread::sleep_for(deadline);
        logger.Log(config::LogLevel::kError, "worker",
                   "shutdown did not finish within grace_period + " +
                       std::to_string(kShutdownSlack.count()) +
                       " ms: exiting at once");
        std::_Exit(1);
      });
  backstop.detach();
  fleet->Shutdown();
  fleet.reset();
  pings = {};
  logger.Log(config::LogLevel::kInfo, "worker", "stopped");
  return kExitOk;
}

}  // namespace

Subcommand AddWorkerCommand(CLI::App& parent, HelpFormatter& formatter) {
  CLI::App* app = parent.add_subcommand("worker", kWorkerDescription);
  formatter.SetSynopsis(app,
                        "--config FILE [--id ID] [--metrics-listen "
                        "HOST:PORT] [--health-listen HOST:PORT]");
  app->footer(kWorkerFooter);
  auto args = std::make_shared<WorkerArgs>();
  app->add_option("--config", args->config_path, "The deployment config")
      ->required()
      ->type_name("FILE");
  app->add_option("--id", args->overrides.worker_id,
                  "This worker's name in logs, lock owners and schedule "
                  "history, 1 to 128 bytes. Default: HOST:PID")
      ->type_name("ID")
      ->check(CLI::Validator(
          [](const std::string& id) -> std::string {
            // Lock owner tokens ("<id>/<16 hex>:<n>", job holds
            // "...:job:<n>") must fit the hold journal's 256 bytes.
            if (id.empty() || id.size() > 128)
              return "--id must be 1 to 128 bytes (got " +
                     std::to_string(id.size()) + ")";
            return "";
          },
          "1-128 bytes"));
  app->add_option("--metrics-listen", args->overrides.metrics_listen,
                  "Serve /metrics here instead of metrics.listen (port 0: any)")
      ->type_name("HOST:PORT");
  app->add_option("--health-listen", args->overrides.health_listen,
                  "Serve /livez and /readyz here instead of "
                  "worker.health_listen")
      ->type_name("HOST:PORT");
  Subcommand subcommand;
  subcommand.app = app;
  subcommand.run = [args](const Context& context) {
    return RunWorker(*args, context);
  };
  return subcommand;
}

}  // namespace lockfleet::cli
