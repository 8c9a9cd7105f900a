#include "event_key_options.h"

#include <cstdlib>

#include "command.h"
#include "lockfleet/config/error.h"
#include "lockfleet/config/event_keys.h"

namespace lockfleet::cli {
void AddEventKeyOptions(CLI::App& app, EventKeyArgs& args,
                        const std::string& group) {
  args.env_option =
      app.add_option("--event-key-env", args.env,
                     "Sign unlock events, and accept only signed ones, with "
                     "the key(s) in environment variable VAR (one per line, "
                     ">= 16 bytes; the first signs). Every process sharing the "
                     "topic needs the same key. Default: $" +
                         std::string(kEventKeyVariable) +
                         " if set, else unsigned events")
          ->type_name("VAR")
          ->group(group);
  args.file_option =
      app.add_option("--event-key-file", args.file,
                     "The same, with the key(s) read from file PATH (a "
                     "mounted secret)")
          ->type_name("PATH")
          ->group(group);
}

std::vector<std::string> ResolveEventKeys(const EventKeyArgs& args) {
  const bool env = Given(args.env_option);
  const bool file = Given(args.file_option);
  if (env && file) {
    throw UsageError("--event-key-env and --event-key-file exclude each other");
  }
  try {
    if (env) return config::EventKeysFromEnv(args.env);
    if (file) return config::EventKeysFromFile(args.file);
    if (const char* set = std::getenv(kEventKeyVariable);
        set != nullptr && *set != '\0') {
      return config::EventKeysFromEnv(kEventKeyVariable);
    }
  } catch (const config::ConfigError& e) {
    throw UsageError(std::string(env    ? "--event-key-env"
                                 : file ? "--event-key-file"
                                        : "$LOCKFLEET_EVENT_KEY") +
                     ": " + e.what());
  }
  return {};
}

std::vector<std::string> EventKeyArgv(const EventKeyArgs& args) {
  if (Given(args.env_option)) return {"--event-key-env", args.env};
  if (Given(args.file_option)) return {"--event-key-file", args.file};
  return {};
}

}  // namespace lockfleet::cli
