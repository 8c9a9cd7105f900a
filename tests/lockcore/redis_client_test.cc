// The pooled Redis client: commands, pipelines, scripts, auth, db,
// reconnection.
#include "lockfleet/lockcore/redis_client.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "lock_fixture.h"
#include "lockfleet/lockcore/error.h"

namespace lockfleet::testing {
namespace {

class Redis : public LockTest {};

ErrorCode CodeOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.code();
  }
  return ErrorCode::kInternal;
}

TEST_F(Redis, CommandsAreBinarySafe) {
  std::string value("a\0b\r\n", 5);
  EXPECT_EQ(redis_->Execute({"SET", "bin", value}).str, "OK");
  Reply r = redis_->Execute({"GET", "bin"});
  EXPECT_EQ(r.type, Reply::Type::kString);
  EXPECT_EQ(r.str, value);
  EXPECT_TRUE(redis_->Execute({"GET", "missing"}).is_nil());
}

TEST_F(Redis, PipelineKeepsOrderInOneRoundTrip) {
  uint64_t before = redis_->round_trips();
  std::vector<Reply> r =
      redis_->Pipeline({{"INCR", "n"}, {"INCR", "n"}, {"GET", "n"}, {"BOGUS"}});
  EXPECT_EQ(redis_->round_trips() - before, 1u);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].integer, 1);
  EXPECT_EQ(r[1].integer, 2);
  EXPECT_EQ(r[2].str, "2");
  EXPECT_TRUE(r[3].is_error());  // an error reply is a value, not an exception
}

TEST_F(Redis, ScriptsSurviveAFlushedScriptCache) {
  Script script("return tonumber(ARGV[1]) + 1");
  EXPECT_EQ(redis_->Eval(script, {}, {"41"}).integer, 42);
  redis_->Execute({"SCRIPT", "FLUSH"});
  EXPECT_EQ(redis_->Eval(script, {}, {"1"}).integer, 2);
  EXPECT_EQ(CodeOf([&] { redis_->Eval(Script("error('boom')"), {}, {}); }),
            ErrorCode::kRedisScript);
}

TEST_F(Redis, SelectsTheDatabaseFromTheUrl) {
  RedisOptions o;
  o.url = server_->url() + "?db=3";
  RedisClient db3(o);
  db3.Execute({"SET", "where", "three"});
  EXPECT_TRUE(redis_->Execute({"GET", "where"}).is_nil());
  EXPECT_EQ(db3.Execute({"GET", "where"}).str, "three");
}

TEST_F(Redis, ReconnectsAfterTheServerRestarts) {
  EXPECT_EQ(redis_->Execute({"PING"}).str, "PONG");
  server_->Stop();
  EXPECT_EQ(CodeOf([&] { redis_->Execute({"PING"}); }),
            ErrorCode::kRedisUnavailable);
  server_->Start();
  // The dead pooled connections are dropped on the first failure; at most one
  // more call may hit a stale one before a fresh connection is made.
  bool ok = false;
  for (int i = 0; i < 2 && !ok; ++i) {
    try {
      ok = redis_->Execute({"PING"}).str == "PONG";
    } catch (const Error&) {
    }
  }
  EXPECT_TRUE(ok);
}

TEST_F(Redis, KilledConnectionIsReplacedTransparentlyForLockScripts) {
  auto client = NewClient();
  ASSERT_TRUE(client->TryAcquire("k1"));
  redis_->Execute({"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"});
  // The lock client's pooled connection is dead; the acquire script is
  // retried once on a fresh one (it is idempotent under retry).
  EXPECT_TRUE(client->TryAcquire("k2"));
}

TEST_F(Redis, ConnectionsAreNotInheritedByChildProcesses) {
  ASSERT_EQ(redis_->Execute({"PING"}).str, "PONG");
  // Every socket this process holds must be close-on-exec.
  int sockets = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    auto target = std::filesystem::read_symlink(entry.path(), ec);
    if (ec || target.string().rfind("socket:", 0) != 0) continue;
    int fd = std::stoi(entry.path().filename().string());
    int flags = ::fcntl(fd, F_GETFD);
    if (flags < 0) continue;
    ++sockets;
    EXPECT_TRUE(flags & FD_CLOEXEC) << "fd " << fd;
  }
  EXPECT_GE(sockets, 1);
}

TEST_F(Redis, UnreachableServerIsReportedClearly) {
  RedisOptions o;
  o.url = "redis://127.0.0.1:1";  // nothing listens on port 1
  o.connect_timeout = std::chrono::milliseconds(500);
  RedisClient client(o);
  try {
    client.Execute({"PING"});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kRedisUnavailable);
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:1"), std::string::npos);
  }
}

TEST_F(Redis, BadOptionsAreInvalidArguments) {
  EXPECT_EQ(CodeOf([] { RedisClient(RedisOptions{.url = "nope://"}); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(CodeOf([] { RedisClient(RedisOptions{.pool_size = 0}); }),
            ErrorCode::kInvalidArgument);
}

TEST(RedisAuth, PasswordAndAclUser) {
  RedisServer server({.tcp = true, .requirepass = "s3cret"});
  RedisOptions o;
  o.url = server.url();  // redis://:s3cret@127.0.0.1:PORT
  RedisClient ok(o);
  EXPECT_EQ(ok.Execute({"PING"}).str, "PONG");
  EXPECT_EQ(
      ok.Execute({"ACL", "SETUSER", "app", "on", ">apppw", "~*", "+@all"}).str,
      "OK");

  RedisOptions acl;
  acl.url = "redis://app:apppw@127.0.0.1:" + std::to_string(server.port());
  EXPECT_EQ(RedisClient(acl).Execute({"PING"}).str, "PONG");

  RedisOptions wrong;
  wrong.url = "redis://:n0pe-pw@127.0.0.1:" + std::to_string(server.port());
  try {
    RedisClient(wrong).Execute({"PING"});
    ADD_FAILURE() << "a wrong password was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kRedisAuth);
    // The refusal names the redacted endpoint, never the password.
    EXPECT_EQ(std::string(e.what()).find("n0pe-pw"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("redis://:***@"), std::string::npos)
        << e.what();
  }

  RedisOptions none;
  none.url = "redis://127.0.0.1:" + std::to_string(server.port());
  Reply r = RedisClient(none).Execute({"PING"});
  EXPECT_TRUE(r.is_error());
  EXPECT_EQ(r.str.rfind("NOAUTH", 0), 0u);
}

// A server that does not know AUTH (renamed away, or a proxy without it)
// answers Redis 6.2+'s "ERR unknown command 'AUTH', with args beginning
// with: '<password>'": the error must not carry it on.
TEST(RedisAuth, AnAuthRefusalThatRepeatsThePasswordIsNotShown) {
  RedisServer server(
      {.tcp = true, .extra_args = {"--rename-command", "AUTH", ""}});
  RedisOptions o;
  o.url = "redis://:hunter2-pw@127.0.0.1:" + std::to_string(server.port());
  try {
    RedisClient(o).Execute({"PING"});
    ADD_FAILURE() << "AUTH succeeded on a server without AUTH";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.code(), ErrorCode::kRedisAuth) << what;
    EXPECT_EQ(what.find("hunter2"), std::string::npos) << what;
    EXPECT_NE(what.find("refused AUTH: ERR"), std::string::npos) << what;
  }
}

// A call's budget covers a new connection's AUTH and SELECT too: against a
// stalled server (SIGSTOP: the kernel still completes the TCP handshake),
// a budgeted Eval on a password-protected, non-zero db gives up within its
// budget instead of waiting out the 5 s command timeout in AUTH.
TEST(RedisAuth, HandshakeKeepsTheCallBudget) {
  RedisServer server({.tcp = true, .requirepass = "s3cret"});
  RedisOptions o;
  o.url = server.url() + "/2";
  o.command_timeout = std::chrono::seconds(5);
  RedisClient client(o);
  const Script script("return 1");
  server.Pause();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(CodeOf([&] {
              client.Eval(script, {}, {}, std::chrono::milliseconds(200));
            }),
            ErrorCode::kRedisTimeout);
  const auto took = std::chrono::steady_clock::now() - start;
  server.Resume();
  // 200 ms budget; the bound leaves a loaded machine plenty of slack and
  // is still well under the 5 s a handshake without the budget took.
  EXPECT_LT(took, std::chrono::milliseconds(2500))
      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
      << " ms";
  EXPECT_EQ(client.Eval(script, {}, {}).integer, 1);  // and it recovers
}

}  // namespace
}  // namespace lockfleet::testing
