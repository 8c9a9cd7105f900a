// --event-key-env VAR / --event-key-file PATH: the unlock-event key for the
// subcommands that build a KafkaNotifier without a config file (`lock`,
// `bench`). The key itself is never a command-line word (ps would show it):
// these name where to read it, as kafka.event_key_env / event_key_file do
// in a config file (lockfleet/config/event_keys.h has the secret's format).
//
// Thread-safety: none needed; used while parsing the command line.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace lockfleet::cli {

// Environment variable read when neither option is given (if set and not
// empty), so that `lockfleet lock` signs like the workers of a deployment
// whose config says `event_key_env: LOCKFLEET_EVENT_KEY`.
inline constexpr char kEventKeyVariable[] = "LOCKFLEET_EVENT_KEY";

struct EventKeyArgs {
  std::string env;
  std::string file;
  CLI::Option* env_option = nullptr;
  CLI::Option* file_option = nullptr;
};

// Declares both options on `app`, storing into `args` (which must outlive
// parsing). `group` is CLI11's option group for the help.
void AddEventKeyOptions(CLI::App& app, EventKeyArgs& args,
                        const std::string& group = "Options");

// The keys the options name: --event-key-env, else --event-key-file, else
// $LOCKFLEET_EVENT_KEY if set and not empty, else none (events unsigned).
// Throws UsageError naming the option or variable and what is wrong — never
// a key's bytes — or when both options are given.
std::vector<std::string> ResolveEventKeys(const EventKeyArgs& args);

// The same options as command-line words, to pass the choice on to a child
// `lockfleet` (which inherits the environment): {} when none was given.
std::vector<std::string> EventKeyArgv(const EventKeyArgs& args);

}  // namespace lockfleet::cli
