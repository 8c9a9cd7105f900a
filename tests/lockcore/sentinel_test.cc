// redis+sentinel:// against real sentinels (tests/support/sentinel_group.h:
// a master, replicas and three `redis-server --sentinel`): the client finds
// the master, writes only there, follows SENTINEL FAILOVER (+switch-master)
// to the promoted replica, and fails with a clear error — never a hang —
// for sentinels that are unreachable, do not know the master, are no
// sentinels, or want a password.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/redis_client.h"
#include "support/redis_server.h"
#include "support/sentinel_group.h"
#include "support/tls_certs.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::shared_ptr<RedisClient> Connect(const std::string& url,
                                     RedisOptions o = {}) {
  o.url = url;
  return std::make_shared<RedisClient>(o);
}

// The Error a call throws (its code and message), or kInternal/"" if none.
std::pair<ErrorCode, std::string> Failure(RedisClient& redis) {
  try {
    redis.Execute({"PING"});
  } catch (const Error& e) {
    return {e.code(), e.what()};
  }
  return {ErrorCode::kInternal, ""};
}

class Sentinel : public ::testing::Test {
 protected:
  // One group for the suite: starting it (and the sentinels meeting) takes
  // a few seconds. Tests that fail it over leave it failed over; each
  // test asks the group where the master is.
  static void SetUpTestSuite() { group_ = new SentinelGroup(); }
  static void TearDownTestSuite() {
    delete group_;
    group_ = nullptr;
  }

  RedisServer& Master() {
    const int index = group_->MasterIndex();
    EXPECT_GE(index, 0);
    return group_->node(index < 0 ? 0 : index);
  }
  std::string Get(RedisServer& node, const std::string& key) {
    return Connect(node.url())->Execute({"GET", key}).str;
  }

  static SentinelGroup* group_;
};

SentinelGroup* Sentinel::group_ = nullptr;

TEST_F(Sentinel, FindsTheMasterAndWritesThere) {
  auto redis = Connect(group_->url());
  ASSERT_EQ(redis->Execute({"SET", "where", "master"}).str, "OK");
  EXPECT_EQ(Get(Master(), "where"), "master");
  // The URL shown in messages is the sentinel one (redacted).
  EXPECT_EQ(redis->endpoint().Redacted(), group_->url());
}

TEST_F(Sentinel, LocksWorkThroughSentinel) {
  LockClient locks(Connect(group_->url()));
  AcquireResult got = locks.TryAcquire("sentinel-lock");
  ASSERT_TRUE(got);
  EXPECT_EQ(Connect(Master().url())
                ->Execute({"EXISTS", "lockfleet:{sentinel-lock}:lock"})
                .integer,
            1);
  EXPECT_FALSE(LockClient(Connect(group_->url())).TryAcquire("sentinel-lock"));
  got.lease.Release();
}

// SENTINEL FAILOVER promotes the replica. The old master stays a master for
// several seconds (until the sentinels reconfigure it), so a client that
// kept writing there would write to a master nobody reads any more: the
// client follows +switch-master and writes to the new one. The lock held
// across the failover keeps its owner and fence on the new master (it was
// replicated), and nobody else gets it.
TEST_F(Sentinel, FollowsAFailoverToThePromotedReplica) {
  auto redis = Connect(group_->url());
  LockClient locks(redis);
  AcquireResult held = locks.TryAcquire("across-failover");
  ASSERT_TRUE(held);
  const int64_t fence = held.lease.fence();
  const int old_master = group_->MasterIndex();
  // The grant is on every replica before the failover (this test is not
  // about losing one: see docs/lockcore.md, "Sentinel").
  for (size_t i = 0; i < group_->nodes(); ++i) {
    ASSERT_TRUE(WaitUntil([&] {
      return Connect(group_->node(i).url())
                 ->Execute({"EXISTS", "lockfleet:{across-failover}:lock"})
                 .integer == 1;
    }));
  }

  const int new_master = group_->Failover();
  ASSERT_GE(new_master, 0);
  ASSERT_NE(new_master, old_master);

  // Within a bounded time every write lands on the new master — while the
  // old one still says ROLE master (the sentinels demote it seconds later),
  // so it was the client that followed the switch, not a READONLY that
  // sent it there.
  RedisClient old_direct({.url = group_->node(old_master).url()});
  bool old_still_master = false;
  int n = 0;
  ASSERT_TRUE(WaitUntil(
      [&] {
        const std::string value = std::to_string(++n);
        try {
          const Reply role = old_direct.Execute({"ROLE"});
          old_still_master = role.type == Reply::Type::kArray &&
                             !role.elements.empty() &&
                             role.elements[0].str == "master";
          redis->Execute({"SET", "after-failover", value});
        } catch (const Error&) {
          return false;
        }
        return Get(group_->node(new_master), "after-failover") == value;
      },
      seconds(20)));
  EXPECT_TRUE(old_still_master)
      << "the old master was demoted before the client followed the switch";
  // ...and keeps landing there.
  for (int i = 0; i < 20; ++i) {
    const std::string value = "v" + std::to_string(i);
    ASSERT_EQ(redis->Execute({"SET", "after-failover", value}).str, "OK");
    ASSERT_EQ(Get(group_->node(new_master), "after-failover"), value);
  }

  const LockInfo info = locks.Inspect("across-failover");
  EXPECT_TRUE(info.locked);
  EXPECT_EQ(info.fence, fence);
  EXPECT_FALSE(
      LockClient(Connect(group_->url())).TryAcquire("across-failover"));
  EXPECT_EQ(held.lease.Release(), ReleaseStatus::kReleased);
  AcquireResult next =
      LockClient(Connect(group_->url())).TryAcquire("across-failover");
  ASSERT_TRUE(next);
  EXPECT_GT(next.lease.fence(), fence);
  // The next test starts from a group the sentinels have settled: the old
  // master reconfigured as a replica of the new one.
  ASSERT_TRUE(group_->WaitForReplicas(group_->nodes() - 1));
}

// Clients made and destroyed while the master moves: the watch thread of
// each stops before what it reports to is gone (the sanitizer builds would
// catch a use after free), and each client's one command lands.
TEST_F(Sentinel, ShortLivedClientsAcrossAFailover) {
  std::atomic<bool> stop{false};
  std::atomic<int> done{0};
  std::thread churn([&] {
    while (!stop.load()) {
      try {
        RedisOptions o;
        o.url = group_->url();
        RedisClient redis(o);
        redis.Execute({"PING"});
        done.fetch_add(1);
      } catch (const Error&) {
        // A command during the switch may fail; the destruction may not.
      }
    }
  });
  EXPECT_TRUE(WaitUntil([&] { return done.load() >= 5; }));
  const int old_master = group_->MasterIndex();
  const int new_master = group_->Failover();
  const int before = done.load();
  EXPECT_TRUE(WaitUntil([&] { return done.load() >= before + 5; }));
  stop.store(true);
  churn.join();
  EXPECT_GE(new_master, 0);
  EXPECT_NE(new_master, old_master);
  ASSERT_TRUE(group_->WaitForReplicas(group_->nodes() - 1));
}

// A master that became a replica refuses writes with READONLY. The client
// then forgets its address and asks the sentinels again instead of handing
// the refusal to the caller; here (the master demoted by hand, behind the
// sentinels' back) they still name it, and the ROLE check on the new
// connection refuses it: the write fails with a clear error and goes to no
// replica. Once it is a master again, writes go through.
TEST_F(Sentinel, AMasterThatBecameAReplicaIsAskedForAgain) {
  const int old_master = group_->MasterIndex();
  ASSERT_GE(old_master, 0);
  RedisOptions one;
  one.pool_size = 1;
  auto redis = Connect(group_->url(), one);
  ASSERT_EQ(redis->Execute({"SET", "readonly", "before"}).str, "OK");
  RedisServer& old = group_->node(old_master);
  RedisServer& other = group_->node(old_master == 0 ? 1 : 0);
  auto old_direct = Connect(old.url());
  auto other_direct = Connect(other.url());
  ASSERT_EQ(other_direct->Execute({"REPLICAOF", "NO", "ONE"}).str, "OK");
  ASSERT_EQ(
      old_direct
          ->Execute({"REPLICAOF", "127.0.0.1", std::to_string(other.port())})
          .str,
      "OK");
  try {
    const Reply r = redis->Execute({"SET", "readonly", "after"});
    ADD_FAILURE() << "the write was answered: "
                  << (r.is_error() ? r.str : "OK");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kRedisUnavailable) << e.what();
    EXPECT_NE(std::string(e.what()).find("is not the master (ROLE: slave)"),
              std::string::npos)
        << e.what();
  }
  // Back the way the sentinels know it.
  ASSERT_EQ(old_direct->Execute({"REPLICAOF", "NO", "ONE"}).str, "OK");
  ASSERT_EQ(
      other_direct
          ->Execute({"REPLICAOF", "127.0.0.1", std::to_string(old.port())})
          .str,
      "OK");
  ASSERT_TRUE(WaitUntil([&] {
    try {
      return redis->Execute({"SET", "readonly", "again"}).str == "OK";
    } catch (const Error&) {
      return false;
    }
  }));
  EXPECT_EQ(Get(old, "readonly"), "again");
  ASSERT_TRUE(group_->WaitForReplicas(group_->nodes() - 1));
}

TEST_F(Sentinel, AMasterNameTheSentinelsDoNotKnowIsAClearError) {
  std::string url = group_->url();
  url = url.substr(0, url.rfind('/')) + "/nosuchmaster";
  auto redis = Connect(url);
  const auto [code, message] = Failure(*redis);
  EXPECT_EQ(code, ErrorCode::kRedisUnavailable);
  EXPECT_NE(message.find("no master named 'nosuchmaster' is known"),
            std::string::npos)
      << message;
}

TEST_F(Sentinel, UnreachableSentinelsFailWithinTheTimeout) {
  RedisServer gone({.tcp = true});
  const int port = gone.port();
  gone.Stop();
  RedisOptions o;
  o.connect_timeout = milliseconds(500);
  o.command_timeout = milliseconds(500);
  auto redis = Connect("redis+sentinel://127.0.0.1:" + std::to_string(port) +
                           ",127.0.0.1:" + std::to_string(port) + "/lockfleet",
                       o);
  const auto start = std::chrono::steady_clock::now();
  const auto [code, message] = Failure(*redis);
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(10));
  EXPECT_EQ(code, ErrorCode::kRedisUnavailable);
  EXPECT_NE(message.find("no sentinel of redis+sentinel://"), std::string::npos)
      << message;
  EXPECT_NE(message.find("Connection refused"), std::string::npos) << message;
}

TEST_F(Sentinel, ARedisServerIsNoSentinel) {
  auto redis =
      Connect("redis+sentinel://127.0.0.1:" + std::to_string(Master().port()) +
              "/lockfleet");
  const auto [code, message] = Failure(*redis);
  EXPECT_EQ(code, ErrorCode::kRedisUnavailable);
  EXPECT_NE(message.find("not a sentinel?"), std::string::npos) << message;
}

TEST(SentinelOptions, CredentialsForSentinelsNeedASentinelUrl) {
  RedisOptions o;
  o.url = "redis://127.0.0.1:6379";
  o.sentinel_auth.password = "s3cret";
  try {
    RedisClient redis(o);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(std::string(e.what()).find("s3cret"), std::string::npos);
  }
}

// Sentinels with a password (requirepass): the client authenticates with
// RedisOptions::sentinel_auth; without it the error says AUTH is wanted,
// and no message repeats the password.
TEST(SentinelAuth, SentinelsThatWantAPassword) {
  // (Options filled in one by one: GCC 12 at -O3 misreports a designated
  // initializer that leaves `tls` out as maybe-uninitialized.)
  SentinelGroup::Options options;
  options.replicas = 1;
  options.sentinel_password = "s3ntinel";
  SentinelGroup group(options);
  RedisOptions o;
  o.sentinel_auth.password = "s3ntinel";
  EXPECT_EQ(Connect(group.url(), o)->Execute({"PING"}).str, "PONG");

  auto without = Connect(group.url());
  const auto [code, message] = Failure(*without);
  EXPECT_EQ(code, ErrorCode::kRedisUnavailable);
  EXPECT_NE(message.find("NOAUTH"), std::string::npos) << message;

  RedisOptions wrong;
  wrong.sentinel_auth.password = "wr0ng-s3cret";
  const auto [code2, message2] = Failure(*Connect(group.url(), wrong));
  EXPECT_EQ(code2, ErrorCode::kRedisUnavailable);
  EXPECT_EQ(message2.find("wr0ng-s3cret"), std::string::npos) << message2;
  EXPECT_EQ(message2.find("s3ntinel"), std::string::npos) << message2;
}

// rediss+sentinel://: TLS to the sentinels and to the master (and between
// them), verified against the test CA.
TEST(SentinelTls, TlsToSentinelsAndMaster) {
  if (!TlsCerts::OpenSslAvailable()) GTEST_SKIP() << "no openssl CLI";
  TlsCerts certs;
  SentinelGroup group({.replicas = 1,
                       .tls = {.cert_file = certs.server_cert,
                               .key_file = certs.server_key,
                               .ca_file = certs.ca_file}});
  RedisOptions o;
  o.tls.ca_file = certs.ca_file;
  auto redis = Connect(group.url(), o);
  ASSERT_EQ(group.url().rfind("rediss+sentinel://", 0), 0u);
  LockClient locks(redis);
  AcquireResult got = locks.TryAcquire("tls-sentinel");
  ASSERT_TRUE(got);
  EXPECT_EQ(got.lease.Release(), ReleaseStatus::kReleased);

  // A client that does not trust the CA fails on the sentinels already.
  RedisOptions untrusted;
  untrusted.tls.ca_file = certs.other_ca_file;
  const auto [code, message] = Failure(*Connect(group.url(), untrusted));
  EXPECT_EQ(code, ErrorCode::kRedisUnavailable);
  EXPECT_NE(message.find("certificate verify failed"), std::string::npos)
      << message;
}

}  // namespace
}  // namespace lockfleet::testing
