// The CLI over the production Redis URLs (issue 15), end to end with real
// servers: `lockfleet lock --config` over rediss:// with the config's
// redis.tls (CA, client certificate and key: mutual TLS), `lockfleet lock`
// through redis+sentinel:// (with redis.min_replicas from a config), and
// bad input — unreachable sentinels, a master name the sentinels do not
// know, a TLS CA file that is not PEM — each a non-zero exit with a message
// naming the problem, within a bounded time.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "cli/cli_process.h"
#include "lockfleet/lockcore/redis_client.h"
#include "support/redis_server.h"
#include "support/sentinel_group.h"
#include "support/tls_certs.h"

namespace lockfleet::testing {
namespace {

using std::chrono::seconds;
using std::chrono::steady_clock;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// `lockfleet args...`, and how long it took.
struct TimedResult {
  CliResult result;
  steady_clock::duration took{};
};
TimedResult TimedRunCli(const std::vector<std::string>& args) {
  const auto start = steady_clock::now();
  CliResult result = RunCli(args, {}, seconds(60));
  return {std::move(result), steady_clock::now() - start};
}

// ---- TLS from a config file -------------------------------------------------

class TlsCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!TlsCerts::OpenSslAvailable()) {
      GTEST_SKIP() << "the openssl CLI is missing; scripts/setup.sh installs "
                      "the openssl package";
    }
    certs_ = std::make_unique<TlsCerts>();
    RedisServer::Options options;
    options.tls.cert_file = certs_->server_cert;
    options.tls.key_file = certs_->server_key;
    options.tls.ca_file = certs_->ca_file;
    options.tls.auth_clients = true;  // mutual TLS: cert_file/key_file count
    options.tls.client_cert_file = certs_->client_cert;
    options.tls.client_key_file = certs_->client_key;
    server_ = std::make_unique<RedisServer>(options);
  }

  // A config of the TLS server with `tls` (YAML lines under redis.tls:,
  // indented by four; "" for no tls section).
  std::string Config(const std::string& name, const std::string& tls) {
    const std::string path = dir_.File(name);
    WriteFile(path, "redis:\n  url: " + server_->url() +
                        "\n  connect_timeout: 2s\n  command_timeout: 2s\n" +
                        (tls.empty() ? "" : "  tls:\n" + tls) +
                        "locks:\n  wait: 0\n");
    return path;
  }

  std::string AllTls() const {
    return "    ca_file: " + certs_->ca_file +
           "\n    cert_file: " + certs_->client_cert +
           "\n    key_file: " + certs_->client_key + "\n";
  }

  TempDir dir_;
  std::unique_ptr<TlsCerts> certs_;
  std::unique_ptr<RedisServer> server_;
};

// redis.tls's CA, client certificate and key reach the connection
// (cli/config_options.cc): the lock is taken and COMMAND runs, with a fence.
// Without the client certificate, or without the CA, the same server
// refuses: it was the config's tls section that made it work.
TEST_F(TlsCli, LockOverTlsWithTheConfigsCaAndClientCertificate) {
  ASSERT_EQ(server_->url().rfind("rediss://", 0), 0u) << server_->url();
  const std::string config = Config("tls.yaml", AllTls());
  const CliResult ran = RunCli({"lock", "--config", config, "tls-lock", "--",
                                "sh", "-c", "echo \"fence=$LOCKFLEET_FENCE\""});
  ASSERT_EQ(ran.status, 0) << ran.err;
  EXPECT_EQ(ran.out.rfind("fence=", 0), 0u) << ran.out;
  EXPECT_GT(std::stoll(ran.out.substr(6)), 0) << ran.out;
  // The lock was released over TLS: a second run gets it at once (wait: 0).
  EXPECT_EQ(
      RunCli({"lock", "--config", config, "tls-lock", "--", "true"}).status, 0);

  const std::string ran_file = dir_.File("ran");
  const TimedResult no_client_cert = TimedRunCli(
      {"lock", "--config",
       Config("ca-only.yaml", "    ca_file: " + certs_->ca_file + "\n"),
       "tls-lock", "--", "touch", ran_file});
  EXPECT_EQ(no_client_cert.result.status, 69) << no_client_cert.result.err;
  EXPECT_TRUE(Contains(no_client_cert.result.err, "client certificate"))
      << no_client_cert.result.err;
  EXPECT_LT(no_client_cert.took, seconds(20));

  const TimedResult no_ca =
      TimedRunCli({"lock", "--config", Config("no-tls.yaml", ""), "tls-lock",
                   "--", "touch", ran_file});
  EXPECT_EQ(no_ca.result.status, 69) << no_ca.result.err;
  EXPECT_TRUE(Contains(no_ca.result.err, "certificate verify failed"))
      << no_ca.result.err;
  EXPECT_LT(no_ca.took, seconds(20));
  EXPECT_FALSE(FileExists(ran_file));
}

// A CA file that exists but holds no PEM: exit 2 at once, naming the file
// and what is wrong with it; nothing is connected to and COMMAND never runs.
TEST_F(TlsCli, ACaFileThatIsNotPemExitsTwoNamingIt) {
  const std::string not_pem = dir_.File("ca.txt");
  WriteFile(not_pem, "this is not a certificate\n");
  const std::string ran_file = dir_.File("ran");
  const TimedResult bad =
      TimedRunCli({"lock", "--config",
                   Config("bad-ca.yaml", "    ca_file: " + not_pem + "\n"),
                   "tls-lock", "--", "touch", ran_file});
  EXPECT_EQ(bad.result.status, 2) << bad.result.err;
  EXPECT_EQ(bad.result.err.rfind("lockfleet: ", 0), 0u) << bad.result.err;
  EXPECT_TRUE(Contains(bad.result.err, "ca_file")) << bad.result.err;
  EXPECT_TRUE(Contains(bad.result.err, not_pem)) << bad.result.err;
  EXPECT_TRUE(Contains(bad.result.err, "no PEM certificate")) << bad.result.err;
  EXPECT_LT(bad.took, seconds(20));
  EXPECT_FALSE(FileExists(ran_file));
}

// ---- Sentinel ---------------------------------------------------------------

class SentinelCli : public ::testing::Test {
 protected:
  // One group for the suite: the sentinels take a few seconds to meet.
  static void SetUpTestSuite() { group_ = new SentinelGroup(); }
  static void TearDownTestSuite() {
    delete group_;
    group_ = nullptr;
  }

  // The sentinel URL with another master name.
  static std::string WithMasterName(const std::string& name) {
    const std::string url = group_->url();
    return url.substr(0, url.rfind('/') + 1) + name;
  }

  TempDir dir_;
  static SentinelGroup* group_;
};

SentinelGroup* SentinelCli::group_ = nullptr;

// `lockfleet lock --redis redis+sentinel://...` takes the lock on the master
// the sentinels name (its key is there while COMMAND runs) and releases it.
TEST_F(SentinelCli, LockThroughSentinelTakesTheLockOnTheMaster) {
  const std::string url = group_->url();
  ASSERT_EQ(url.rfind("redis+sentinel://", 0), 0u) << url;
  const int master = group_->MasterIndex();
  ASSERT_GE(master, 0);
  auto redis = group_->Client(group_->node(master).url());
  const std::string key = "lockfleet:{sentinel-cli}:lock";

  CliProcess holder({"lock", "--redis", url, "sentinel-cli", "--", "sh", "-c",
                     "echo \"fence=$LOCKFLEET_FENCE\"; touch '" +
                         dir_.File("held") + "'; while [ ! -e '" +
                         dir_.File("release") + "' ]; do sleep 0.02; done"});
  ASSERT_TRUE(WaitForFile(dir_.File("held"))) << holder.Stderr();
  EXPECT_EQ(redis->Execute({"EXISTS", key}).integer, 1);
  WriteFile(dir_.File("release"), "");
  EXPECT_EQ(holder.Wait(), 0) << holder.Stderr();
  EXPECT_EQ(holder.Stdout().rfind("fence=", 0), 0u) << holder.Stdout();
  EXPECT_EQ(redis->Execute({"EXISTS", key}).integer, 0);

  // From a config with redis.min_replicas: 1: the group's replica confirms
  // every change, so the lock works as without it.
  const std::string config = dir_.File("sentinel.yaml");
  WriteFile(config, "redis:\n  url: " + url +
                        "\n  min_replicas: 1\n  replica_timeout: 5s\n");
  const CliResult acked =
      RunCli({"lock", "--config", config, "sentinel-cli", "--", "true"});
  EXPECT_EQ(acked.status, 0) << acked.err;
}

TEST_F(SentinelCli, AMasterNameTheSentinelsDoNotKnowExits69) {
  const std::string ran_file = dir_.File("ran");
  const TimedResult unknown =
      TimedRunCli({"lock", "--redis", WithMasterName("nosuchmaster"), "x", "--",
                   "touch", ran_file});
  EXPECT_EQ(unknown.result.status, 69) << unknown.result.err;
  EXPECT_EQ(unknown.result.err.rfind("lockfleet: ", 0), 0u)
      << unknown.result.err;
  EXPECT_TRUE(
      Contains(unknown.result.err, "no master named 'nosuchmaster' is known"))
      << unknown.result.err;
  EXPECT_LT(unknown.took, seconds(20));
  EXPECT_FALSE(FileExists(ran_file));
}

// Sentinels that refuse connections, and one that accepts them but never
// answers (a stopped process): a non-zero exit naming the sentinels within
// the timeouts, never a hang.
TEST(SentinelCliSetup, UnreachableSentinelsExit69WithinTheTimeouts) {
  TempDir dir;
  const std::string ran_file = dir.File("ran");
  const std::string refused =
      "redis+sentinel://127.0.0.1:" + std::to_string(UnusedTcpPort()) +
      ",127.0.0.1:" + std::to_string(UnusedTcpPort()) + "/lockfleet";
  const TimedResult gone =
      TimedRunCli({"lock", "--redis", refused, "x", "--", "touch", ran_file});
  EXPECT_EQ(gone.result.status, 69) << gone.result.err;
  EXPECT_EQ(gone.result.err.rfind("lockfleet: ", 0), 0u) << gone.result.err;
  EXPECT_TRUE(Contains(gone.result.err, "no sentinel of redis+sentinel://"))
      << gone.result.err;
  EXPECT_TRUE(Contains(gone.result.err, "Connection refused"))
      << gone.result.err;
  EXPECT_LT(gone.took, seconds(20));

  RedisServer stalled({.tcp = true});
  stalled.Pause();
  const std::string config = dir.File("stalled.yaml");
  WriteFile(config, "redis:\n  url: redis+sentinel://127.0.0.1:" +
                        std::to_string(stalled.port()) +
                        "/lockfleet\n  connect_timeout: 500ms\n"
                        "  command_timeout: 500ms\n");
  const TimedResult silent =
      TimedRunCli({"lock", "--config", config, "x", "--", "touch", ran_file});
  stalled.Resume();
  EXPECT_EQ(silent.result.status, 69) << silent.result.err;
  EXPECT_TRUE(Contains(silent.result.err, "no sentinel of redis+sentinel://"))
      << silent.result.err;
  EXPECT_LT(silent.took, seconds(20));
  EXPECT_FALSE(FileExists(ran_file));
}

}  // namespace
}  // namespace lockfleet::testing
