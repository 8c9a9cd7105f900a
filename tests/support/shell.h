// Shell commands from tests: /bin/sh -c with the output captured, and
// quoting for it (tmux, bash, promtool, readelf, `lockfleet` itself).
//
// Thread-safety: RunShell may be called from any thread; each call runs its
// own /bin/sh.
#pragma once

#include <string>
#include <string_view>

namespace lockfleet::testing {

struct ShellResult {
  int status = -1;     // exit status; -1 if it did not exit normally
  std::string output;  // stdout and stderr, interleaved
};

// Runs `command` through /bin/sh -c, its stderr with its stdout (2>&1), and
// waits for it.
ShellResult RunShell(const std::string& command);

// 'text' for /bin/sh, whatever it contains (a ' inside becomes '\'').
std::string ShellQuote(std::string_view text);

}  // namespace lockfleet::testing
