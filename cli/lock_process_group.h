// COMMAND's process group under `lockfleet lock`: finding its members, a
// guard that kills it when lockfleet dies, and handing it the terminal.
//
// COMMAND runs as the leader of a new process group (SpawnInNewGroup in
// child_process.h), so every process it starts stays in that group unless it
// moves itself out with setsid() or setpgid() (a daemon does: such a process
// is beyond lockfleet's reach, as it would be beyond a shell's). lockfleet
// signals the group, never a single pid, and keeps COMMAND unreaped (a
// zombie) until the group is empty, so the group id cannot be reused while
// lockfleet may still signal it.
//
// Thread-safety: the free functions are thread-safe; DeathGuard and
// TerminalHandoff are used by one thread.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

namespace lockfleet::cli {

// The processes of process group `pgid` that have not exited (zombies are
// left out), found by scanning /proc. Empty if /proc cannot be read.
std::vector<pid_t> LiveProcessesInGroup(pid_t pgid);

// "1 process", "3 processes".
std::string CountProcesses(size_t count);

// DeathGuard: a tiny helper process that SIGKILLs COMMAND's process group if
// lockfleet dies first, however it dies (SIGKILL, OOM killer, a crash).
//
// PR_SET_PDEATHSIG kills only COMMAND itself, not the processes it started;
// the guard covers them. It is forked before COMMAND, moves to a process
// group of its own (so a signal to lockfleet's group does not reach it),
// closes every descriptor but the read end of a pipe whose write end only
// lockfleet holds (close-on-exec), and blocks reading it. COMMAND's child
// process writes its pid (= its process group) into the pipe before it
// execs, so the guard knows the group before COMMAND runs any code. When
// lockfleet dies the kernel closes the write end; the guard reads EOF and
// runs kill(-pgid, SIGKILL). Stand() tells it that lockfleet cleaned up
// itself, and it exits without killing anything.
//
// Limit: the guard is a process too; something that SIGKILLs the guard and
// lockfleet together (a kill of their session) leaves the tree to
// COMMAND's PR_SET_PDEATHSIG (COMMAND dies, its children may not).
class DeathGuard {
 public:
  // Forks the guard. Throws std::runtime_error if it cannot.
  DeathGuard();
  // Stand()s down.
  ~DeathGuard();
  DeathGuard(const DeathGuard&) = delete;
  DeathGuard& operator=(const DeathGuard&) = delete;

  // The descriptor COMMAND's child writes its pid to (close-on-exec).
  int report_fd() const { return write_fd_; }

  // Tells the guard not to kill, and reaps it. REQUIRES: COMMAND's group is
  // empty or the caller does not want it killed. Idempotent.
  void Stand();

 private:
  pid_t pid_ = -1;
  int write_fd_ = -1;
};

// Whether lockfleet runs in the foreground of the terminal on stdin (an
// interactive shell started it): then COMMAND's group is made the terminal's
// foreground group, so COMMAND can read the terminal, and Ctrl-C and Ctrl-Z
// reach COMMAND (once) and not lockfleet. Returns the terminal descriptor
// (0), or -1 when stdin is not such a terminal.
int ForegroundTerminal();

// Makes the process group of the caller the foreground group of `tty` again
// if `pgid` still is. REQUIRES: SIGTTOU blocked in the calling thread (see
// signals.h). No-op for tty < 0.
void TakeTerminalBack(int tty, pid_t pgid);

// Gives `tty` to `pgid` if the caller's group is its foreground group now.
void GiveTerminalTo(int tty, pid_t pgid);

}  // namespace lockfleet::cli
