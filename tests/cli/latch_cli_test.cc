// `lockfleet latch set|count-down|wait|count` end to end: the real binary
// against a private redis-server, and a `lockfleet broker` process for the
// opened event that wakes `latch wait` processes at once.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <memory>
#include <string>
#include <vector>

#include "cli/broker_process.h"
#include "cli/cli_process.h"
#include "support/redis_server.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class LatchCliTest : public ::testing::Test {
 protected:
  // `lockfleet latch ARGS... --redis URL [extra...]`.
  CliResult Latch(std::vector<std::string> args,
                  const std::vector<std::string>& extra = {}) {
    args.insert(args.begin(), "latch");
    args.insert(args.end(), {"--redis", server_.url()});
    args.insert(args.end(), extra.begin(), extra.end());
    return RunCli(args);
  }
  std::unique_ptr<CliProcess> StartWait(const std::string& name,
                                        std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"latch", "wait", name, "--redis",
                                  server_.url()};
    args.insert(args.end(), extra.begin(), extra.end());
    return std::make_unique<CliProcess>(args);
  }

  RedisServer server_;
  TempDir dir_;
};

TEST_F(LatchCliTest, SetCountDownAndWait) {
  CliResult r = Latch({"count", "merge"});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.out.find("no latch 'merge'"), std::string::npos) << r.out;

  r = Latch({"set", "merge", "2"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("set to 2"), std::string::npos) << r.out;
  r = Latch({"set", "merge", "5"});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.out.find("exists already: 2 left"), std::string::npos) << r.out;

  r = Latch({"wait", "merge", "--timeout", "0"});
  EXPECT_EQ(r.status, 75) << r.out;
  EXPECT_NE(r.err.find("not open after 0"), std::string::npos) << r.err;

  r = Latch({"count-down", "merge", "--id", "shard-1"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("1 left"), std::string::npos) << r.out;
  r = Latch({"count-down", "merge", "--id", "shard-1"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("1 left"), std::string::npos) << "counted twice";
  r = Latch({"count", "merge"});
  EXPECT_EQ(r.out, "1\n");

  r = Latch({"count-down", "merge", "--id", "shard-2"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("opened 'merge'; no Kafka"), std::string::npos) << r.out;
  r = Latch({"wait", "merge"});
  EXPECT_EQ(r.status, 0) << r.err;
  r = Latch({"count-down", "merge", "--id", "shard-3"});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.out.find("was open already"), std::string::npos) << r.out;
  r = Latch({"count-down", "nothing", "--id", "shard-1"});
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.out.find("no latch 'nothing'"), std::string::npos) << r.out;
}

TEST_F(LatchCliTest, TheOpeningWakesWaitingProcessesThroughKafka) {
  BrokerProcess broker;
  // The deployment's config: its Redis and Kafka, and a park cap far beyond
  // the test, so that only the opened event can wake the waiters in time.
  const std::string config = dir_.File("fleet.yaml");
  WriteFile(config, "redis:\n  url: " + server_.url() +
                        "\nkafka:\n  bootstrap: " + broker.bootstrap() +
                        "\nlocks:\n  park_cap: 1h\n");
  ASSERT_EQ(RunCli({"latch", "set", "go", "1", "--config", config}).status, 0);
  std::vector<std::unique_ptr<CliProcess>> waiting;
  for (int i = 0; i < 2; ++i) {
    waiting.push_back(std::make_unique<CliProcess>(
        std::vector<std::string>{"latch", "wait", "go", "--config", config}));
  }
  // Both have asked Redis, found 1 left and park (for up to an hour).
  EXPECT_FALSE(waiting[0]->Wait(milliseconds(2000))) << waiting[0]->Stderr();
  const CliResult opened =
      RunCli({"latch", "count-down", "go", "--id", "last", "--config", config});
  ASSERT_EQ(opened.status, 0) << opened.err;
  EXPECT_NE(opened.out.find("published the opened event"), std::string::npos)
      << opened.out;
  for (auto& w : waiting) EXPECT_EQ(w->Wait(seconds(30)), 0) << w->Stderr();
}

TEST_F(LatchCliTest, AWaitEndsOnItsTimeoutOrASignal) {
  ASSERT_EQ(Latch({"set", "slow", "3"}).status, 0);
  auto timed = StartWait("slow", {"--timeout", "300ms"});
  EXPECT_EQ(timed->Wait(seconds(30)), 75) << timed->Stderr();
  auto waiting = StartWait("slow");
  EXPECT_FALSE(waiting->Wait(milliseconds(300))) << waiting->Stderr();
  waiting->Signal(SIGTERM);
  EXPECT_EQ(waiting->Wait(seconds(30)), 128 + SIGTERM) << waiting->Stderr();
}

TEST_F(LatchCliTest, BadArgumentsAreUsageErrors) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"set", "x", "0"},
           {"set", "x", "1000001"},
           {"set", "x", "-2"},
           {"set", "x", "two"},
           {"set", "x", "1", "--open-ttl", "0s"},
           {"set", "x", "1", "--open-ttl", "30s"},
           {"set", "x", "1", "--open-ttl", "31d"},
           {"set", "x", "1", "--open-ttl", "soon"},
           {"set", "", "1"},
           {"wait", "x", "--timeout", "-1s"},
           {"count-down", "x", "--id", std::string(257, 'i')},
           {"count-down", "x"},
           {"count-down", "x", "--id", ""},
           {"frobnicate", "x"},
       }) {
    const CliResult r = Latch(args);
    EXPECT_EQ(r.status, 2) << args[0] << " " << args.back() << ": " << r.err;
    EXPECT_NE(r.err.find("lockfleet: "), std::string::npos) << r.err;
  }
  EXPECT_EQ(Latch({"count", "x"}).status, 1) << "nothing was set";
}

TEST_F(LatchCliTest, RedisDownIsUnavailable) {
  const std::string url = server_.url();
  server_.Kill();
  const CliResult r = RunCli({"latch", "count", "x", "--redis", url});
  EXPECT_EQ(r.status, 69) << r.err;
}

}  // namespace
}  // namespace lockfleet::testing
