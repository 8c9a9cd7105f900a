// `lockfleet lock NAME NAME... -- COMMAND` (the multi-lock) end to end: the
// real binary against a private redis-server and, for Kafka, a `lockfleet
// broker` process. Every wait is a poll with a generous deadline; no
// assertion depends on tight timing.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cli/broker_process.h"
#include "cli/cli_process.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/multi_lock.h"
#include "lockfleet/lockcore/redis_client.h"
#include "support/redis_server.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::seconds;

// Two names with spaces (as a shell script must cope with); kA sorts first.
constexpr char kA[] = "stock: A";
constexpr char kB[] = "stock: B";

// The documented way for COMMAND to walk its locks (lockfleet lock --help):
// prints "NAME|FENCE" per lock, in the order the NAMEs were given.
constexpr char kPrintLocks[] = R"sh(
i=1; while [ "$i" -le "$LOCKFLEET_LOCKS" ]; do
  eval "name=\$LOCKFLEET_NAME_$i fence=\$LOCKFLEET_FENCE_$i"
  printf '%s|%s\n' "$name" "$fence"; i=$((i + 1)); done)sh";

class MultiLockCliTest : public ::testing::Test {
 protected:
  MultiLockCliTest()
      : redis_(
            std::make_shared<RedisClient>(RedisOptions{.url = server_.url()})),
        client_(redis_) {}

  // lockfleet lock --redis URL OPTIONS... NAMES... -- sh -c SCRIPT
  std::vector<std::string> Lock(const std::vector<std::string>& options,
                                const std::vector<std::string>& names,
                                const std::string& script) const {
    std::vector<std::string> args{"lock", "--redis", server_.url()};
    args.insert(args.end(), options.begin(), options.end());
    args.insert(args.end(), names.begin(), names.end());
    args.insert(args.end(), {"--", "sh", "-c", script});
    return args;
  }

  std::string File(const std::string& name) const { return dir_.File(name); }

  // A single-lock holder of `name` that runs until File("release") exists;
  // returns once its COMMAND started.
  std::unique_ptr<CliProcess> StartHolder(
      const std::string& name, const std::vector<std::string>& options = {}) {
    auto holder = std::make_unique<CliProcess>(
        Lock(options, {name},
             "touch '" + File("held") + "'; " + UntilExists(File("release"))));
    EXPECT_TRUE(WaitForFile(File("held"))) << holder->Stderr();
    return holder;
  }

  void ReleaseHolder(CliProcess& holder) {
    WriteFile(File("release"), "");
    EXPECT_EQ(holder.Wait(), 0) << holder.Stderr();
  }

  RedisServer server_;
  TempDir dir_;
  std::shared_ptr<RedisClient> redis_;
  LockClient client_;
};

TEST_F(MultiLockCliTest, CommandSeesEveryFenceWhileBothLocksAreHeld) {
  // Given B first: the numbered variables follow the command line. Stale
  // variables of an enclosing `lockfleet lock` are not passed on.
  CliProcess holder(
      Lock({"-v"}, {kB, kA},
           std::string("{ echo \"n=$LOCKFLEET_LOCKS\"; echo "
                       "\"single=${LOCKFLEET_NAME-unset}/"
                       "${LOCKFLEET_FENCE-unset}\"; echo "
                       "\"stale=${LOCKFLEET_FENCE_3-unset}\"; ") +
               kPrintLocks + "; } > '" + File("env") + "'; touch '" +
               File("held") + "'; " + UntilExists(File("release"))),
      {"LOCKFLEET_FENCE=7", "LOCKFLEET_FENCE_3=7"});
  ASSERT_TRUE(WaitForFile(File("held"))) << holder.Stderr();
  const LockInfo a = client_.Inspect(kA);
  const LockInfo b = client_.Inspect(kB);
  ASSERT_TRUE(a.locked);
  ASSERT_TRUE(b.locked);
  EXPECT_EQ(a.owner, b.owner) << "one owner for the set";
  EXPECT_EQ(SplitLines(ReadFile(File("env"))),
            (std::vector<std::string>{
                "n=2", "single=unset/unset", "stale=unset",
                std::string(kB) + "|" + std::to_string(b.fence),
                std::string(kA) + "|" + std::to_string(a.fence)}));
  // Each is an ordinary lock: a single lock of either name is refused.
  EXPECT_EQ(RunCli(Lock({"--wait", "0"}, {kA}, "exit 0")).status, 75);

  WriteFile(File("release"), "");
  EXPECT_EQ(holder.Wait(), 0) << holder.Stderr();
  EXPECT_FALSE(client_.Inspect(kA).locked);
  EXPECT_FALSE(client_.Inspect(kB).locked);
  EXPECT_NE(
      holder.Stderr().find("acquired locks '" + std::string(kA) + "' (fence " +
                           std::to_string(a.fence) + "), '" + kB + "' (fence " +
                           std::to_string(b.fence) + ")"),
      std::string::npos)
      << holder.Stderr();
}

TEST_F(MultiLockCliTest, OneLockGivesTheNumberedVariablesToo) {
  const CliResult result = RunCli(
      Lock({}, {kA},
           std::string("echo \"n=$LOCKFLEET_LOCKS $LOCKFLEET_FENCE\"; ") +
               kPrintLocks));
  ASSERT_EQ(result.status, 0) << result.err;
  const std::vector<std::string> lines = SplitLines(result.out);
  ASSERT_EQ(lines.size(), 2u) << result.out;
  const std::string fence = lines[0].substr(lines[0].find(' ') + 1);
  EXPECT_EQ(lines[0], "n=1 " + fence);
  EXPECT_EQ(lines[1], std::string(kA) + "|" + fence);
}

// Overlapping names in opposite orders (and a single lock of one of them):
// the critical sections never overlap and nobody waits out its --wait.
// Without Kafka a waiter learns of its turn within its park cap: 250ms keeps
// the test short.
TEST_F(MultiLockCliTest, OppositeOrdersNeverOverlapNorDeadlock) {
  const std::string log = File("log");
  const std::string script = "echo \"start $(date +%s%N)\" >> '" + log +
                             "'; sleep 0.1; echo \"end $(date +%s%N)\" >> '" +
                             log + "'";
  const std::vector<std::vector<std::string>> orders = {
      {"x", "y"}, {"y", "x"}, {"x", "y"}, {"y", "x"}, {"x"}, {"y", "z", "x"}};
  std::vector<std::unique_ptr<CliProcess>> lockers;
  for (const auto& names : orders) {
    lockers.push_back(std::make_unique<CliProcess>(
        Lock({"--wait", "60s", "--park-cap", "250ms"}, names, script)));
  }
  for (auto& locker : lockers) {
    EXPECT_EQ(locker->Wait(seconds(90)), 0) << locker->Stderr();
  }
  const std::vector<std::string> lines = SplitLines(ReadFile(log));
  ASSERT_EQ(lines.size(), 2 * orders.size()) << ReadFile(log);
  int64_t previous_end = 0;
  for (size_t i = 0; i < lines.size(); i += 2) {
    ASSERT_EQ(lines[i].rfind("start ", 0), 0u) << ReadFile(log);
    ASSERT_EQ(lines[i + 1].rfind("end ", 0), 0u) << ReadFile(log);
    const int64_t start = std::stoll(lines[i].substr(6));
    EXPECT_GE(start, previous_end) << ReadFile(log);
    previous_end = std::stoll(lines[i + 1].substr(4));
  }
  for (const char* name : {"x", "y", "z"})
    EXPECT_FALSE(client_.Inspect(name).locked) << name;
}

// All-or-nothing: kA (first in order) is taken, kB is not granted in time,
// so kA is given back; the message names kB and its holder.
TEST_F(MultiLockCliTest, OneNameHeldTimesOutNamingItAndHoldsNothing) {
  auto holder = StartHolder(kB);
  const std::string owner = client_.Inspect(kB).owner;
  const CliResult result = RunCli(
      Lock({"--wait", "300ms"}, {kA, kB}, "touch '" + File("ran") + "'"));
  EXPECT_EQ(result.status, 75) << result.err;
  EXPECT_FALSE(FileExists(File("ran")));
  ASSERT_EQ(SplitLines(result.err).size(), 1u) << result.err;
  EXPECT_EQ(result.err.rfind("lockfleet: timed out after 300ms waiting for "
                             "lock '" +
                                 std::string(kB) + "' of '" + kA + "', '" + kB +
                                 "': held by '" + owner + "'",
                             0),
            0u)
      << result.err;
  const LockInfo a = client_.Inspect(kA);
  EXPECT_FALSE(a.locked) << "a strict subset left held";
  EXPECT_TRUE(a.queue.empty());
  EXPECT_EQ(client_.Inspect(kB).owner, owner);

  const CliResult busy =
      RunCli(Lock({"--wait", "0"}, {kB, kA}, "touch '" + File("ran") + "'"));
  EXPECT_EQ(busy.status, 75) << busy.err;
  EXPECT_NE(busy.err.find("lock '" + std::string(kB) + "' of '" + kB + "', '" +
                          kA + "' is busy (--wait 0)"),
            std::string::npos)
      << busy.err;
  EXPECT_FALSE(client_.Inspect(kA).locked);
  ReleaseHolder(*holder);
  EXPECT_FALSE(FileExists(File("ran")));
}

TEST_F(MultiLockCliTest, SignalWhileWaitingHoldsNothing) {
  auto holder = StartHolder(kB);
  CliProcess waiter(Lock({}, {kA, kB}, "touch '" + File("ran") + "'"));
  // It holds kA and queues for kB.
  ASSERT_TRUE(WaitUntil([&] {
    return !client_.Inspect(kB).queue.empty() || !waiter.Running();
  })) << waiter.Stderr();
  EXPECT_TRUE(client_.Inspect(kA).locked);
  waiter.Signal(SIGTERM);
  EXPECT_EQ(waiter.Wait(seconds(20)), 128 + SIGTERM) << waiter.Stderr();
  EXPECT_EQ(waiter.Stderr(),
            "lockfleet: interrupted by SIGTERM while waiting for locks '" +
                std::string(kA) + "', '" + kB + "'\n");
  EXPECT_FALSE(client_.Inspect(kA).locked);
  ReleaseHolder(*holder);
  EXPECT_FALSE(FileExists(File("ran")));
}

TEST_F(MultiLockCliTest, BadNameListsExitTwo) {
  const std::string url = server_.url();
  const std::string ran = File("ran");
  std::vector<std::string> too_many{"lock", "--redis", url};
  for (size_t i = 0; i <= kMaxMultiLockNames; ++i)
    too_many.push_back("n" + std::to_string(i));
  too_many.insert(too_many.end(), {"--", "touch", ran});
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"lock", "--redis", url, "a", "b", "a", "--", "touch", ran},
       "lock NAME given more than once: 'a'"},
      {{"lock", "--redis", url, "a", "b", "b", "a", "--", "touch", ran},
       "lock NAMEs given more than once: 'a', 'b'"},
      {{"lock", "--redis", url, "a", "", "--", "touch", ran},
       "lock NAME 2 of 2 is empty: lock names must not be empty"},
      // Not shown: the words past the first, which may be COMMAND's
      // arguments (a password).
      {{"lock", "--redis", url, "a", "b", "touch", ran},
       "missing '-- COMMAND' after lock NAME 'a' and 3 more words: put '--' "
       "between the NAME(s) and COMMAND"},
      {{"lock", "--redis", url, "a", "b"},
       "missing '-- COMMAND' after lock NAME 'a' and 1 more word: put '--' "
       "between the NAME(s) and COMMAND"},
      {{"lock", "--redis", url, "a", "b", "--"}, "missing COMMAND after '--'"},
      {too_many, "257 lock NAMEs: at most 256 at once"},
  };
  for (const auto& [args, message] : cases) {
    const CliResult result = RunCli(args);
    EXPECT_EQ(result.status, 2) << message << "\n" << result.err;
    EXPECT_EQ(result.err.rfind("lockfleet: " + message + "\n", 0), 0u)
        << result.err;
    EXPECT_EQ(result.err.find(ran), std::string::npos) << result.err;
  }
  // A name lockcore refuses ('}' first) is a usage error too.
  const CliResult bad =
      RunCli({"lock", "--redis", url, "a", "}b", "--", "touch", ran});
  EXPECT_EQ(bad.status, 2) << bad.err;
  EXPECT_FALSE(FileExists(ran));
  EXPECT_FALSE(client_.Inspect("a").locked);
}

TEST_F(MultiLockCliTest, RedisUnreachableExits69) {
  const CliResult result =
      RunCli({"lock", "--redis",
              "redis://127.0.0.1:" + std::to_string(UnusedTcpPort()), "a", "b",
              "--", "touch", File("ran")});
  EXPECT_EQ(result.status, 69) << result.err;
  EXPECT_NE(result.err.find("redis_unavailable"), std::string::npos)
      << result.err;
  EXPECT_FALSE(FileExists(File("ran")));
}

// One lock's key deleted while COMMAND runs: the watchdog's next renewal
// (every lease/3) finds it gone, COMMAND's group gets SIGTERM, exit 76
// naming that lock, and the other lock is released.
TEST_F(MultiLockCliTest, ALostLeaseStopsCommandAndExits76) {
  CliProcess holder(Lock({"--lease", "1s"}, {kA, kB},
                         "trap 'echo got-term > \"" + File("term") +
                             "\"; exit 0' TERM; touch '" + File("started") +
                             "'; while :; do sleep 0.02; done"));
  ASSERT_TRUE(WaitForFile(File("started"))) << holder.Stderr();
  const int64_t fence = client_.Inspect(kB).fence;
  ASSERT_EQ(redis_->Execute({"DEL", "lockfleet:{" + std::string(kB) + "}:lock"})
                .integer,
            1);
  EXPECT_EQ(holder.Wait(seconds(30)), 76) << holder.Stderr();
  EXPECT_EQ(ReadFile(File("term")), "got-term\n");
  // kA too, should its renewal have been late on a loaded machine (then
  // "lost locks 'A' (fence ...), 'B' (fence ...) of ...").
  const std::string err = holder.Stderr();
  EXPECT_NE(err.find("lockfleet: lost lock"), std::string::npos) << err;
  EXPECT_NE(err.find("'" + std::string(kB) + "' (fence " +
                     std::to_string(fence) + ")"),
            std::string::npos)
      << err;
  EXPECT_NE(
      err.find(" of '" + std::string(kA) + "', '" + kB + "' while COMMAND ran"),
      std::string::npos)
      << err;
  EXPECT_FALSE(client_.Inspect(kA).locked);
  EXPECT_FALSE(client_.Inspect(kB).locked);
}

// One lock's key deleted and the lock taken by someone else while COMMAND
// runs, before a renewal (every 10 s) noticed: when COMMAND ends, lockfleet
// releases its other lock, refuses to touch the new holder's (kNotOwner),
// and exits 76 naming the lock it no longer held.
TEST_F(MultiLockCliTest, ALockTakenOverIsNotReleasedByTheOldHolder) {
  CliProcess holder(
      Lock({"--lease", "30s"}, {kA, kB},
           "touch '" + File("started") + "'; " + UntilExists(File("release"))));
  ASSERT_TRUE(WaitForFile(File("started"))) << holder.Stderr();
  const int64_t old_fence = client_.Inspect(kB).fence;
  ASSERT_EQ(redis_->Execute({"DEL", "lockfleet:{" + std::string(kB) + "}:lock"})
                .integer,
            1);
  AcquireResult other = client_.TryAcquire(kB);
  ASSERT_TRUE(other);
  WriteFile(File("release"), "");
  EXPECT_EQ(holder.Wait(seconds(30)), 76) << holder.Stderr();
  EXPECT_NE(
      holder.Stderr().find("lockfleet: lost lock '" + std::string(kB) +
                           "' (fence " + std::to_string(old_fence) + ") of '" +
                           kA + "', '" + kB + "' while COMMAND ran"),
      std::string::npos)
      << holder.Stderr();
  const LockInfo b = client_.Inspect(kB);
  EXPECT_TRUE(b.locked) << "the new holder's lock was released";
  EXPECT_EQ(b.owner, other.lease.owner());
  EXPECT_EQ(b.fence, other.lease.fence());
  EXPECT_FALSE(client_.Inspect(kA).locked);
  EXPECT_EQ(other.lease.Release(), ReleaseStatus::kReleased);
}

// With Kafka, the multi-lock waits for its consumer before it parks, so the
// holder's unlock event wakes it: far sooner than its own bounds (the
// holder's 30 s lease, a 60 s park cap).
TEST_F(MultiLockCliTest, KafkaWakesAWaitingMultiLock) {
  BrokerProcess broker;
  auto holder = StartHolder(kB, {"--kafka", broker.bootstrap()});
  CliProcess waiter(
      Lock({"--kafka", broker.bootstrap(), "--park-cap", "60s", "-v"}, {kA, kB},
           "touch '" + File("ran") + "'"));
  ASSERT_TRUE(WaitUntil(
      [&] {
        return waiter.Stderr().find("Kafka unlock events on") !=
                   std::string::npos ||
               !waiter.Running();
      },
      seconds(30)))
      << waiter.Stderr();
  ASSERT_TRUE(waiter.Running()) << waiter.Stderr();
  EXPECT_NE(waiter.Stderr().find("waiting for locks '" + std::string(kA) +
                                 "', '" + kB + "': '" + kB + "' held by "),
            std::string::npos)
      << waiter.Stderr();
  ReleaseHolder(*holder);
  EXPECT_EQ(waiter.Wait(seconds(15)), 0) << waiter.Stderr();
  EXPECT_TRUE(FileExists(File("ran")));
}

}  // namespace
}  // namespace lockfleet::testing
