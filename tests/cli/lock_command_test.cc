// `lockfleet lock` end to end: the real binary against a private
// redis-server. Every wait is a poll with a generous deadline; no assertion
// depends on tight timing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli_process.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/redis_client.h"
#include "support/redis_server.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

constexpr char kName[] = "jobs/nightly backup";

// How many lines of `text` start with "lockfleet: ".
size_t LockfleetLines(const std::string& text) {
  size_t count = 0;
  for (const std::string& line : SplitLines(text)) {
    if (line.rfind("lockfleet: ", 0) == 0) ++count;
  }
  return count;
}

class LockCommandTest : public ::testing::Test {
 protected:
  LockCommandTest()
      : redis_(
            std::make_shared<RedisClient>(RedisOptions{.url = server_.url()})),
        client_(redis_) {}

  // A `lock ... -- touch File("ran")` against a master without replicas,
  // with min_replicas 1: exit 69 naming the shortfall, COMMAND not run, the
  // lock left free.
  void ExpectNoReplicaConfirmed(const CliResult& result) {
    EXPECT_EQ(result.status, 69) << result.err;
    EXPECT_NE(result.err.find("redis_replicas"), std::string::npos)
        << result.err;
    EXPECT_NE(result.err.find("acknowledged by 0 of 1 replicas"),
              std::string::npos)
        << result.err;
    EXPECT_FALSE(FileExists(File("ran")));
    EXPECT_FALSE(client_.Inspect(kName).locked);
  }

  // lockfleet lock --redis URL OPTIONS... NAME -- sh -c SCRIPT
  std::vector<std::string> Lock(const std::vector<std::string>& options,
                                const std::string& script,
                                const std::string& name = kName) const {
    std::vector<std::string> args{"lock", "--redis", server_.url()};
    args.insert(args.end(), options.begin(), options.end());
    args.insert(args.end(), {name, "--", "sh", "-c", script});
    return args;
  }

  std::string File(const std::string& name) const { return dir_.File(name); }

  // Starts a holder of kName that runs until File("release") exists, and
  // waits until its COMMAND started.
  std::unique_ptr<CliProcess> StartHolder(
      const std::vector<std::string>& options = {}) {
    auto holder = std::make_unique<CliProcess>(
        Lock(options,
             "touch '" + File("held") + "'; " + UntilExists(File("release"))));
    EXPECT_TRUE(WaitForFile(File("held"))) << holder->Stderr();
    holder_owner_ = client_.Inspect(kName).owner;
    return holder;
  }

  void ReleaseHolder(CliProcess& holder) {
    WriteFile(File("release"), "");
    EXPECT_EQ(holder.Wait(), 0) << holder.Stderr();
  }

  // Connections the server has open right now (INFO clients).
  int64_t ConnectedClients() {
    const Reply info = redis_->Execute({"INFO", "clients"});
    const std::string key = "connected_clients:";
    const size_t at = info.str.find(key);
    return at == std::string::npos
               ? -1
               : std::stoll(info.str.substr(at + key.size()));
  }

  RedisServer server_;
  TempDir dir_;
  std::string holder_owner_;  // owner token of the last StartHolder()
  std::shared_ptr<RedisClient> redis_;
  LockClient client_;
};

TEST_F(LockCommandTest, ConcurrentHoldersSerialize) {
  const std::string log = File("log");
  const std::string script = "echo \"start $(date +%s%N)\" >> '" + log +
                             "'; sleep 0.3; echo \"end $(date +%s%N)\" >> '" +
                             log + "'";
  std::vector<std::unique_ptr<CliProcess>> holders;
  for (int i = 0; i < 3; ++i) {
    holders.push_back(std::make_unique<CliProcess>(Lock({}, script)));
  }
  for (auto& holder : holders) EXPECT_EQ(holder->Wait(), 0) << holder->Stderr();

  const std::vector<std::string> lines = SplitLines(ReadFile(log));
  ASSERT_EQ(lines.size(), 6u) << ReadFile(log);
  int64_t previous_end = 0;
  for (size_t i = 0; i < lines.size(); i += 2) {
    ASSERT_EQ(lines[i].rfind("start ", 0), 0u) << ReadFile(log);
    ASSERT_EQ(lines[i + 1].rfind("end ", 0), 0u) << ReadFile(log);
    const int64_t start = std::stoll(lines[i].substr(6));
    const int64_t end = std::stoll(lines[i + 1].substr(4));
    EXPECT_GE(start, previous_end) << ReadFile(log);
    EXPECT_GE(end, start);
    previous_end = end;
  }
}

TEST_F(LockCommandTest, SetsNameAndStrictlyIncreasingFence) {
  const std::string out = File("env");
  for (int i = 0; i < 3; ++i) {
    const CliResult result = RunCli(Lock(
        {}, "printf '%s|%s\\n' \"$LOCKFLEET_NAME\" \"$LOCKFLEET_FENCE\" >> '" +
                out + "'"));
    ASSERT_EQ(result.status, 0) << result.err;
  }
  const std::vector<std::string> lines = SplitLines(ReadFile(out));
  ASSERT_EQ(lines.size(), 3u);
  int64_t previous = 0;
  for (const std::string& line : lines) {
    const size_t bar = line.find('|');
    ASSERT_NE(bar, std::string::npos) << line;
    EXPECT_EQ(line.substr(0, bar), kName);
    const int64_t fence = std::stoll(line.substr(bar + 1));
    EXPECT_GT(fence, previous) << ReadFile(out);
    previous = fence;
  }
  EXPECT_FALSE(client_.Inspect(kName).locked);
}

TEST_F(LockCommandTest, PassesExitStatusThrough) {
  EXPECT_EQ(RunCli(Lock({}, "exit 7")).status, 7);
  EXPECT_EQ(RunCli(Lock({}, "exit 0")).status, 0);
  EXPECT_EQ(RunCli(Lock({}, "kill -TERM $$")).status, 128 + SIGTERM);
  EXPECT_FALSE(client_.Inspect(kName).locked);
}

TEST_F(LockCommandTest, CommandNotFoundOrNotExecutable) {
  CliResult result = RunCli({"lock", "--redis", server_.url(), kName, "--",
                             "lockfleet-no-such-command", "arg"});
  EXPECT_EQ(result.status, 127);
  EXPECT_EQ(result.err,
            "lockfleet: lockfleet-no-such-command: command not found\n");

  const std::string script = File("not-executable");
  WriteFile(script, "#!/bin/sh\nexit 0\n");
  result = RunCli({"lock", "--redis", server_.url(), kName, "--", script});
  EXPECT_EQ(result.status, 126);
  EXPECT_NE(result.err.find(script), std::string::npos) << result.err;
  EXPECT_FALSE(client_.Inspect(kName).locked);
}

TEST_F(LockCommandTest, CommandStartsWithCleanSignalMask) {
  const CliResult result =
      RunCli({"lock", "--redis", server_.url(), kName, "--", "grep", "^SigBlk",
              "/proc/self/status"});
  ASSERT_EQ(result.status, 0) << result.err;
  EXPECT_EQ(result.out, "SigBlk:\t0000000000000000\n");
}

TEST_F(LockCommandTest, CommandDoesNotInheritRedisConnections) {
  // lockfleet gets only 0-2 (see CliProcess); ls adds one for the directory.
  const CliResult result = RunCli(
      {"lock", "--redis", server_.url(), kName, "--", "ls", "/proc/self/fd"});
  ASSERT_EQ(result.status, 0) << result.err;
  EXPECT_EQ(result.out, "0\n1\n2\n3\n");
}

TEST_F(LockCommandTest, WaitZeroOnHeldLockNamesTheHolder) {
  auto holder = StartHolder();
  const LockInfo info = client_.Inspect(kName);
  ASSERT_TRUE(info.locked);

  const CliResult result =
      RunCli(Lock({"--wait", "0"}, "touch '" + File("ran") + "'"));
  EXPECT_EQ(result.status, 75);
  EXPECT_FALSE(FileExists(File("ran")));
  ASSERT_EQ(SplitLines(result.err).size(), 1u) << result.err;
  EXPECT_EQ(result.err.rfind("lockfleet: ", 0), 0u) << result.err;
  EXPECT_NE(result.err.find(kName), std::string::npos) << result.err;
  EXPECT_NE(result.err.find(info.owner), std::string::npos) << result.err;
  EXPECT_NE(result.err.find(std::to_string(holder->pid())), std::string::npos)
      << "the owner token names the holder's pid: " << result.err;
  EXPECT_NE(result.err.find("remaining TTL"), std::string::npos) << result.err;

  ReleaseHolder(*holder);
}

TEST_F(LockCommandTest, WaitTimesOut) {
  auto holder = StartHolder();
  const auto start = steady_clock::now();
  const CliResult result =
      RunCli(Lock({"--wait", "300ms"}, "touch '" + File("ran") + "'"));
  const auto elapsed = steady_clock::now() - start;
  EXPECT_EQ(result.status, 75) << result.err;
  EXPECT_GE(elapsed, milliseconds(290));
  EXPECT_FALSE(FileExists(File("ran")));
  EXPECT_NE(result.err.find("timed out after 300ms"), std::string::npos)
      << result.err;
  ReleaseHolder(*holder);
}

TEST_F(LockCommandTest, WaitsForTheHolderToFinish) {
  auto holder = StartHolder();
  CliProcess waiter(Lock({"--wait", "20s"}, "touch '" + File("ran") + "'"));
  EXPECT_TRUE(waiter.Running());
  EXPECT_FALSE(FileExists(File("ran")));
  ReleaseHolder(*holder);
  EXPECT_EQ(waiter.Wait(), 0) << waiter.Stderr();
  EXPECT_TRUE(FileExists(File("ran")));
}

TEST_F(LockCommandTest, RedisUnreachable) {
  for (const std::string& url :
       {"redis://127.0.0.1:" + std::to_string(UnusedTcpPort()),
        "unix://" + File("no-such.sock")}) {
    const CliResult result =
        RunCli({"lock", "--redis", url, kName, "--", "touch", File("ran")});
    EXPECT_EQ(result.status, 69) << url << ": " << result.err;
    ASSERT_EQ(SplitLines(result.err).size(), 1u) << result.err;
    EXPECT_EQ(result.err.rfind("lockfleet: ", 0), 0u) << result.err;
    EXPECT_NE(result.err.find("redis_unavailable"), std::string::npos)
        << result.err;
  }
  EXPECT_FALSE(FileExists(File("ran")));
}

// --min-replicas 1 against a Redis without replicas: WAIT answers 0, the
// grant is given back, COMMAND does not run, and the exit status is 69
// with the redis_replicas code; the lock is left free.
TEST_F(LockCommandTest, MinReplicasNobodyConfirmsExits69) {
  const CliResult result =
      RunCli(Lock({"--min-replicas", "1", "--replica-timeout", "100ms"},
                  "touch '" + File("ran") + "'"));
  ExpectNoReplicaConfirmed(result);
  // 0 turns it off again (a config's redis.min_replicas too).
  EXPECT_EQ(RunCli(Lock({"--min-replicas", "0"}, "exit 0")).status, 0);
}

// The same from a config file: redis.min_replicas and redis.replica_timeout
// reach the lock (cli/config_options.cc), and --min-replicas overrides them.
TEST_F(LockCommandTest, ConfigMinReplicasNobodyConfirmsExits69) {
  const std::string config = File("replicas.yaml");
  WriteFile(config, "redis:\n  url: " + server_.url() +
                        "\n  min_replicas: 1\n  replica_timeout: 100ms\n");
  const CliResult result =
      RunCli({"lock", "--config", config, kName, "--", "touch", File("ran")});
  ExpectNoReplicaConfirmed(result);
  const CliResult overridden =
      RunCli({"lock", "--config", config, "--min-replicas", "0", kName, "--",
              "touch", File("ran")});
  EXPECT_EQ(overridden.status, 0) << overridden.err;
  EXPECT_TRUE(FileExists(File("ran")));
}

TEST_F(LockCommandTest, BadArgumentsExitTwo) {
  const std::string url = server_.url();
  const std::string ran = File("ran");
  const std::vector<std::vector<std::string>> cases = {
      {},                                             // no subcommand
      {"frobnicate"},                                 // unknown one
      {"lock", "--redis", url, "--", "touch", ran},   // no NAME
      {"lock", "--redis", url, kName, "touch", ran},  // no "--"
      {"lock", "--redis", url, kName},                // no COMMAND
      {"lock", "--redis", url, kName, "--"},          // empty COMMAND
      {"lock", "--redis", url, "--wait", "5parsecs", kName, "--", "touch", ran},
      {"lock", "--redis", url, "--wait", "-1s", kName, "--", "touch", ran},
      {"lock", "--redis", url, "--lease", "soon", kName, "--", "touch", ran},
      {"lock", "--redis", url, "--lease", "1ms", kName, "--", "touch", ran},
      {"lock", "--redis", url, "--bogus", kName, "--", "touch", ran},
      {"lock", "--redis", "foo://x", kName, "--", "touch", ran},
      {"lock", "--redis", url, "", "--", "touch", ran},  // empty NAME
      {"lock", "--redis", url, "--kill-after", "soon", kName, "--", "true"},
      {"lock", "--redis", url, "--park-cap", "0", kName, "--", "true"},
      {"lock", "--redis", url, "--park-cap", "1x", kName, "--", "true"},
      {"lock", "--redis", url, "--park-cap", "2h", kName, "--", "true"},
      {"lock", "--redis", url, "--kafka", "127.0.0.1:99999", kName, "--",
       "true"},
      {"lock", "--redis", url, "--kafka", "a:1,,b:2", kName, "--", "true"},
      {"lock", "--redis", url, "--kafka", "host:port", kName, "--", "true"},
      {"lock", "--redis", url, "--min-replicas", "101", kName, "--", "true"},
      {"lock", "--redis", url, "--min-replicas", "-1", kName, "--", "true"},
      {"lock", "--redis", url, "--min-replicas", "x", kName, "--", "true"},
      {"lock", "--redis", url, "--replica-timeout", "0", kName, "--", "true"},
      {"lock", "--redis", "redis+sentinel://h", kName, "--", "true"},
  };
  for (const auto& args : cases) {
    std::string shown;
    for (const std::string& arg : args) shown += " '" + arg + "'";
    const CliResult result = RunCli(args);
    EXPECT_EQ(result.status, 2) << shown << "\n" << result.err;
    EXPECT_EQ(result.err.rfind("lockfleet: ", 0), 0u) << shown << "\n"
                                                      << result.err;
  }
  EXPECT_FALSE(FileExists(ran));

  const CliResult bad_duration = RunCli(
      {"lock", "--redis", url, "--wait", "5parsecs", kName, "--", "true"});
  EXPECT_NE(bad_duration.err.find("'parsecs'"), std::string::npos)
      << bad_duration.err;
  EXPECT_NE(bad_duration.err.find("Usage: lockfleet lock"), std::string::npos)
      << bad_duration.err;
}

TEST_F(LockCommandTest, HelpDescribesExitStatuses) {
  const CliResult top = RunCli({"--help"});
  EXPECT_EQ(top.status, 0);
  EXPECT_NE(top.out.find("lock"), std::string::npos);
  EXPECT_NE(top.out.find("75"), std::string::npos) << top.out;

  const CliResult lock = RunCli({"lock", "--help"});
  EXPECT_EQ(lock.status, 0);
  for (const char* needle :
       {"NAME -- COMMAND", "--wait", "--lease", "renewed", "LOCKFLEET_FENCE",
        "LOCKFLEET_REDIS", "69", "75", "76", "127", "--kafka",
        "LOCKFLEET_KAFKA", "--kill-after", "SIGKILL", "--park-cap",
        "lockfleet broker"}) {
    EXPECT_NE(lock.out.find(needle), std::string::npos) << needle;
  }
}

TEST_F(LockCommandTest, UsesRedisUrlFromEnvironment) {
  const CliResult result = RunCli({"lock", kName, "--", "touch", File("ran")},
                                  {"LOCKFLEET_REDIS=" + server_.url()});
  EXPECT_EQ(result.status, 0) << result.err;
  EXPECT_TRUE(FileExists(File("ran")));
}

TEST_F(LockCommandTest, SigtermWhileRunningIsForwardedAndLockReleased) {
  CliProcess holder(Lock({}, "trap 'echo got-term > \"" + File("term") +
                                 "\"; exit 3' TERM; "
                                 "touch '" +
                                 File("started") +
                                 "'; while :; do sleep 0.02; done"));
  ASSERT_TRUE(WaitForFile(File("started"))) << holder.Stderr();
  holder.Signal(SIGTERM);
  EXPECT_EQ(holder.Wait(), 3) << holder.Stderr();
  EXPECT_EQ(ReadFile(File("term")), "got-term\n");
  EXPECT_FALSE(client_.Inspect(kName).locked);
  EXPECT_EQ(RunCli(Lock({"--wait", "0"}, "exit 0")).status, 0);
}

TEST_F(LockCommandTest, SigintWhileRunningKillsCommand) {
  CliProcess holder({"lock", "--redis", server_.url(), kName, "--", "sh", "-c",
                     "touch '" + File("started") + "'; exec sleep 60"});
  ASSERT_TRUE(WaitForFile(File("started"))) << holder.Stderr();
  // Between touch and exec the shell may still get the signal; either way
  // it dies of SIGINT.
  holder.Signal(SIGINT);
  EXPECT_EQ(holder.Wait(), 128 + SIGINT) << holder.Stderr();
  EXPECT_FALSE(client_.Inspect(kName).locked);
}

TEST_F(LockCommandTest, SignalWhileWaitingCancelsWithoutTakingTheLock) {
  auto holder = StartHolder();
  for (int signal : {SIGINT, SIGTERM}) {
    const int64_t clients_before = ConnectedClients();
    CliProcess waiter(Lock({}, "touch '" + File("ran") + "'"));
    // lockfleet connects only once it is ready to be interrupted (its
    // handler is in place before its Redis client exists).
    ASSERT_TRUE(WaitUntil([&] {
      return ConnectedClients() > clients_before || !waiter.Running();
    })) << waiter.Stderr();
    ASSERT_TRUE(waiter.Running()) << waiter.Stderr();
    waiter.Signal(signal);
    EXPECT_EQ(waiter.Wait(seconds(10)), 128 + signal) << waiter.Stderr();
    EXPECT_EQ(waiter.Stderr(),
              "lockfleet: interrupted by " +
                  std::string(signal == SIGINT ? "SIGINT" : "SIGTERM") +
                  " while waiting for lock '" + kName + "'\n");
  }
  EXPECT_EQ(client_.Inspect(kName).owner, holder_owner_);
  ReleaseHolder(*holder);
  EXPECT_FALSE(FileExists(File("ran")));
  EXPECT_FALSE(client_.Inspect(kName).locked)
      << "a cancelled waiter must not hold the lock";
}

TEST_F(LockCommandTest, KilledHolderLockFreesAfterLease) {
  CliProcess holder(Lock({"--lease", "1s"},
                         "echo $$ > '" + File("pid") + "'; exec sleep 60"));
  ASSERT_TRUE(WaitUntil([&] { return !ReadFile(File("pid")).empty(); }))
      << holder.Stderr();
  const pid_t orphan = std::stoi(ReadFile(File("pid")));
  holder.Signal(SIGKILL);
  EXPECT_EQ(holder.Wait(), 128 + SIGKILL);

  const CliResult next =
      RunCli(Lock({"--wait", "10s"}, "touch '" + File("ran") + "'"));
  ::kill(orphan, SIGKILL);  // in case COMMAND outlived its lockfleet
  EXPECT_EQ(next.status, 0) << next.err;
  EXPECT_TRUE(FileExists(File("ran")));
}

TEST_F(LockCommandTest, LockLostWhileRunningTerminatesCommand) {
  CliProcess holder(
      Lock({"--lease", "300ms"}, "trap 'echo got-term > \"" + File("term") +
                                     "\"; exit 0' TERM; "
                                     "touch '" +
                                     File("started") +
                                     "'; while :; do sleep 0.02; done"));
  ASSERT_TRUE(WaitForFile(File("started"))) << holder.Stderr();
  const ForceUnlockResult forced = client_.ForceUnlock(kName);
  EXPECT_TRUE(forced.was_locked);

  EXPECT_EQ(holder.Wait(seconds(20)), 76) << holder.Stderr();
  // sh may also report its `sleep` killed by the group's SIGTERM.
  EXPECT_EQ(LockfleetLines(holder.Stderr()), 1u) << holder.Stderr();
  EXPECT_EQ(ReadFile(File("term")), "got-term\n");
  EXPECT_NE(holder.Stderr().find("lost lock"), std::string::npos)
      << holder.Stderr();
  EXPECT_FALSE(client_.Inspect(kName).locked);
}

TEST_F(LockCommandTest, LockLostKillsCommandThatIgnoresSigterm) {
  CliProcess holder(Lock({"--lease", "300ms", "--kill-after", "500ms"},
                         "trap '' TERM; touch '" + File("started") +
                             "'; while :; do sleep 0.02; done"));
  ASSERT_TRUE(WaitForFile(File("started"))) << holder.Stderr();
  EXPECT_TRUE(client_.ForceUnlock(kName).was_locked);

  EXPECT_EQ(holder.Wait(seconds(20)), 76) << holder.Stderr();
  EXPECT_EQ(LockfleetLines(holder.Stderr()), 1u) << holder.Stderr();
  EXPECT_NE(holder.Stderr().find("sent SIGTERM to COMMAND's process group, "
                                 "then SIGKILL to "),
            std::string::npos)
      << holder.Stderr();
  EXPECT_NE(holder.Stderr().find(" after 500ms"), std::string::npos)
      << holder.Stderr();
}

TEST_F(LockCommandTest, SigtermThenSigkillForCommandThatIgnoresIt) {
  CliProcess holder(Lock({"--kill-after", "300ms"},
                         "trap '' TERM; touch '" + File("started") +
                             "'; while :; do sleep 0.02; done"));
  ASSERT_TRUE(WaitForFile(File("started"))) << holder.Stderr();
  const auto start = steady_clock::now();
  holder.Signal(SIGTERM);
  EXPECT_EQ(holder.Wait(seconds(20)), 128 + SIGKILL) << holder.Stderr();
  EXPECT_GE(steady_clock::now() - start, milliseconds(300));
  // sh, and its `sleep` if one ran (it ignores SIGTERM like sh).
  EXPECT_EQ(holder.Stderr().rfind(
                "lockfleet: COMMAND's process group still ran 300ms after "
                "SIGTERM: sent SIGKILL to ",
                0),
            0u)
      << holder.Stderr();
  EXPECT_EQ(LockfleetLines(holder.Stderr()), 1u) << holder.Stderr();
  EXPECT_FALSE(client_.Inspect(kName).locked);
}

TEST_F(LockCommandTest, KillAfterZeroNeverKills) {
  CliProcess holder(Lock({"--lease", "300ms", "--kill-after", "0"},
                         "trap 'touch \"" + File("term") +
                             "\"' TERM; echo $$ > '" + File("pid") +
                             "'; while :; do sleep 0.02; done"));
  ASSERT_TRUE(WaitUntil([&] { return !ReadFile(File("pid")).empty(); }))
      << holder.Stderr();
  EXPECT_TRUE(client_.ForceUnlock(kName).was_locked);
  ASSERT_TRUE(WaitForFile(File("term"))) << holder.Stderr();
  // Several grace periods of any plausible length: still no SIGKILL.
  std::this_thread::sleep_for(milliseconds(1500));
  EXPECT_TRUE(holder.Running()) << holder.Stderr();

  ::kill(std::stoi(ReadFile(File("pid"))), SIGKILL);
  EXPECT_EQ(holder.Wait(seconds(20)), 76) << holder.Stderr();
  EXPECT_EQ(holder.Stderr().find("SIGKILL"), std::string::npos)
      << holder.Stderr();
}

TEST_F(LockCommandTest, RedisOutageWhileRunningLosesTheLock) {
  CliProcess holder(
      Lock({"--lease", "300ms"}, "trap 'echo got-term > \"" + File("term") +
                                     "\"; exit 0' TERM; "
                                     "touch '" +
                                     File("started") +
                                     "'; while :; do sleep 0.02; done"));
  ASSERT_TRUE(WaitForFile(File("started"))) << holder.Stderr();
  server_.Pause();  // renewals stall; the lease runs out on lockfleet's clock
  const std::optional<int> status = holder.Wait(seconds(20));
  server_.Resume();
  EXPECT_EQ(status, 76) << holder.Stderr();
  EXPECT_EQ(ReadFile(File("term")), "got-term\n");
  EXPECT_NE(holder.Stderr().find("lost lock"), std::string::npos)
      << holder.Stderr();
}

TEST_F(LockCommandTest, LongCommandKeepsTheLockPastItsLease) {
  auto holder = StartHolder({"--lease", "300ms"});
  const std::string owner = client_.Inspect(kName).owner;
  const auto start = steady_clock::now();
  int contenders = 0;
  // Several lease lengths; the watchdog must keep renewing meanwhile.
  while (steady_clock::now() - start < milliseconds(1500) || contenders < 3) {
    const CliResult contender = RunCli(Lock({"--wait", "0"}, "exit 0"));
    EXPECT_EQ(contender.status, 75) << contender.err;
    const LockInfo info = client_.Inspect(kName);
    EXPECT_TRUE(info.locked);
    EXPECT_EQ(info.owner, owner);
    EXPECT_LE(info.ttl, milliseconds(300));
    ++contenders;
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_TRUE(holder->Running());
  ReleaseHolder(*holder);
  EXPECT_FALSE(client_.Inspect(kName).locked);
}

}  // namespace
}  // namespace lockfleet::testing

namespace lockfleet::testing {
namespace {

// Fair mode (the default) across real processes: waiters are served in the
// order they arrived, each handed the lock by the previous holder's release.
TEST_F(LockCommandTest, WaitersAcrossProcessesAreServedInArrivalOrder) {
  auto holder = StartHolder();
  const std::string log = File("order");
  std::vector<std::unique_ptr<CliProcess>> waiters;
  for (int i = 0; i < 4; ++i) {
    waiters.push_back(std::make_unique<CliProcess>(Lock(
        {"--wait", "60s"}, "echo " + std::to_string(i) + " >> '" + log + "'")));
    // Start the next one only once this one is in the queue.
    ASSERT_TRUE(WaitUntil([&] {
      return client_.Inspect(kName).queue.size() == size_t(i + 1);
    })) << waiters.back()->Stderr();
  }
  // Each waits under its own thread's owner token, so the release hands
  // it the lock in full ("g:"), not to claim.
  const LockInfo queued = client_.Inspect(kName);
  for (const QueuedWaiter& w : queued.queue)
    EXPECT_EQ(w.waiter_id.rfind("g:", 0), 0u) << w.waiter_id;
  ReleaseHolder(*holder);
  for (auto& w : waiters) EXPECT_EQ(w->Wait(), 0) << w->Stderr();
  EXPECT_EQ(SplitLines(ReadFile(log)),
            (std::vector<std::string>{"0", "1", "2", "3"}));
}

TEST_F(LockCommandTest, NoFairBargesAndStillSerializes) {
  auto holder = StartHolder();
  CliResult busy = RunCli(Lock({"--no-fair", "--wait", "0"}, "true"));
  EXPECT_EQ(busy.status, 75) << busy.err;
  auto waiter = std::make_unique<CliProcess>(Lock(
      {"--no-fair", "-v", "--wait", "60s"}, "touch '" + File("barged") + "'"));
  ASSERT_TRUE(WaitUntil([&] {
    return waiter->Stderr().find("waiting for lock") != std::string::npos;
  })) << waiter->Stderr();
  EXPECT_TRUE(client_.Inspect(kName).queue.empty());  // barging never queues
  ReleaseHolder(*holder);
  EXPECT_EQ(waiter->Wait(), 0) << waiter->Stderr();
  EXPECT_TRUE(WaitForFile(File("barged")));
}

}  // namespace
}  // namespace lockfleet::testing

namespace lockfleet::testing {
namespace {

// A waiter process killed (-9) while first in line must not hold up the
// queue for long: it stops refreshing its place and is skipped once its
// presence window (3 x --park-cap) lapses, or, if the lock was already handed
// to it, the hand-off lapses after the claim window.
TEST_F(LockCommandTest, KilledWaiterAtTheHeadOfTheQueueIsSkipped) {
  // The releaser's claim window applies to its hand-off: all three use the
  // same windows, as a deployment configured from one file does.
  auto holder = StartHolder({"--park-cap", "200ms"});
  auto doomed = std::make_unique<CliProcess>(
      Lock({"--wait", "60s", "--park-cap", "200ms"},
           "touch '" + File("doomed-ran") + "'"));
  ASSERT_TRUE(
      WaitUntil([&] { return client_.Inspect(kName).queue.size() == 1; }));
  auto next = std::make_unique<CliProcess>(
      Lock({"--wait", "60s", "--park-cap", "200ms"},
           "touch '" + File("next-ran") + "'"));
  ASSERT_TRUE(
      WaitUntil([&] { return client_.Inspect(kName).queue.size() == 2; }));
  doomed->Signal(SIGKILL);
  EXPECT_EQ(doomed->Wait(), 128 + SIGKILL);
  const auto released = std::chrono::steady_clock::now();
  ReleaseHolder(*holder);
  EXPECT_EQ(next->Wait(std::chrono::seconds(30)), 0) << next->Stderr();
  const auto delay = std::chrono::steady_clock::now() - released;
  // Presence window 600 ms, claim window 400 ms: generous for a loaded box.
  EXPECT_LT(delay, std::chrono::seconds(15));
  EXPECT_FALSE(std::ifstream(File("doomed-ran")).good());
  std::printf(
      "next waiter got the lock %.0f ms after the release (dead waiter "
      "ahead)\n",
      std::chrono::duration<double, std::milli>(delay).count());
}

}  // namespace
}  // namespace lockfleet::testing

namespace lockfleet::testing {
namespace {

// No process of COMMAND's tree may outlive the lock: a lost lock, a COMMAND
// that exits leaving children behind, and a SIGKILLed lockfleet.

// Whether `pid` is a running (not zombie) process.
bool Alive(pid_t pid) {
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return false;
  const char state = stat[paren + 2];
  return state != 'Z' && state != 'X';
}

std::vector<pid_t> Pids(const std::string& file) {
  std::vector<pid_t> pids;
  for (const std::string& line : SplitLines(ReadFile(file))) {
    if (!line.empty()) pids.push_back(std::stoi(line));
  }
  return pids;
}

std::vector<pid_t> AliveOf(const std::vector<pid_t>& pids) {
  std::vector<pid_t> alive;
  for (pid_t pid : pids) {
    if (Alive(pid)) alive.push_back(pid);
  }
  return alive;
}

std::string Show(const std::vector<pid_t>& pids) {
  std::string out;
  for (pid_t pid : pids) out += " " + std::to_string(pid);
  return out.empty() ? " (none)" : out;
}

// SIGKILLs whatever is left of a tree when a test ends (old code leaks it).
struct KillAtExit {
  std::string file;
  ~KillAtExit() {
    for (pid_t pid : AliveOf(Pids(file))) ::kill(pid, SIGKILL);
  }
};

// A script that ignores SIGTERM and starts a child and a grandchild that
// ignore it too (dispositions set to "ignore" survive fork and exec), each
// appending its pid to $1 — 4 processes in all — then touches $2.
constexpr char kStubbornTree[] = R"sh(trap '' TERM
echo $$ >> "$1"
sh -c 'echo $$ >> "$1"; exec sleep 300' - "$1" &
sh -c 'sh -c "echo \$\$ >> \"\$1\"; exec sleep 300" - "$1" &
       echo $$ >> "$1"; wait' - "$1" &
while [ "$(wc -l < "$1")" -lt 4 ]; do sleep 0.02; done
touch "$2"
while :; do sleep 0.05; done
)sh";

class LockCommandTreeTest : public LockCommandTest {
 protected:
  // Lock(...) running kStubbornTree; File("pids"), File("tree-started").
  std::vector<std::string> TreeLock(const std::vector<std::string>& options) {
    WriteFile(File("tree.sh"), kStubbornTree);
    return Lock(options, "exec sh '" + File("tree.sh") + "' '" + File("pids") +
                             "' '" + File("tree-started") + "'");
  }
  KillAtExit cleanup_{File("pids")};
};

TEST_F(LockCommandTreeTest, LockLostKillsTheWholeTreeAfterTheGrace) {
  CliProcess holder(TreeLock({"--lease", "600ms", "--kill-after", "500ms"}));
  ASSERT_TRUE(WaitForFile(File("tree-started"))) << holder.Stderr();
  const std::vector<pid_t> tree = Pids(File("pids"));
  ASSERT_EQ(tree.size(), 4u) << ReadFile(File("pids"));
  ASSERT_EQ(AliveOf(tree).size(), 4u);

  const auto forced = steady_clock::now();
  EXPECT_TRUE(client_.ForceUnlock(kName).was_locked);
  EXPECT_EQ(holder.Wait(seconds(20)), 76) << holder.Stderr();
  // lockfleet exits only once the group is empty: nothing to wait for.
  EXPECT_EQ(AliveOf(tree), std::vector<pid_t>{})
      << "survived the lost lock:" << Show(AliveOf(tree));
  EXPECT_GE(steady_clock::now() - forced, milliseconds(500));
  EXPECT_EQ(LockfleetLines(holder.Stderr()), 1u) << holder.Stderr();
  EXPECT_NE(holder.Stderr().find("lost lock"), std::string::npos)
      << holder.Stderr();
  // The 4 shells and sleeps, plus any `sleep 0.05` of the loop.
  EXPECT_NE(holder.Stderr().find("sent SIGTERM to COMMAND's process group, "
                                 "then SIGKILL to "),
            std::string::npos)
      << holder.Stderr();
  EXPECT_NE(holder.Stderr().find(" processes after 500ms"), std::string::npos)
      << holder.Stderr();
}

TEST_F(LockCommandTreeTest, SigkilledLockfleetTakesTheTreeWithIt) {
  CliProcess holder(TreeLock({}));
  ASSERT_TRUE(WaitForFile(File("tree-started"))) << holder.Stderr();
  const std::vector<pid_t> tree = Pids(File("pids"));
  ASSERT_EQ(tree.size(), 4u) << ReadFile(File("pids"));

  const auto killed = steady_clock::now();
  holder.Signal(SIGKILL);
  EXPECT_EQ(holder.Wait(), 128 + SIGKILL);
  EXPECT_TRUE(WaitUntil([&] { return AliveOf(tree).empty(); }, seconds(10)))
      << "survived lockfleet's SIGKILL:" << Show(AliveOf(tree));
  std::printf(
      "COMMAND's tree gone %.1f ms after lockfleet's SIGKILL\n",
      std::chrono::duration<double, std::milli>(steady_clock::now() - killed)
          .count());
}

TEST_F(LockCommandTest, LeftoversOfAnExitedCommandAreStoppedBeforeRelease) {
  const std::string pids = File("pids");
  KillAtExit cleanup{pids};
  // A background child that ignores SIGTERM, then COMMAND exits 3.
  CliProcess holder(Lock({"--kill-after", "300ms"},
                         "(trap '' TERM; echo $(exec sh -c 'echo $PPID') >> '" +
                             pids +
                             "'; exec sleep 300) & "
                             "while [ ! -s '" +
                             pids + "' ]; do sleep 0.02; done; exit 3"));
  EXPECT_EQ(holder.Wait(seconds(20)), 3) << holder.Stderr();
  const std::vector<pid_t> left = Pids(pids);
  ASSERT_EQ(left.size(), 1u) << ReadFile(pids);
  EXPECT_FALSE(Alive(left[0])) << "COMMAND's child outlived the lock";
  EXPECT_EQ(holder.Stderr(),
            "lockfleet: COMMAND exited but left 1 process in its process "
            "group: sent them SIGTERM, then SIGKILL to 1 process after "
            "300ms\n");
  EXPECT_FALSE(client_.Inspect(kName).locked);
}

// lockfleet started the way an interactive shell starts a job: as the leader
// of its own process group (setsid(1) execs it, so pid() is lockfleet's).
class JobProcess : public CliProcess {
 public:
  explicit JobProcess(const std::vector<std::string>& args)
      : CliProcess("/usr/bin/setsid", WithBinary(args), {}) {}

 private:
  static std::vector<std::string> WithBinary(std::vector<std::string> args) {
    args.insert(args.begin(), LockfleetBinary());
    return args;
  }
};

// The state letter of /proc/PID/stat ('T' when stopped).
char State(pid_t pid) {
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size()
             ? '?'
             : stat[paren + 2];
}

// A COMMAND that appends a line to $1 for every SIGINT, touches $2, and
// exits 0 once $3 exists.
std::string CountSigints(const std::string& log, const std::string& started,
                         const std::string& release) {
  return "trap 'echo int >> \"" + log + "\"' INT; touch '" + started +
         "'; while [ ! -e '" + release + "' ]; do sleep 0.02; done";
}

// Continues lockfleet (`pid`, stopped) after a Ctrl-C and waits for COMMAND
// to log a SIGINT in `log`. Each of the two waits for a SIGINT that must not
// come lasts 1 s: with COMMAND in lockfleet's process group (the old code) a
// Ctrl-C reached COMMAND at once, although lockfleet was stopped, and again
// when lockfleet forwarded it.
void ExpectOneSigint(const std::string& log, pid_t pid) {
  const auto count = [&] { return SplitLines(ReadFile(log)).size(); };
  WaitUntil([&] { return count() > 0; }, milliseconds(1000));
  ::kill(pid, SIGCONT);
  EXPECT_TRUE(WaitUntil([&] { return count() > 0; }));
  WaitUntil([&] { return count() > 1; }, milliseconds(1000));
  EXPECT_EQ(count(), 1u) << ReadFile(log);
}

// A terminal's Ctrl-C signals its whole foreground process group. lockfleet
// is stopped meanwhile, so a SIGINT that reaches COMMAND straight from the
// "terminal" and the one lockfleet forwards cannot merge into one: COMMAND
// must see exactly one.
TEST_F(LockCommandTest, CtrlCToTheForegroundGroupReachesCommandOnce) {
  JobProcess holder(
      Lock({}, CountSigints(File("ints"), File("started"), File("release"))));
  ASSERT_TRUE(WaitForFile(File("started"))) << holder.Stderr();
  ASSERT_EQ(::getpgid(holder.pid()), holder.pid());

  ::kill(holder.pid(), SIGSTOP);
  ASSERT_TRUE(WaitUntil([&] { return State(holder.pid()) == 'T'; }));
  ::kill(-holder.pid(), SIGINT);  // what Ctrl-C does
  ExpectOneSigint(File("ints"), holder.pid());
  WriteFile(File("release"), "");
  EXPECT_EQ(holder.Wait(), 0) << holder.Stderr();
  EXPECT_EQ(SplitLines(ReadFile(File("ints"))),
            std::vector<std::string>{"int"});
  EXPECT_FALSE(client_.Inspect(kName).locked);
}

// lockfleet in the foreground of a real terminal (a pty): COMMAND's group
// gets the terminal, so Ctrl-C (the tty's ^C) reaches COMMAND once and
// lockfleet not at all, and COMMAND can read the terminal.
class PtyLockfleet {
 public:
  explicit PtyLockfleet(const std::vector<std::string>& args) {
    std::vector<std::string> strings{LockfleetBinary()};
    strings.insert(strings.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& arg : strings) argv.push_back(arg.data());
    argv.push_back(nullptr);
    pid_ = ::forkpty(&master_, nullptr, nullptr, nullptr);
    if (pid_ == 0) {
      ::close_range(3, ~0U, 0);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  ~PtyLockfleet() {
    if (!status_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (master_ >= 0) ::close(master_);
  }
  pid_t pid() const { return pid_; }
  // The terminal's foreground process group.
  pid_t ForegroundGroup() const { return ::tcgetpgrp(master_); }
  void Type(const std::string& keys) {
    ASSERT_EQ(::write(master_, keys.data(), keys.size()),
              static_cast<ssize_t>(keys.size()));
  }
  std::optional<int> Wait(milliseconds timeout = seconds(30)) {
    WaitUntil(
        [&] {
          Drain();
          int status = 0;
          if (::waitpid(pid_, &status, WNOHANG) != pid_) return false;
          status_ = WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                        : WEXITSTATUS(status);
          return true;
        },
        timeout);
    return status_;
  }
  // What lockfleet and COMMAND wrote to the terminal so far.
  const std::string& output() {
    Drain();
    return output_;
  }

 private:
  void Drain() {
    ::fcntl(master_, F_SETFL, O_NONBLOCK);
    char chunk[4096];
    ssize_t n = 0;
    while ((n = ::read(master_, chunk, sizeof(chunk))) > 0) {
      output_.append(chunk, static_cast<size_t>(n));
    }
  }

  pid_t pid_ = -1;
  int master_ = -1;
  std::optional<int> status_;
  std::string output_;
};

TEST_F(LockCommandTest, CtrlCAtATerminalReachesCommandOnce) {
  PtyLockfleet holder(Lock(
      {}, "read line; echo \"read:$line\" > '" + File("read") + "'; " +
              CountSigints(File("ints"), File("started"), File("release"))));
  // COMMAND reads the terminal: it is in the foreground.
  holder.Type("hello\n");
  ASSERT_TRUE(WaitForFile(File("started"))) << holder.output();
  EXPECT_EQ(ReadFile(File("read")), "read:hello\n");

  ::kill(holder.pid(), SIGSTOP);
  ASSERT_TRUE(WaitUntil([&] { return State(holder.pid()) == 'T'; }));
  holder.Type("\x03");  // ^C
  ExpectOneSigint(File("ints"), holder.pid());
  WriteFile(File("release"), "");
  EXPECT_EQ(holder.Wait(), 0) << holder.output();
  EXPECT_EQ(SplitLines(ReadFile(File("ints"))),
            std::vector<std::string>{"int"});
  EXPECT_FALSE(client_.Inspect(kName).locked);
}

// Ctrl-Z stops COMMAND's group (the terminal's foreground), then lockfleet
// stops itself so that a shell sees its job stopped; continued (as `fg`
// does), it hands the terminal back to COMMAND, which Ctrl-C then reaches.
TEST_F(LockCommandTest, CtrlZStopsCommandThenLockfleetAndContinues) {
  // COMMAND waits in `wait`, not in a loop of short sleeps: a ^Z that lands
  // while sh is in vfork() stops the child only, and sh (state D) never
  // reports a stop. lockfleet's sleep 300 is left over: SIGTERMed.
  PtyLockfleet holder(Lock({}, "trap 'echo int >> \"" + File("ints") +
                                   "\"; exit 0' INT; sleep 300 & touch '" +
                                   File("started") + "'; wait"));
  ASSERT_TRUE(WaitForFile(File("started"))) << holder.output();
  holder.Type("\x1a");  // ^Z
  ASSERT_TRUE(WaitUntil([&] { return State(holder.pid()) == 'T'; }))
      << holder.output() << " foreground " << holder.ForegroundGroup()
      << " state " << State(holder.ForegroundGroup()) << " lockfleet "
      << holder.pid() << " " << State(holder.pid());
  ::kill(holder.pid(), SIGCONT);
  ASSERT_TRUE(WaitUntil([&] { return State(holder.pid()) != 'T'; }));
  // COMMAND's group has the terminal again and runs: ^C reaches it.
  ASSERT_TRUE(WaitUntil([&] {
    const pid_t foreground = holder.ForegroundGroup();
    return foreground > 0 && foreground != holder.pid();
  })) << holder.output();
  holder.Type("\x03");
  EXPECT_EQ(holder.Wait(), 0) << holder.output();
  EXPECT_EQ(ReadFile(File("ints")), "int\n");
  EXPECT_NE(holder.output().find("left 1 process"), std::string::npos)
      << holder.output();
  EXPECT_FALSE(client_.Inspect(kName).locked);
}

// Issue 14 item 6: `lock --config FILE` reads the deployment's config, as
// the worker does, so the CLI takes the very lock the fleet takes.
TEST_F(LockCommandTest, ConfigGivesRedisKeyPrefixAndLease) {
  const std::string config = File("worker.yaml");
  WriteFile(config, "redis:\n  url: " + server_.url() +
                        "\n  key_prefix: team-a\nlocks:\n  lease: 45s\n");
  CliProcess holder(
      {"lock", "--config", config, kName, "--", "sh", "-c",
       "touch '" + File("held") + "'; " + UntilExists(File("release"))});
  ASSERT_TRUE(WaitForFile(File("held"))) << holder.Stderr();
  const std::string key = std::string("team-a:{") + kName + "}:lock";
  EXPECT_EQ(redis_->Execute({"EXISTS", key}).integer, 1);
  EXPECT_FALSE(client_.Inspect(kName).locked);  // not under "lockfleet:"
  const int64_t ttl = redis_->Execute({"PTTL", key}).integer;
  EXPECT_GT(ttl, 30000) << "locks.lease not applied";
  EXPECT_LE(ttl, 45000);
  // A fleet process with the same config sees the lock held.
  LockClient team_a(redis_, {.key_prefix = "team-a"});
  EXPECT_FALSE(team_a.TryAcquire(kName));
  WriteFile(File("release"), "");
  EXPECT_EQ(holder.Wait(), 0) << holder.Stderr();
  EXPECT_EQ(redis_->Execute({"EXISTS", key}).integer, 0);
}

TEST_F(LockCommandTest, OptionsOverrideTheConfig) {
  const std::string config = File("worker.yaml");
  // Nothing listens on port 9: only --redis can make this work.
  WriteFile(config, "redis:\n  url: redis://127.0.0.1:9\nlocks:\n  wait: 0\n");
  const CliResult unreachable =
      RunCli({"lock", "--config", config, "x", "--", "true"});
  EXPECT_EQ(unreachable.status, 69) << unreachable.err;
  EXPECT_NE(unreachable.err.find("127.0.0.1:9"), std::string::npos)
      << unreachable.err;
  // locks.wait: 0 from the file: a busy lock is given up at once.
  auto holder = StartHolder();
  const CliResult busy = RunCli({"lock", "--config", config, "--redis",
                                 server_.url(), kName, "--", "true"});
  EXPECT_EQ(busy.status, 75) << busy.err;
  EXPECT_NE(busy.err.find("is busy"), std::string::npos) << busy.err;
  ReleaseHolder(*holder);
}

TEST_F(LockCommandTest, BadConfigExitsTwoNamingFileLineAndKey) {
  const std::string config = File("bad.yaml");
  WriteFile(config,
            "redis:\n  url: " + server_.url() + "\nlocks:\n  leese: 10s\n");
  const CliResult result =
      RunCli({"lock", "--config", config, "x", "--", "true"});
  EXPECT_EQ(result.status, 2) << result.err;
  EXPECT_NE(result.err.find(config + ":4:"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("leese"), std::string::npos) << result.err;
  EXPECT_EQ(RunCli({"lock", "--config", File("absent.yaml"), "x", "--", "true"})
                .status,
            2);
}

}  // namespace
}  // namespace lockfleet::testing
