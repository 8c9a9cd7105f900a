// `lockfleet locks`, `inspect` and `unlock --force` end to end: the real
// binary against a private redis-server (and a `lockfleet broker` process
// for the force event). Locks are held by an in-process LockClient with
// explicit leases of 60 s, so nothing expires during a test.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli/broker_process.h"
#include "cli/cli_process.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/redis_client.h"
#include "lockfleet/notifier/kafka_notifier.h"
#include "support/redis_server.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using json = nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr milliseconds kLease{60000};

class LocksToolsTest : public ::testing::Test {
 protected:
  LocksToolsTest()
      : redis_(
            std::make_shared<RedisClient>(RedisOptions{.url = server_.url()})),
        holder_(redis_) {}

  CliResult Run(std::vector<std::string> args) {
    args.insert(args.begin() + 1, {"--redis", server_.url()});
    return RunCli(args);
  }

  // A waiter queued on `name` (fair mode) until the test ends it.
  void QueueWaiter(const std::string& name) {
    waiters_.push_back(std::async(std::launch::async, [this, name] {
      LockClient waiter(redis_);
      waiter.AcquireFor(name, seconds(60), {.stop = stop_.get_token()});
    }));
    ASSERT_TRUE(
        WaitUntil([&] { return !holder_.Inspect(name).queue.empty(); }));
  }

  ~LocksToolsTest() override {
    stop_.request_stop();
    for (auto& w : waiters_) w.wait();
  }

  RedisServer server_;
  TempDir dir_;
  std::shared_ptr<RedisClient> redis_;
  LockClient holder_;
  std::stop_source stop_;
  std::vector<std::future<void>> waiters_;
};

TEST_F(LocksToolsTest, LocksListsHeldLocksMostWaitersFirst) {
  const CliResult none = Run({"locks"});
  EXPECT_EQ(none.status, 1) << none.err;
  EXPECT_NE(none.out.find("no locks held"), std::string::npos) << none.out;

  AcquireResult quiet = holder_.TryAcquire("app/quiet", {.lease = kLease});
  AcquireResult busy = holder_.TryAcquire("app/busy", {.lease = kLease});
  AcquireResult other = holder_.TryAcquire("zz*odd", {.lease = kLease});
  ASSERT_TRUE(quiet && busy && other);
  QueueWaiter("app/busy");

  const CliResult all = Run({"locks", "--json"});
  ASSERT_EQ(all.status, 0) << all.err;
  const json listed = json::parse(all.out);
  ASSERT_EQ(listed["locks"].size(), 3u) << all.out;
  EXPECT_FALSE(listed["truncated"].get<bool>());
  const json& first = listed["locks"][0];
  EXPECT_EQ(first["name"], "app/busy");  // the one with a waiter
  EXPECT_EQ(first["owner"], busy.lease.owner());
  EXPECT_EQ(first["fence"], busy.lease.fence());
  EXPECT_EQ(first["hold_count"], 1);
  EXPECT_GT(first["ttl_ms"].get<int64_t>(), 30000);
  EXPECT_EQ(first["queue"].size(), 1u);

  const CliResult table = Run({"locks"});
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_EQ(table.out.rfind("LOCK\tHOLDER\tHOLDS\tTTL\tFENCE\tPENDING\tQUEUE\n"
                            "app/busy\t" +
                                busy.lease.owner(),
                            0),
            0u)
      << table.out;

  // --prefix is literal ('*' in a name is no glob); --match is a glob.
  const json odd = json::parse(Run({"locks", "--json", "--prefix", "zz*"}).out);
  ASSERT_EQ(odd["locks"].size(), 1u);
  EXPECT_EQ(odd["locks"][0]["name"], "zz*odd");
  EXPECT_EQ(
      json::parse(Run({"locks", "--json", "--prefix", "zz*x"}).out)["locks"]
          .size(),
      0u);
  const json app =
      json::parse(Run({"locks", "--json", "--match", "app/*"}).out);
  EXPECT_EQ(app["locks"].size(), 2u);
  const json limited =
      json::parse(Run({"locks", "--json", "--limit", "1"}).out);
  EXPECT_EQ(limited["locks"].size(), 1u);
  EXPECT_TRUE(limited["truncated"].get<bool>());

  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"locks", "--match", "a["},
        {"locks", "--match", ""},
        {"locks", "--match", "a*", "--prefix", "a"},
        {"locks", "--limit", "0"}}) {
    const CliResult result = Run(bad);
    EXPECT_EQ(result.status, 2) << bad[2] << ": " << result.err;
  }
}

TEST_F(LocksToolsTest, InspectShowsOneLockInFull) {
  AcquireResult held = holder_.TryAcquire("orders/7", {.lease = kLease});
  ASSERT_TRUE(held);
  QueueWaiter("orders/7");
  const CliResult text = Run({"inspect", "orders/7"});
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(
      text.out.find("lock 'orders/7': held by " + held.lease.owner() +
                    " (1 hold), fence " + std::to_string(held.lease.fence())),
      std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("queue: 1 waiter\n  1. g:"), std::string::npos)
      << text.out;
  const json one = json::parse(Run({"inspect", "--json", "orders/7"}).out);
  EXPECT_TRUE(one["locked"].get<bool>());
  EXPECT_EQ(one["queue"][0]["owner"].get<std::string>().empty(), false);
  EXPECT_GT(one["queue"][0]["presence_left_ms"].get<int64_t>(), 0);

  const CliResult unknown = Run({"inspect", "never-taken"});
  EXPECT_EQ(unknown.status, 1);
  EXPECT_NE(unknown.err.find("no lock 'never-taken'"), std::string::npos)
      << unknown.err;
  EXPECT_EQ(Run({"inspect", "}bad"}).status, 2);
  EXPECT_EQ(RunCli({"inspect", "--redis", "redis://127.0.0.1:1", "x"}).status,
            69);
}

TEST_F(LocksToolsTest,
       UnlockForceRemovesOnlyTheExpectedGrantAndTellsTheHolder) {
  BrokerProcess broker;
  auto notifier =
      std::make_shared<notifier::KafkaNotifier>(notifier::KafkaOptions{
          .bootstrap = broker.bootstrap(), .log = [](auto, auto) {}});
  LockClient holder(redis_, {.publisher = notifier});
  notifier->Subscribe(&holder);
  ASSERT_TRUE(notifier->WaitUntilReady(seconds(30)));
  // An explicit 60 s lease is never renewed: only the force event can tell
  // the holder before it runs out.
  AcquireResult held = holder.TryAcquire("deploy", {.lease = kLease});
  ASSERT_TRUE(held);

  const CliResult refused = Run({"unlock", "deploy"});
  EXPECT_EQ(refused.status, 2);
  EXPECT_NE(refused.err.find("--force"), std::string::npos) << refused.err;
  const CliResult mismatch =
      Run({"unlock", "--force", "--expect-fence",
           std::to_string(held.lease.fence() + 1), "deploy"});
  EXPECT_EQ(mismatch.status, 1);
  EXPECT_NE(mismatch.err.find("left lock 'deploy' alone"), std::string::npos)
      << mismatch.err;
  EXPECT_TRUE(holder.Inspect("deploy").locked);
  EXPECT_FALSE(held.lease.lost());

  const CliResult removed =
      Run({"unlock", "--force", "--kafka", broker.bootstrap(), "--expect-owner",
           held.lease.owner(), "--expect-fence",
           std::to_string(held.lease.fence()), "deploy"});
  ASSERT_EQ(removed.status, 0) << removed.err;
  EXPECT_NE(removed.out.find("force-unlocked 'deploy': removed the grant of " +
                             held.lease.owner()),
            std::string::npos)
      << removed.out;
  EXPECT_FALSE(holder.Inspect("deploy").locked);
  EXPECT_TRUE(WaitUntil([&] { return held.lease.lost(); }, seconds(30)));

  const CliResult again = Run({"unlock", "--force", "deploy"});
  EXPECT_EQ(again.status, 1);
  EXPECT_NE(again.out.find("was not held"), std::string::npos) << again.out;
  notifier->Unsubscribe(&holder);
}

TEST_F(LocksToolsTest, ToolsReadTheDeploymentConfig) {
  LockClient team(redis_, {.key_prefix = "team-a"});
  AcquireResult held = team.TryAcquire("report", {.lease = kLease});
  ASSERT_TRUE(held);
  const std::string config = dir_.File("worker.yaml");
  WriteFile(config,
            "redis:\n  url: " + server_.url() + "\n  key_prefix: team-a\n");
  const CliResult listed = RunCli({"locks", "--config", config, "--json"});
  ASSERT_EQ(listed.status, 0) << listed.err;
  EXPECT_EQ(json::parse(listed.out)["locks"][0]["name"], "report");
  EXPECT_EQ(RunCli({"inspect", "--config", config, "report"}).status, 0);
  // Without the config the prefix is the default: not there.
  EXPECT_EQ(Run({"inspect", "report"}).status, 1);
  WriteFile(config, "redis:\n  urll: x\n");
  const CliResult bad = RunCli({"locks", "--config", config});
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find(config + ":2:"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace lockfleet::testing
