#include "lock_command.h"

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "lock_run.h"
#include "lockfleet/config/duration.h"
#include "lockfleet/lockcore/lock_client.h"

namespace lockfleet::cli {
namespace {

using std::chrono::milliseconds;

constexpr char kDefaultRedisUrl[] = "redis://127.0.0.1:6379";
constexpr char kRedisUrlVariable[] = "LOCKFLEET_REDIS";

constexpr char kLockFooter[] =
    R"(COMMAND runs with two extra environment variables: LOCKFLEET_NAME (the lock
name) and LOCKFLEET_FENCE (the fencing token of this grant; tokens strictly
increase per lock name, so a resource can reject writes from a stale holder).
While COMMAND runs, the lease is renewed in the background every lease/3, so
COMMAND may run far longer than the lease.

Signals: SIGINT, SIGTERM or SIGHUP while waiting cancel the wait (nothing is
left locked); while COMMAND runs they are forwarded to COMMAND, and lockfleet
waits for it, releases the lock and exits with COMMAND's status.

Exit status:
  N        COMMAND's own exit status (128+S if signal S killed it)
  2        bad arguments: missing NAME or COMMAND, bad duration, bad URL
  69       Redis unreachable, timed out or refused authentication
  75       lock not acquired within --wait; the message names the holder
  76       lock lost while COMMAND ran (lease expired or force-unlocked);
           COMMAND was sent SIGTERM
  126/127  COMMAND could not be executed / was not found
  128+S    signal S (SIGINT 130, SIGTERM 143) arrived while waiting

Environment:
  LOCKFLEET_REDIS  Redis URL used when --redis is not given

Example:
  lockfleet lock --wait 30s nightly-backup -- ./backup.sh --full)";

// Raw option values as CLI11 stores them.
struct LockArgs {
  std::string redis_url;
  std::string wait;
  std::string lease;
  std::string name;
  std::vector<std::string> stray;  // words after NAME and before "--"
  CLI::Option* name_option = nullptr;
  CLI::Option* redis_option = nullptr;
  CLI::Option* wait_option = nullptr;
  CLI::Option* lease_option = nullptr;
};

milliseconds ParseDurationOption(const std::string& flag,
                                 const std::string& text) {
  try {
    return config::ParseDuration(text);
  } catch (const config::ConfigError& e) {
    throw UsageError(flag + ": " + e.what());
  }
}

LockRequest Validate(const LockArgs& args, const Context& context) {
  LockRequest request;
  if (args.name_option->count() == 0) {
    throw UsageError(context.has_trailing_args
                         ? "missing lock NAME before '--'"
                         : "missing lock NAME and '-- COMMAND'");
  }
  request.name = args.name;
  if (request.name.empty()) throw UsageError("lock NAME must not be empty");
  if (!args.stray.empty()) {
    throw UsageError("unexpected " + Quoted(args.stray[0]) +
                     " after lock NAME " + Quoted(request.name) +
                     ": put '--' between NAME and COMMAND");
  }
  if (!context.has_trailing_args) {
    throw UsageError("missing '-- COMMAND' after lock NAME " +
                     Quoted(request.name));
  }
  if (context.trailing_args.empty() || context.trailing_args[0].empty()) {
    throw UsageError("missing COMMAND after '--'");
  }
  request.command = context.trailing_args;
  if (args.wait_option->count() > 0) {
    request.wait = ParseDurationOption("--wait", args.wait);
  }
  if (args.lease_option->count() > 0) {
    request.lease = ParseDurationOption("--lease", args.lease);
  }
  if (args.redis_option->count() > 0) {
    request.redis_url = args.redis_url;
    request.redis_url_source = "--redis";
  } else if (const char* env = std::getenv(kRedisUrlVariable);
             env != nullptr && *env != '\0') {
    request.redis_url = env;
    request.redis_url_source = std::string("$") + kRedisUrlVariable;
  } else {
    request.redis_url = kDefaultRedisUrl;
    request.redis_url_source = "default Redis URL";
  }
  return request;
}

}  // namespace

Subcommand AddLockCommand(CLI::App& parent, HelpFormatter& formatter) {
  CLI::App* app = parent.add_subcommand(
      "lock",
      "Run COMMAND while holding the distributed lock NAME (flock(1) across "
      "machines).");
  formatter.SetSynopsis(app, "[OPTIONS] NAME -- COMMAND [ARGS...]");
  app->footer(kLockFooter);

  auto args = std::make_shared<LockArgs>();
  args->redis_option =
      app->add_option("--redis", args->redis_url,
                      "Redis server: redis://[[user]:password@]host[:port][/db]"
                      " or unix:///path/to/redis.sock. Default: "
                      "$LOCKFLEET_REDIS, else redis://127.0.0.1:6379")
          ->type_name("URL");
  args->wait_option =
      app->add_option("--wait", args->wait,
                      "How long to wait for the lock, e.g. 500ms, 2s, 1.5m, 1h;"
                      " 0 tries once. Default: wait without limit")
          ->type_name("DURATION");
  args->lease_option =
      app->add_option(
             "--lease", args->lease,
             "Watchdog lease of the lock: renewed every lease/3 while COMMAND "
             "runs, so it does not limit how long COMMAND may run; it bounds "
             "how long the lock outlives a killed or frozen lockfleet. "
             "Default: " +
                 config::FormatDuration(LockClientOptions{}.default_lease))
          ->type_name("DURATION");
  args->name_option = app->add_option("NAME", args->name,
                                      "Name of the lock (any non-empty string)")
                          ->type_name("");
  // Catches words after NAME that should have come after "--", for a better
  // message than CLI11's. Hidden from the help.
  app->add_option("stray", args->stray)->group("");

  Subcommand subcommand;
  subcommand.app = app;
  subcommand.takes_trailing_args = true;
  subcommand.run = [args](const Context& context) {
    const LockRequest request = Validate(*args, context);
    return RunLock(request, context);
  };
  return subcommand;
}

}  // namespace lockfleet::cli
