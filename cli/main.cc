// The `lockfleet` binary: dispatches to one subcommand per file (see
// command.h). main() is the composition root.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <exception>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "bench_command.h"
#include "broker_command.h"
#include "child_process.h"
#include "command.h"
#include "completion_command.h"
#include "config_command.h"
#include "demo_command.h"
#include "git_describe.h"
#include "jobs_command.h"
#include "latch_command.h"
#include "lock_command.h"
#include "locks_command.h"
#include "signals.h"
#include "top_command.h"
#include "worker_command.h"

namespace lockfleet::cli {
namespace {

constexpr char kMainFooter[] =
    R"(Run 'lockfleet SUBCOMMAND --help' for the options and exit statuses of a
subcommand. Common exit statuses: 2 bad arguments, 69 Redis unreachable,
75 lock not acquired in time, 76 lock lost, 128+S interrupted by signal S.)";

// Prints the one-line error, then the usage line of the (sub)command that was
// being parsed and where to find its full help, to stderr.
int UsageFailure(const CLI::App& app, const HelpFormatter& formatter,
                 const std::string& message) {
  const CLI::App* selected = &app;
  std::string name = app.get_name();
  while (!selected->get_subcommands().empty()) {
    selected = selected->get_subcommands().front();
    name += " " + selected->get_name();
  }
  PrintError(message);
  std::cerr << formatter.make_usage(selected, name) << "Run '" << name
            << " --help' for more information." << std::endl;
  return kExitUsage;
}

int Main(int argc, char** argv, SignalWatcher& signals,
         const sigset_t& signals_at_default) {
  // Everything after the first "--" belongs to the subcommand (the COMMAND
  // of `lock`), never to CLI11.
  std::vector<char*> front(argv, argv + argc);
  Context context{.signals = signals,
                  .signals_at_default = signals_at_default,
                  .has_trailing_args = false,
                  .trailing_args = {}};
  const auto split = std::find_if(
      front.begin() + (argc > 0 ? 1 : 0), front.end(),
      [](const char* arg) { return std::string_view(arg) == "--"; });
  if (split != front.end()) {
    context.has_trailing_args = true;
    context.trailing_args.assign(split + 1, front.end());
    front.erase(split, front.end());
  }

  CLI::App app("lockfleet: distributed locks on Redis", "lockfleet");
  auto formatter = std::make_shared<HelpFormatter>();
  app.formatter(formatter);
  app.require_subcommand(1);
  app.footer(kMainFooter);
  const std::string describe = LOCKFLEET_GIT_DESCRIBE;
  app.set_version_flag("--version",
                       std::string("lockfleet ") + LOCKFLEET_VERSION +
                           (describe.empty() ? "" : " (git " + describe + ")"));

  std::vector<Subcommand> subcommands;
  subcommands.push_back(AddLockCommand(app, *formatter));
  subcommands.push_back(AddSemaphoreCommand(app, *formatter));
  subcommands.push_back(AddLocksCommand(app, *formatter));
  subcommands.push_back(AddInspectCommand(app, *formatter));
  subcommands.push_back(AddUnlockCommand(app, *formatter));
  subcommands.push_back(AddLatchCommand(app, *formatter));
  subcommands.push_back(AddTopCommand(app, *formatter));
  subcommands.push_back(AddBrokerCommand(app, *formatter));
  subcommands.push_back(AddConfigCommand(app, *formatter));
  subcommands.push_back(AddWorkerCommand(app, *formatter));
  subcommands.push_back(AddJobsCommand(app, *formatter));
  subcommands.push_back(AddDemoCommand(app, *formatter));
  subcommands.push_back(AddBenchCommand(app, *formatter));
  subcommands.push_back(AddCompletionCommand(app, *formatter));

  try {
    app.parse(static_cast<int>(front.size()), front.data());
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return UsageFailure(app, *formatter, e.what());
  }

  for (const Subcommand& subcommand : subcommands) {
    if (!subcommand.app->parsed()) continue;
    if (context.has_trailing_args && !subcommand.takes_trailing_args) {
      return UsageFailure(app, *formatter,
                          "unexpected '--': '" + subcommand.app->get_name() +
                              "' takes no trailing arguments");
    }
    try {
      return subcommand.run(context);
    } catch (const UsageError& e) {
      return UsageFailure(app, *formatter, e.what());
    }
  }
  return UsageFailure(app, *formatter, "a subcommand is required");
}

}  // namespace
}  // namespace lockfleet::cli

int main(int argc, char** argv) {
  using lockfleet::cli::kExitSoftware;
  using lockfleet::cli::PrintError;
  try {
    // First the dispositions we inherited, then block the signals we handle,
    // before any other thread exists (see signals.h).
    const sigset_t signals_at_default = lockfleet::cli::SignalsAtDefault();
    lockfleet::cli::SignalWatcher signals;
    return lockfleet::cli::Main(argc, argv, signals, signals_at_default);
  } catch (const std::exception& e) {
    PrintError(std::string("internal error: ") + e.what());
  } catch (...) {
    PrintError("internal error: unknown exception");
  }
  return kExitSoftware;
}
