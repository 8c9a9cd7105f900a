// `lockfleet semaphore NAME [--permits N] [--take K] -- COMMAND` end to end:
// the real binary against a private redis-server. Every wait is a poll with
// a generous deadline; no assertion depends on tight timing.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_process.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/redis_client.h"
#include "lockfleet/lockcore/semaphore.h"
#include "support/redis_server.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::seconds;

class SemaphoreCliTest : public ::testing::Test {
 protected:
  SemaphoreCliTest()
      : redis_(
            std::make_shared<RedisClient>(RedisOptions{.url = server_.url()})),
        client_(redis_) {}

  // lockfleet semaphore --redis URL OPTIONS... NAME -- sh -c SCRIPT
  std::vector<std::string> Semaphore(const std::vector<std::string>& options,
                                     const std::string& name,
                                     const std::string& script) const {
    std::vector<std::string> args{"semaphore", "--redis", server_.url()};
    args.insert(args.end(), options.begin(), options.end());
    args.insert(args.end(), {name, "--", "sh", "-c", script});
    return args;
  }

  std::string File(const std::string& name) const { return dir_.File(name); }

  RedisServer server_;
  TempDir dir_;
  std::shared_ptr<RedisClient> redis_;
  LockClient client_;
};

TEST_F(SemaphoreCliTest, CommandRunsHoldingPermitsAndGivesThemBack) {
  CliProcess holder(
      Semaphore({"--permits", "3", "--take", "2", "-v"}, "exports",
                "echo \"$LOCKFLEET_SEMAPHORE|$LOCKFLEET_PERMITS|"
                "$LOCKFLEET_PERMIT_ID|${LOCKFLEET_FENCE-unset}\" > '" +
                    File("env") + "'; touch '" + File("held") + "'; " +
                    UntilExists(File("release"))),
      {"LOCKFLEET_FENCE=7"});
  ASSERT_TRUE(WaitForFile(File("held"))) << holder.Stderr();
  SemaphoreInfo info = client_.Semaphore("exports").Inspect();
  EXPECT_EQ(info.permits, 3);
  EXPECT_EQ(info.used, 2);
  const std::vector<std::string> env = SplitLines(ReadFile(File("env")));
  ASSERT_EQ(env.size(), 1u);
  EXPECT_TRUE(env[0].starts_with("exports|2|")) << env[0];
  EXPECT_TRUE(env[0].ends_with("|unset")) << "an enclosing lock's fence";
  // Only 1 left: a second holder of 2 cannot run now.
  const CliResult busy =
      RunCli(Semaphore({"--take", "2", "--wait", "0"}, "exports", "exit 0"));
  EXPECT_EQ(busy.status, 75) << busy.err;
  EXPECT_NE(busy.err.find("2 permits of semaphore 'exports' not free "
                          "(--wait 0): 1 free"),
            std::string::npos)
      << busy.err;
  EXPECT_EQ(RunCli(Semaphore({"--wait", "0"}, "exports", "exit 3")).status, 3)
      << "1 permit is free; COMMAND's status is lockfleet's";

  WriteFile(File("release"), "");
  EXPECT_EQ(holder.Wait(), 0) << holder.Stderr();
  EXPECT_NE(holder.Stderr().find("acquired 2 permits of semaphore 'exports'"),
            std::string::npos)
      << holder.Stderr();
  EXPECT_EQ(client_.Semaphore("exports").Inspect().used, 0);
}

// Five commands with --permits 2, each logging when it starts and ends:
// never more than 2 run at once, and all run. Without Kafka a waiter learns
// of its turn within its park cap: 250ms keeps the test short.
TEST_F(SemaphoreCliTest, NeverMoreCommandsAtOnceThanPermits) {
  const std::string log = File("log");
  const std::string script = "echo \"+ $(date +%s%N)\" >> '" + log +
                             "'; sleep 0.2; echo \"- $(date +%s%N)\" >> '" +
                             log + "'";
  std::vector<std::unique_ptr<CliProcess>> runs;
  for (int i = 0; i < 5; ++i) {
    runs.push_back(std::make_unique<CliProcess>(
        Semaphore({"--permits", "2", "--park-cap", "250ms", "--wait", "2m"},
                  "pool", script)));
  }
  for (auto& run : runs) EXPECT_EQ(run->Wait(), 0) << run->Stderr();
  std::vector<std::pair<long long, int>> events;  // (time, +1/-1)
  for (const std::string& line : SplitLines(ReadFile(log))) {
    events.emplace_back(std::stoll(line.substr(2)), line[0] == '+' ? 1 : -1);
  }
  ASSERT_EQ(events.size(), 10u);
  // Ends before starts at the same instant: a hand-off is not an overlap.
  std::sort(events.begin(), events.end());
  int running = 0, most = 0;
  for (const auto& [at, delta] : events) {
    running += delta;
    most = std::max(most, running);
  }
  EXPECT_LE(most, 2);
  EXPECT_EQ(client_.Semaphore("pool").Inspect().used, 0);
}

TEST_F(SemaphoreCliTest, PermitsReleasedByIdStopCommandAndExit76) {
  CliProcess holder(Semaphore(
      {"--permits", "1", "--lease", "900ms", "--kill-after", "5s"}, "revoked",
      "echo \"$LOCKFLEET_PERMIT_ID\" > '" + File("id") + "'; touch '" +
          File("held") +
          "'; trap 'exit 0' TERM; while :; do sleep 0.05; "
          "done"));
  ASSERT_TRUE(WaitForFile(File("held"))) << holder.Stderr();
  const std::string id = SplitLines(ReadFile(File("id"))).at(0);
  EXPECT_EQ(client_.Semaphore("revoked").Release(id), ReleaseStatus::kReleased);
  EXPECT_EQ(holder.Wait(), 76) << holder.Stderr();
  EXPECT_NE(holder.Stderr().find("lost 1 permit of semaphore 'revoked' while "
                                 "COMMAND ran"),
            std::string::npos)
      << holder.Stderr();
}

// A lockfleet killed with SIGKILL while COMMAND runs (COMMAND dies with it)
// cannot give its permits back: they come back when their lease runs out,
// and until then nobody gets them — never more holders than permits.
TEST_F(SemaphoreCliTest, AKilledHoldersPermitsComeBackWhenTheirLeaseEnds) {
  CliProcess victim(Semaphore({"--permits", "1", "--lease", "1500ms"}, "crash",
                              "touch '" + File("held") + "'; sleep 600"));
  ASSERT_TRUE(WaitForFile(File("held"))) << victim.Stderr();
  victim.Signal(SIGKILL);
  victim.Wait();
  EXPECT_EQ(client_.Semaphore("crash").Inspect().used, 1)
      << "still out: nothing gave it back";
  const CliResult busy = RunCli(Semaphore({"--wait", "0"}, "crash", "exit 0"));
  EXPECT_EQ(busy.status, 75) << busy.err;
  const CliResult next = RunCli(
      Semaphore({"--wait", "1m", "--park-cap", "250ms"}, "crash", "exit 0"));
  EXPECT_EQ(next.status, 0) << next.err;
  EXPECT_EQ(client_.Semaphore("crash").Inspect().used, 0);
}

TEST_F(SemaphoreCliTest, ASignalWhileWaitingLeavesNothingQueued) {
  ASSERT_TRUE(client_.Semaphore("full").TrySetPermits(1));
  PermitResult held = client_.Semaphore("full").TryAcquire(1);
  ASSERT_TRUE(held);
  CliProcess waiter(Semaphore({"-v"}, "full", "exit 0"));
  ASSERT_TRUE(WaitUntil(
      [&] { return client_.Semaphore("full").Inspect().waiters == 1; },
      seconds(30)))
      << waiter.Stderr();
  waiter.Signal(SIGTERM);
  EXPECT_EQ(waiter.Wait(), 143) << waiter.Stderr();
  EXPECT_NE(waiter.Stderr().find("while waiting for semaphore 'full'"),
            std::string::npos)
      << waiter.Stderr();
  EXPECT_EQ(client_.Semaphore("full").Inspect().waiters, 0);
}

TEST_F(SemaphoreCliTest, BadArgumentsExit2WithAReason) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::string url = server_.url();
  const std::vector<Case> cases = {
      {{"semaphore", "--redis", url, "--", "true"},
       "missing semaphore NAME before '--'"},
      {{"semaphore", "--redis", url, "a", "b", "--", "true"},
       "one semaphore NAME, not 2"},
      {{"semaphore", "--redis", url, "a", "sh", "curl u:secret@h"},
       "missing '-- COMMAND' after semaphore NAME 'a'"},
      {{"semaphore", "--redis", url, "--take", "0", "a", "--", "true"},
       "--take"},
      {{"semaphore", "--redis", url, "--permits", "2", "--take", "3", "a", "--",
        "true"},
       "--take 3 is more than --permits 2"},
      {{"semaphore", "--redis", url, "missing", "--", "true"},
       "semaphore 'missing' does not exist"},
  };
  for (const Case& c : cases) {
    const CliResult result = RunCli(c.args);
    EXPECT_EQ(result.status, 2) << c.message << "\n" << result.err;
    EXPECT_NE(result.err.find(c.message), std::string::npos) << result.err;
    EXPECT_EQ(result.err.find("secret"), std::string::npos) << result.err;
  }
  ASSERT_TRUE(client_.Semaphore("small").TrySetPermits(1));
  const CliResult big = RunCli(
      {"semaphore", "--redis", url, "--take", "2", "small", "--", "true"});
  EXPECT_EQ(big.status, 2) << big.err;
  EXPECT_NE(big.err.find("semaphore 'small' has 1 permits; 2 asked for"),
            std::string::npos)
      << big.err;
}

}  // namespace
}  // namespace lockfleet::testing
