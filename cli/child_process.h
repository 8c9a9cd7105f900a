// Running a user's COMMAND as a child process, the way a shell would.
//
// The child starts with an empty signal mask (the CLI blocks SIGINT/SIGTERM,
// see signals.h), so it sees those signals normally. Dispositions the CLI
// inherited are passed on — an ignored SIGHUP under nohup(1) stays ignored —
// except those named in `reset_to_default`: pass the signals that were at
// their default when the process started, so that a library ignoring, say,
// SIGPIPE does not leak that into COMMAND. It inherits stdin/stdout/stderr and
// every file descriptor the CLI itself inherited, but not the descriptors the
// CLI opened since (Redis connections, librdkafka's pipes and the like): see
// ChildDescriptors.
//
// Reaping is split in two (WaitForExit, then Reap) so that a caller who may
// kill() the child from another thread can stop doing so after the child has
// exited but before its pid is freed for reuse.
//
// Thread-safety: free functions; safe to call concurrently on different
// children.
#pragma once

#include <sys/types.h>

#include <csignal>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace lockfleet::cli {

// Exit statuses the CLI shares with shells.
inline constexpr int kExitCannotExecute = 126;  // found, but exec failed
inline constexpr int kExitNotFound = 127;       // not on PATH / no such file
inline constexpr int kExitSignalBase = 128;     // + signal number

struct SpawnResult {
  pid_t pid = -1;  // > 0 on success
  int error = 0;   // errno of the failed spawn (exec errors included)

  bool ok() const { return pid > 0; }
};

// Which descriptors the child closes: `close` (open ones below `close_from`
// that are not to be passed on) and every descriptor >= `close_from`.
// Other threads may open descriptors at any time (librdkafka's pipes are not
// close-on-exec); those above every inherited one are closed regardless.
struct ChildDescriptors {
  std::vector<int> close;
  int close_from = -1;  // < 0: none
};

// The descriptors to close so that the child gets exactly `inherited` (the
// ones open at startup, ascending) of those open now.
ChildDescriptors DescriptorsToCloseExcept(const std::vector<int>& inherited);

// Starts argv[0] (searched on PATH unless it contains '/') with arguments
// `argv` and exactly the environment `env` ("KEY=value" strings), closing
// `fds` and resetting `reset_to_default` in the child.
// REQUIRES: !argv.empty().
SpawnResult Spawn(const std::vector<std::string>& argv,
                  const std::vector<std::string>& env,
                  const ChildDescriptors& fds,
                  const sigset_t& reset_to_default);

// How SpawnInNewGroup ties the child to its process group and parent.
struct GroupSpawn {
  // The child writes its pid (int32_t) here before it execs: DeathGuard's
  // pipe (see lock_process_group.h). < 0: none.
  int report_fd = -1;
  // Terminal whose foreground group the child becomes before it execs
  // (ForegroundTerminal()); < 0: none.
  int terminal_fd = -1;
};

// Like Spawn, except that the child
//   - leads a new process group (its pgid is its pid), so that a signal to
//     -pid reaches every process it starts that does not leave the group;
//   - gets PR_SET_PDEATHSIG(SIGKILL) and checks that its parent is still the
//     caller, so it never runs on after the caller died (the death signal is
//     tied to the calling *thread*: call it from a thread that lives as long
//     as the child matters, e.g. the main thread);
//   - reports its pid to `group.report_fd` and takes `group.terminal_fd`.
// Exec errors are reported in the result as with Spawn (through a
// close-on-exec pipe); when it returns ok the child has exec'd.
// REQUIRES: !argv.empty(); SIGTTOU blocked in the calling thread if
// group.terminal_fd >= 0.
SpawnResult SpawnInNewGroup(const std::vector<std::string>& argv,
                            const std::vector<std::string>& env,
                            const ChildDescriptors& fds,
                            const sigset_t& reset_to_default,
                            const GroupSpawn& group);

// Blocks until child `pid` has exited (as WaitForExit) or stopped. Returns
// true for an exit (the child stays unreaped), false for a stop (consumed).
bool WaitForExitOrStop(pid_t pid);

// Of the signals a command-runner cares about (SIGINT, SIGTERM, SIGHUP,
// SIGQUIT, SIGPIPE), those whose disposition is SIG_DFL right now. Call it
// first thing in main().
sigset_t SignalsAtDefault();

// The exit status to report for a failed spawn (127 or 126) and a one-line
// explanation in the style of a shell, e.g. "frob: command not found".
int SpawnFailureStatus(const SpawnResult& result);
std::string SpawnFailureMessage(const std::string& command,
                                const SpawnResult& result);

// Blocks until child `pid` has exited, without reaping it: the pid stays
// valid (a zombie) until Reap(). Retries on EINTR.
void WaitForExit(pid_t pid);

// Reaps child `pid` and returns its status as a shell reports it: the exit
// code, or 128 + signal if a signal killed it.
int Reap(pid_t pid);

// The current environment with `overrides` ("KEY=value") replacing or adding
// entries of the same KEY, and without the entries whose KEY `drop` (if set)
// returns true for.
std::vector<std::string> EnvironmentWith(
    const std::vector<std::string>& overrides,
    const std::function<bool(std::string_view key)>& drop = nullptr);

// The file descriptors open in this process right now, ascending.
std::vector<int> OpenFileDescriptors();

}  // namespace lockfleet::cli
