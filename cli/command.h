// How main() and the subcommands of the `lockfleet` binary fit together.
//
// Each subcommand lives in its own file and exposes one function,
// `Subcommand AddXCommand(CLI::App& parent, HelpFormatter& formatter)`, that
// declares its options on a new CLI11 subcommand and returns the function to
// run when that subcommand was chosen. main() is the composition root: it
// owns the SignalWatcher, parses the command line, and runs the chosen
// subcommand, which builds whatever clients it needs itself.
//
// Errors: a subcommand reports a bad command line by throwing UsageError
// (main prints it with the usage and exits 2); anything else it prints itself
// as one "lockfleet: ..." line on stderr and returns the exit status.
#pragma once

#include <CLI/CLI.hpp>
#include <csignal>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "signals.h"

namespace lockfleet::cli {

// Exit statuses shared by the subcommands (sysexits.h values where one fits).
inline constexpr int kExitOk = 0;
inline constexpr int kExitNothing = 1;       // nothing to show, or nothing done
inline constexpr int kExitUsage = 2;         // bad command line or argument
inline constexpr int kExitUnavailable = 69;  // EX_UNAVAILABLE: Redis down
inline constexpr int kExitSoftware = 70;     // EX_SOFTWARE: a lockfleet bug
inline constexpr int kExitTimedOut = 75;     // EX_TEMPFAIL: lock not acquired
inline constexpr int kExitLockLost = 76;     // lock lost while COMMAND ran

// A bad command line, found after CLI11 parsed it (a bad duration, a missing
// operand). The message says what was expected and what was found.
class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const std::string& message)
      : std::runtime_error(message) {}
};

// What main() hands the chosen subcommand.
struct Context {
  SignalWatcher& signals;
  // The signals whose disposition was SIG_DFL at startup (see
  // SignalsAtDefault() in child_process.h).
  sigset_t signals_at_default;
  // Whether the command line had a "--", and the words after the first one
  // (main() takes them away from CLI11, so "--" means exactly one thing).
  bool has_trailing_args = false;
  std::vector<std::string> trailing_args;
};

struct Subcommand {
  CLI::App* app = nullptr;           // owned by the parent CLI::App
  bool takes_trailing_args = false;  // accepts "-- WORDS..."
  std::function<int(const Context&)> run;
};

// Whether `option` was declared (not null) and given on the command line.
bool Given(const CLI::Option* option);

// Writes "lockfleet: <message>" and a newline to stderr, as one write, so
// lines from different threads do not interleave. Thread-safe.
void PrintError(std::string_view message);

// The help footer of a command that reads Redis: `before` and a blank line
// (when `before` is not empty), then the exit statuses: 0 `zero`, 1 `one`,
// and 2 (bad arguments or --config file) and 69 (Redis) as usual.
std::string ExitStatusFooter(std::string_view before, std::string_view zero,
                             std::string_view one);

// `text` in single quotes for a message, with control and non-ASCII bytes
// escaped (lock names are binary-safe) and at most ~80 bytes shown.
std::string Quoted(std::string_view text);

// `texts` each Quoted() and separated by ", ": "'a', 'b', 'c'"; past the
// first `max_shown` of them, "... (N in all)".
std::string QuotedList(const std::vector<std::string>& texts,
                       size_t max_shown = 8);

// CLI11's formatter, except that a subcommand may give the operand part of
// its usage line itself: CLI11 alone cannot show "NAME -- COMMAND [ARGS...]".
// Not thread-safe; set up before parsing.
class HelpFormatter : public CLI::Formatter {
 public:
  void SetSynopsis(const CLI::App* app, std::string synopsis);
  std::string make_usage(const CLI::App* app, std::string name) const override;

 private:
  std::map<const CLI::App*, std::string> synopses_;
};

}  // namespace lockfleet::cli
