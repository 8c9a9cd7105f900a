// Event keys: the shared secret that authenticates unlock events
// (HMAC-SHA256, docs/unlock-events.md).
//
// A key is never written in a config file or on a command line: it is read
// from an environment variable or a file (a mounted secret), named by
// kafka.event_key_env / kafka.event_key_file (config.h) or by the CLI's
// --event-key-env / --event-key-file. The secret holds one key per line:
//
//   * spaces, tabs and '\r' around a key, and blank lines, are ignored;
//   * every key has at least kMinEventKeyBytes bytes;
//   * the first key signs, every key verifies: to rotate, give every process
//     "old\nnew", then "new\nold", then "new" (one rolling restart each).
//
// No message of these functions contains a key's bytes: they give a key's
// line and length only.
//
// Thread-safety: the functions may be called concurrently (the default
// environment lookup races with setenv(), as getenv() does).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "lockfleet/config/config.h"

namespace lockfleet::config {

// The least bytes per key; notifier::kMinEventKeyBytes is this constant.
inline constexpr size_t kMinEventKeyBytes = 16;

// Secret files larger than this are refused unread (a key is a line).
inline constexpr size_t kMaxEventKeyFileBytes = 64 * 1024;

// The keys in `secret`. Throws ConfigError when it holds no key or a key
// shorter than kMinEventKeyBytes; `where` names the secret in the message
// ("environment variable LOCKFLEET_EVENT_KEY").
std::vector<std::string> ParseEventKeys(std::string_view secret,
                                        std::string_view where);

// Whether `name` can be an environment variable's name: [A-Za-z_][A-Za-z0-9_]*.
bool IsEnvironmentVariableName(std::string_view name);

// The keys in environment variable `name`, looked up through `env` (empty:
// the process environment). Throws ConfigError when `name` is no variable
// name (the message does not repeat it: it may be a key pasted by mistake),
// the variable is unset, or its value fails ParseEventKeys.
std::vector<std::string> EventKeysFromEnv(const std::string& name,
                                          const EnvLookup& env = {});

// The keys in the file at `path` (relative: to the working directory).
// Throws ConfigError when it cannot be read (the message names the path and
// the reason), is larger than kMaxEventKeyFileBytes, or fails
// ParseEventKeys.
std::vector<std::string> EventKeysFromFile(const std::string& path);

}  // namespace lockfleet::config
