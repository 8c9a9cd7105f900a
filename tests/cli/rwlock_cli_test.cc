// `lockfleet lock --read|--write NAME -- COMMAND` (the read-write lock) end
// to end: the real binary against a private redis-server. Every wait is a
// poll with a generous deadline; no assertion depends on tight timing.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include "cli/cli_process.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/redis_client.h"
#include "lockfleet/lockcore/rwlock.h"
#include "support/redis_server.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::seconds;

// COMMAND's view of its hold: "NAME|MODE|TOKEN|FENCE|LOCKS|NAME_1|FENCE_1",
// with "unset" for a variable it did not get.
constexpr char kPrintHold[] =
    "echo \"$LOCKFLEET_NAME|${LOCKFLEET_MODE-unset}|${LOCKFLEET_TOKEN-unset}|"
    "${LOCKFLEET_FENCE-unset}|$LOCKFLEET_LOCKS|$LOCKFLEET_NAME_1|"
    "${LOCKFLEET_FENCE_1-unset}\"";

class RwLockCliTest : public ::testing::Test {
 protected:
  RwLockCliTest()
      : redis_(
            std::make_shared<RedisClient>(RedisOptions{.url = server_.url()})),
        client_(redis_) {}

  // lockfleet lock --redis URL OPTIONS... NAME -- sh -c SCRIPT
  std::vector<std::string> Lock(const std::vector<std::string>& options,
                                const std::string& name,
                                const std::string& script) const {
    std::vector<std::string> args{"lock", "--redis", server_.url()};
    args.insert(args.end(), options.begin(), options.end());
    args.insert(args.end(), {name, "--", "sh", "-c", script});
    return args;
  }

  // A holder of `name` in `mode` ("--read" or "--write") that writes its
  // hold (kPrintHold) to File(tag), touches File(tag + ".held") and runs
  // until File(tag + ".release") exists. Does not wait for it.
  std::unique_ptr<CliProcess> StartHolder(
      const std::string& mode, const std::string& name, const std::string& tag,
      const std::vector<std::string>& options = {}) {
    std::vector<std::string> all{mode};
    all.insert(all.end(), options.begin(), options.end());
    return std::make_unique<CliProcess>(
        Lock(all, name,
             std::string(kPrintHold) + " > '" + File(tag) + "'; touch '" +
                 File(tag + ".held") + "'; " +
                 UntilExists(File(tag + ".release"))),
        std::vector<std::string>{"LOCKFLEET_FENCE=7", "LOCKFLEET_MODE=stale"});
  }

  ReadWriteLock Rw(const std::string& name) {
    return client_.ReadWriteLock(name);
  }

  std::string File(const std::string& name) const { return dir_.File(name); }

  RedisServer server_;
  TempDir dir_;
  std::shared_ptr<RedisClient> redis_;
  LockClient client_;
};

// Two --read holders of one name run at the same time (each is held while
// the other starts), with the read environment: a token, no fence.
TEST_F(RwLockCliTest, TwoReadersRunAtOnce) {
  auto first = StartHolder("--read", "catalogue", "r1");
  ASSERT_TRUE(WaitForFile(File("r1.held"))) << first->Stderr();
  auto second = StartHolder("--read", "catalogue", "r2", {"--wait", "0"});
  ASSERT_TRUE(WaitForFile(File("r2.held"))) << second->Stderr();
  EXPECT_TRUE(first->Running()) << "both hold it at once";
  const RwInfo info = Rw("catalogue").Inspect();
  EXPECT_EQ(info.holders.size(), 2u);
  EXPECT_FALSE(info.write_locked());
  EXPECT_FALSE(client_.Inspect("catalogue").locked)
      << "the plain lock of the name is another lock";
  for (const char* tag : {"r1", "r2"}) {
    const std::vector<std::string> env = SplitLines(ReadFile(File(tag)));
    ASSERT_EQ(env.size(), 1u) << tag;
    EXPECT_EQ(env[0], "catalogue|read|0|unset|1|catalogue|unset")
        << "never written: token 0; no fence, not the inherited one";
  }
  WriteFile(File("r1.release"), "");
  WriteFile(File("r2.release"), "");
  EXPECT_EQ(first->Wait(), 0) << first->Stderr();
  EXPECT_EQ(second->Wait(), 0) << second->Stderr();
  EXPECT_TRUE(Rw("catalogue").Inspect().holders.empty());
}

// A --write waits for the --read holder before it (queued, COMMAND not
// started), then runs with its fencing token; a --read arriving while it
// runs waits for it in turn and reads the writer's token.
TEST_F(RwLockCliTest, AWriterWaitsForAReaderAndAReaderForAWriter) {
  auto reader = StartHolder("--read", "catalogue", "r1");
  ASSERT_TRUE(WaitForFile(File("r1.held"))) << reader->Stderr();
  auto writer = StartHolder("--write", "catalogue", "w1",
                            {"-v", "--park-cap", "250ms", "--wait", "1m"});
  ASSERT_TRUE(WaitUntil([&] { return Rw("catalogue").Inspect().waiters == 1; },
                        seconds(30)))
      << writer->Stderr();
  EXPECT_FALSE(FileExists(File("w1.held")));
  EXPECT_NE(writer->Stderr().find("waiting for read-write lock 'catalogue' "
                                  "(write) held by 1 reader '"),
            std::string::npos)
      << writer->Stderr();

  WriteFile(File("r1.release"), "");
  EXPECT_EQ(reader->Wait(), 0) << reader->Stderr();
  ASSERT_TRUE(WaitForFile(File("w1.held"))) << writer->Stderr();
  EXPECT_TRUE(Rw("catalogue").Inspect().write_locked());
  const std::vector<std::string> w = SplitLines(ReadFile(File("w1")));
  ASSERT_EQ(w.size(), 1u);
  const std::vector<std::string> parts = [&] {
    std::vector<std::string> out;
    size_t start = 0;
    for (size_t bar; (bar = w[0].find('|', start)) != std::string::npos;
         start = bar + 1) {
      out.push_back(w[0].substr(start, bar - start));
    }
    out.push_back(w[0].substr(start));
    return out;
  }();
  ASSERT_EQ(parts.size(), 7u) << w[0];
  EXPECT_EQ(parts[1], "write");
  const std::string token = parts[2];
  EXPECT_GT(std::stoll(token), 0);
  EXPECT_EQ(parts[3], token) << "a writer's token is its fence";
  EXPECT_EQ(parts[6], token);

  auto late = StartHolder("--read", "catalogue", "r2",
                          {"--park-cap", "250ms", "--wait", "1m"});
  ASSERT_TRUE(WaitUntil([&] { return Rw("catalogue").Inspect().waiters == 1; },
                        seconds(30)))
      << late->Stderr();
  EXPECT_FALSE(FileExists(File("r2.held")));
  WriteFile(File("w1.release"), "");
  EXPECT_EQ(writer->Wait(), 0) << writer->Stderr();
  EXPECT_NE(writer->Stderr().find("acquired read-write lock 'catalogue' "
                                  "(write, fence " +
                                  token + ")"),
            std::string::npos)
      << writer->Stderr();
  ASSERT_TRUE(WaitForFile(File("r2.held"))) << late->Stderr();
  EXPECT_EQ(SplitLines(ReadFile(File("r2"))).at(0),
            "catalogue|read|" + token + "|unset|1|catalogue|unset")
      << "a reader's token is the last write grant's";
  WriteFile(File("r2.release"), "");
  EXPECT_EQ(late->Wait(), 0) << late->Stderr();
}

// Exit statuses: COMMAND's own; 75 when busy (the holders named); 76 when
// the hold is lost while COMMAND runs; 143 for a SIGTERM while waiting,
// which leaves nothing queued.
TEST_F(RwLockCliTest, ExitStatuses) {
  EXPECT_EQ(RunCli(Lock({"--read"}, "x", "exit 3")).status, 3);
  EXPECT_EQ(RunCli(Lock({"--write"}, "x", "exit 4")).status, 4);

  RwLease held = Rw("x").Acquire(RwMode::kWrite, {.owner = "exporter"});
  const CliResult busy = RunCli(Lock({"--read", "--wait", "0"}, "x", "exit 0"));
  EXPECT_EQ(busy.status, 75) << busy.err;
  EXPECT_NE(busy.err.find("read-write lock 'x' (read) is busy (--wait 0): "
                          "held by writer 'exporter' (remaining TTL "),
            std::string::npos)
      << busy.err;
  const CliResult timed_out =
      RunCli(Lock({"--write", "--wait", "300ms"}, "x", "exit 0"));
  EXPECT_EQ(timed_out.status, 75) << timed_out.err;
  EXPECT_NE(timed_out.err.find("timed out after 300ms waiting for read-write "
                               "lock 'x' (write): held by writer 'exporter'"),
            std::string::npos)
      << timed_out.err;
  EXPECT_EQ(RunCli(Lock({"--wait", "0"}, "x", "exit 5")).status, 5)
      << "the plain lock 'x' is free";

  CliProcess waiter(Lock({"--read", "-v"}, "x", "exit 0"));
  ASSERT_TRUE(
      WaitUntil([&] { return Rw("x").Inspect().waiters == 1; }, seconds(30)))
      << waiter.Stderr();
  waiter.Signal(SIGTERM);
  EXPECT_EQ(waiter.Wait(), 143) << waiter.Stderr();
  EXPECT_NE(waiter.Stderr().find("interrupted by SIGTERM while waiting for "
                                 "read-write lock 'x' (read)"),
            std::string::npos)
      << waiter.Stderr();
  EXPECT_EQ(Rw("x").Inspect().waiters, 0);
  ASSERT_EQ(held.Release(), ReleaseStatus::kReleased);

  // Lost: the lock's sets vanish (the next renewal finds its set gone).
  CliProcess holder(Lock({"--read", "--lease", "600ms", "--kill-after", "5s"},
                         "lost",
                         "touch '" + File("held") +
                             "'; trap 'exit 0' TERM; while :; do sleep 0.05; "
                             "done"));
  ASSERT_TRUE(WaitForFile(File("held"))) << holder.Stderr();
  redis_->Execute(
      {"DEL", "lockfleet:{lost}:rwlock", "lockfleet:{lost}:rwlock:expiry"});
  EXPECT_EQ(holder.Wait(seconds(20)), 76) << holder.Stderr();
  EXPECT_NE(holder.Stderr().find("lost read-write lock 'lost' (read, token 0) "
                                 "while COMMAND ran: its lease expired"),
            std::string::npos)
      << holder.Stderr();
}

TEST_F(RwLockCliTest, BadArgumentsExit2WithAReason) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::string url = server_.url();
  const std::vector<Case> cases = {
      {{"lock", "--redis", url, "--read", "--write", "a", "--", "true"},
       "--read and --write exclude each other"},
      {{"lock", "--redis", url, "--read", "a", "b", "--", "true"},
       "--read takes one lock NAME, not 2: a read-write lock is one lock"},
      {{"lock", "--redis", url, "--write", "a", "b", "c", "--", "true"},
       "--write takes one lock NAME, not 3"},
      {{"lock", "--redis", url, "--write", "--", "true"},
       "missing lock NAME before '--'"},
      {{"lock", "--redis", url, "--read", "a", "sh", "curl u:secret@h"},
       "missing '-- COMMAND' after lock NAME 'a'"},
      {{"lock", "--redis", url, "--read", "", "--", "true"},
       "lock NAME must not be empty"},
  };
  for (const Case& c : cases) {
    const CliResult result = RunCli(c.args);
    EXPECT_EQ(result.status, 2) << c.message << "\n" << result.err;
    EXPECT_NE(result.err.find(c.message), std::string::npos) << result.err;
    EXPECT_EQ(result.err.find("secret"), std::string::npos) << result.err;
  }
  const CliResult help = RunCli({"lock", "--help"});
  for (const char* needle : {"--read", "--write", "LOCKFLEET_MODE",
                             "LOCKFLEET_TOKEN", "--read|--write NAME"}) {
    EXPECT_NE(help.out.find(needle), std::string::npos) << needle;
  }
}

}  // namespace
}  // namespace lockfleet::testing
