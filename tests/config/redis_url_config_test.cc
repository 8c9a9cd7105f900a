// The one Redis URL parser (lockfleet/config/redis_url.h) and the redis.tls
// section: every form, every contradiction `config check` must reject (as
// FILE:LINE:COLUMN errors), and no message that repeats a password.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "config_test_util.h"
#include "lockfleet/config/config.h"
#include "lockfleet/config/redis_url.h"

namespace lockfleet::config {
namespace {

using testing::Errors;
using testing::OnlyError;
using testing::TempDirTest;

// ---- the parser
// --------------------------------------------------------------

RedisUrl Parsed(const std::string& text) {
  RedisUrl url;
  const std::string why = ParseRedisUrl(text, &url);
  EXPECT_EQ(why, "") << text;
  return url;
}

std::string Why(const std::string& text) {
  RedisUrl url;
  return ParseRedisUrl(text, &url);
}

TEST(RedisUrlParser, EveryForm) {
  EXPECT_EQ(Parsed("redis://h"), (RedisUrl{.host = "h"}));
  EXPECT_EQ(Parsed("redis://app:p%40ss%3Aw@cache:6380/3"),
            (RedisUrl{.host = "cache",
                      .port = 6380,
                      .user = "app",
                      .password = "p@ss:w",
                      .db = 3}));
  EXPECT_EQ(
      Parsed("rediss://:pw@[::1]:6390/"),
      (RedisUrl{.host = "::1", .port = 6390, .password = "pw", .tls = true}));
  EXPECT_EQ(Parsed("redis://lonetoken@h").password, "lonetoken");
  EXPECT_EQ(Parsed("unix://u:pw@/run/redis%20x.sock?db=4"),
            (RedisUrl{.unix_path = "/run/redis x.sock",
                      .user = "u",
                      .password = "pw",
                      .db = 4}));
}

TEST(RedisUrlParser, RedactedRoundTrips) {
  EXPECT_EQ(Parsed("rediss://app:pw@cache:6380/2").Redacted(),
            "rediss://app:***@cache:6380/2");
  EXPECT_EQ(Parsed("redis://[::1]").Redacted(), "redis://[::1]:6379");
  EXPECT_EQ(Parsed("unix://:pw@/r.sock?db=1").Redacted(),
            "unix://:***@/r.sock?db=1");
}

TEST(RedisUrlParser, ReasonsForBadUrls) {
  EXPECT_EQ(Why("http://h"), "unknown scheme 'http://'");
  EXPECT_EQ(Why("h:6379"),
            "no redis://, rediss://, unix://, redis+sentinel:// or "
            "redis+cluster:// in front");
  EXPECT_EQ(Why("rediss://"), "no host after rediss://");
  EXPECT_EQ(Why("redis://h:0"),
            "the port must be a number from 1 to 65535, not '0'");
  EXPECT_EQ(Why("redis://h:"),
            "the port must be a number from 1 to 65535, not ''");
  EXPECT_EQ(Why("redis://h/x"),
            "the db must be a number from 0 to 1048576, not 'x'");
  EXPECT_EQ(Why("redis://[::1"), "unclosed '[' in the host");
  EXPECT_EQ(Why("redis://::1:6379"),
            "an IPv6 host goes in brackets: [::1]:PORT");
  EXPECT_EQ(Why("unix://r.sock"),
            "the socket path must be absolute: unix:///path/to.sock");
  EXPECT_EQ(Why("unix:///r.sock?x=1"), "the only query parameter is db=N");
}

TEST(RedisUrlParser, SentinelForms) {
  const RedisUrl one = Parsed("redis+sentinel://s1/main");
  EXPECT_TRUE(one.sentinel());
  EXPECT_EQ(one.sentinels, (std::vector<RedisNode>{{"s1", 26379}}));
  EXPECT_EQ(one.master_name, "main");
  EXPECT_EQ(one.host, "");
  const RedisUrl many =
      Parsed("rediss+sentinel://app:p%40w@s1:26380,[::1],10.0.0.3:5/m-1.a_b/4");
  EXPECT_EQ(
      many.sentinels,
      (std::vector<RedisNode>{{"s1", 26380}, {"::1", 26379}, {"10.0.0.3", 5}}));
  EXPECT_EQ(many.master_name, "m-1.a_b");
  EXPECT_EQ(many.db, 4);
  EXPECT_TRUE(many.tls);
  EXPECT_EQ(many.user, "app");
  EXPECT_EQ(many.password, "p@w");
  EXPECT_EQ(many.Redacted(),
            "rediss+sentinel://app:***@s1:26380,[::1]:26379,10.0.0.3:5/"
            "m-1.a_b/4");
  EXPECT_FALSE(Parsed("redis://h").sentinel());
}

TEST(RedisUrlParser, ReasonsForBadSentinelUrls) {
  EXPECT_EQ(Why("redis+sentinel:///m"), "no sentinel host");
  EXPECT_EQ(Why("redis+sentinel://s1"),
            "no master name: redis+sentinel://host:port[,...]/MASTER[/db]");
  EXPECT_EQ(Why("redis+sentinel://s1/"),
            "no master name: redis+sentinel://host:port[,...]/MASTER[/db]");
  EXPECT_EQ(Why("redis+sentinel://s1,,s2/m"),
            "an empty sentinel address in the list");
  EXPECT_EQ(Why("redis+sentinel://s1:0/m"),
            "the port must be a number from 1 to 65535, not '0'");
  EXPECT_EQ(Why("redis+sentinel://s1/a b"),
            "the master name 'a b' must be letters, digits, '.', '_' or '-'");
  EXPECT_EQ(Why("redis+sentinel://s1/m/x"),
            "the db must be a number from 0 to 1048576, not 'x'");
  EXPECT_EQ(Why("redis+clusters://h"), "unknown scheme 'redis+clusters://'");
  // Without '@' a sentinel list is shown; what could be a password is not.
  EXPECT_EQ(RedactRedisUrl("redis+sentinel://s1:26379,s2:26379/a b"),
            "redis+sentinel://s1:26379,s2:26379/a b");
  for (const std::string url :
       {"redis+sentinel://u:s3cret@s1:x/m", "rediss+sentinel://:s3cret@/m",
        "redis+sentinel://u:s3cret@s1", "redis+sentinel://u:s3cret/m",
        "redis+sentinel://u:1s3cret/m", "redis+sentinel://u:1,s3cret!/m"}) {
    EXPECT_EQ(Why(url).find("s3cret"), std::string::npos) << url;
    EXPECT_EQ(RedactRedisUrl(url).find("s3cret"), std::string::npos) << url;
  }
}

TEST(RedisUrlParser, ClusterSeeds) {
  const RedisUrl one = Parsed("redis+cluster://n1");
  EXPECT_TRUE(one.cluster());
  EXPECT_FALSE(one.sentinel());
  EXPECT_EQ(one.seeds, (std::vector<RedisNode>{{"n1", 6379}}));
  EXPECT_EQ(one.Redacted(), "redis+cluster://n1:6379");
  const RedisUrl many =
      Parsed("rediss+cluster://app:p%40w@n1:7000,[::1],10.0.0.3:7002/");
  EXPECT_TRUE(many.tls);
  EXPECT_EQ(many.seeds, (std::vector<RedisNode>{
                            {"n1", 7000}, {"::1", 6379}, {"10.0.0.3", 7002}}));
  EXPECT_EQ(many.user, "app");
  EXPECT_EQ(many.password, "p@w");
  EXPECT_EQ(many.Redacted(),
            "rediss+cluster://app:***@n1:7000,[::1]:6379,10.0.0.3:7002");
  EXPECT_EQ(Parsed("redis+cluster://n1/0").db, 0);
  EXPECT_FALSE(Parsed("redis://h").cluster());

  EXPECT_EQ(Why("redis+cluster://"), "no cluster node");
  EXPECT_EQ(Why("redis+cluster://n1,,n2"),
            "an empty cluster node address in the list");
  EXPECT_EQ(Why("redis+cluster://n1/3"),
            "a Redis Cluster has db 0 only: leave the /db out");
  EXPECT_EQ(Why("redis+cluster://n1:0"),
            "the port must be a number from 1 to 65535, not '0'");
  // Without '@' a seed list is shown; what could be a password is not.
  EXPECT_EQ(RedactRedisUrl("redis+cluster://n1:7000,n2:7001"),
            "redis+cluster://n1:7000,n2:7001");
  for (const std::string url :
       {"redis+cluster://u:s3cret@n1:x", "rediss+cluster://:s3cret@",
        "redis+cluster://u:s3cret", "redis+cluster://u:1,s3cret!"}) {
    EXPECT_EQ(Why(url).find("s3cret"), std::string::npos) << url;
    EXPECT_EQ(RedactRedisUrl(url).find("s3cret"), std::string::npos) << url;
  }
}

// The leak this guards against: lockcore's parser quoted the whole URL, so
// `lockfleet lock --redis 'redis://u:s3cret@h:x' ...` printed the password.
TEST(RedisUrlParser, NoReasonOrRedactionRepeatsThePassword) {
  const std::vector<std::string> bad = {
      "redis://u:s3cret@h:x",
      "redis://u:s3cret@h:0/1",
      "redis://u:s3cret@h/zz",
      "redis://u:s3cret@",
      "redis://u:s3cret%zz@h",
      "rediss://:s3cret@[::1",
      "unix://u:s3cret@rel.sock",
      "unix://:s3cret@/r.sock?db=x",
      "http://u:s3cret@h",
      "u:s3cret@h:6379",
      "redis:/u:s3cret@h",
      "s3cret@h",
      "redis://u:s3cret@h@x:1:2",
      "redis://u:s3cret@h:1/2?x",
      // The host forgotten: the password is where a port would be.
      "redis://u:s3cret",
      "redis://u:s3cret/0",
      "rediss://default:s3cret",
      "redis://:s3cret",
  };
  for (const std::string& url : bad) {
    const std::string why = Why(url);
    EXPECT_NE(why, "") << url;
    EXPECT_EQ(why.find("s3cret"), std::string::npos) << url << ": " << why;
    const std::string shown = RedactRedisUrl(url);
    EXPECT_EQ(shown.find("s3cret"), std::string::npos) << url << ": " << shown;
  }
  EXPECT_EQ(RedactRedisUrl("redis://app:s3cret@h:1"), "redis://app:***@h:1");
  EXPECT_EQ(RedactRedisUrl("u:s3cret@h:6379"), "u:***@h:6379");
  EXPECT_EQ(RedactRedisUrl("redis://h:1"), "redis://h:1");
  EXPECT_EQ(RedactRedisUrl("redis://h:6379/2"), "redis://h:6379/2");
  EXPECT_EQ(RedactRedisUrl("redis://u:s3cret/0"), "redis://u:***/0");
}

TEST(RedisUrlConfig, ErrorsNeverShowThePassword) {
  for (const std::string url :
       {"redis://u:s3cret@h:x", "u:s3cret@h:6379", "http://u:s3cret@h",
        "unix://u:s3cret@rel.sock", "redis://default:s3cret"}) {
    const std::string message =
        OnlyError("redis: {url: \"" + url + "\"}").ToString();
    EXPECT_EQ(message.find("s3cret"), std::string::npos) << message;
    EXPECT_NE(message.find("***"), std::string::npos) << message;
  }
}

// ---- redis.tls
// ---------------------------------------------------------------

class TlsSection : public TempDirTest {
 protected:
  static constexpr char kCert[] =
      "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  static constexpr char kKey[] =
      "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n";

  void SetUp() override {
    TempDirTest::SetUp();
    ca_ = Write("ca.pem", kCert);
    cert_ = Write("client.pem", kCert);
    key_ = Write("client.key", kKey);
  }

  // A file whose redis.url is `url` and whose redis.tls mapping is `tls`
  // (lines indented under it).
  static std::string Yaml(const std::string& url, const std::string& tls) {
    return "redis:\n  url: " + url + "\n  tls:\n" + tls;
  }

  std::string ca_, cert_, key_;
};

TEST_F(TlsSection, ReadsEveryKey) {
  const Config config = testing::Load(
      Yaml("rediss://:pw@redis:6380", "    ca_file: " + ca_ +
                                          "\n"
                                          "    ca_dir: " +
                                          dir_.string() +
                                          "\n"
                                          "    cert_file: " +
                                          cert_ +
                                          "\n"
                                          "    key_file: " +
                                          key_ +
                                          "\n"
                                          "    server_name: redis.prod\n"));
  EXPECT_EQ(config.redis.tls, (RedisTlsConfig{.ca_file = ca_,
                                              .ca_dir = dir_.string(),
                                              .cert_file = cert_,
                                              .key_file = key_,
                                              .server_name = "redis.prod"}));
}

TEST_F(TlsSection, RedissAloneNeedsNoSection) {
  const Config config = testing::Load("redis:\n  url: rediss://redis:6380\n");
  EXPECT_EQ(config.redis.tls, RedisTlsConfig{});
  // An empty section is all defaults too.
  EXPECT_EQ(testing::Load("redis:\n  url: rediss://h\n  tls:\n").redis.tls,
            RedisTlsConfig{});
  EXPECT_TRUE(
      testing::Load(Yaml("rediss://h", "    insecure_skip_verify: true\n"))
          .redis.tls.insecure_skip_verify);
}

TEST_F(TlsSection, TlsWithAPlaintextUrlIsAContradiction) {
  EXPECT_EQ(
      OnlyError(Yaml("redis://h:1", "    ca_file: " + ca_ + "\n")).ToString(),
      "c.yaml:3:3: redis.tls: TLS settings need a rediss:// (or "
      "rediss+sentinel://, rediss+cluster://) url, and "
      "redis.url is redis://; write rediss://HOST:PORT to use TLS, or "
      "remove redis.tls");
  EXPECT_NE(OnlyError(Yaml("redis+cluster://h:1", "    ca_file: " + ca_ + "\n"))
                .message.find("write rediss+cluster://... to use TLS"),
            std::string::npos);
  EXPECT_TRUE(testing::Load(Yaml("rediss+cluster://h:1,h:2",
                                 "    ca_file: " + ca_ + "\n"))
                  .redis.tls.ca_file == ca_);
  EXPECT_NE(OnlyError("redis:\n  url: unix:///r.sock\n  tls: {}\n")
                .message.find("redis.url is unix://"),
            std::string::npos);
}

TEST_F(TlsSection, CertificateAndKeyGoTogether) {
  EXPECT_EQ(OnlyError(Yaml("rediss://h", "    cert_file: " + cert_ + "\n"))
                .ToString(),
            "c.yaml:4:16: redis.tls.cert_file: a client certificate needs its "
            "private key: set redis.tls.key_file too");
  EXPECT_EQ(
      OnlyError(Yaml("rediss://h", "    key_file: " + key_ + "\n")).ToString(),
      "c.yaml:4:15: redis.tls.key_file: a private key needs its client "
      "certificate: set redis.tls.cert_file too");
}

TEST_F(TlsSection, InsecureWithACaIsAContradiction) {
  EXPECT_EQ(OnlyError(Yaml("rediss://h", "    ca_file: " + ca_ +
                                             "\n    insecure_skip_verify: "
                                             "true\n"))
                .ToString(),
            "c.yaml:5:27: redis.tls.insecure_skip_verify: "
            "insecure_skip_verify: true verifies no certificate, so the CA in "
            "ca_file would be ignored; remove one of the two");
}

TEST_F(TlsSection, FilesMustExistBeReadableAndHoldTheRightPem) {
  const std::string missing = (dir_ / "missing.pem").string();
  std::string message =
      OnlyError(Yaml("rediss://h", "    ca_file: " + missing + "\n"))
          .ToString();
  EXPECT_EQ(message.rfind("c.yaml:4:14: redis.tls.ca_file: expected a "
                          "readable PEM file of CA certificates, found '",
                          0),
            0u)
      << message;
  EXPECT_NE(message.find("(No such file or directory)"), std::string::npos)
      << message;

  // A FIFO would block the check (and the worker's start) for ever.
  const std::string fifo = (dir_ / "ca.fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  message =
      OnlyError(Yaml("rediss://h", "    ca_file: " + fifo + "\n")).ToString();
  EXPECT_NE(message.find("(not a regular file)"), std::string::npos) << message;

  // Swapped certificate and key.
  const std::vector<std::string> swapped = testing::ErrorLines(
      Yaml("rediss://h",
           "    cert_file: " + key_ + "\n    key_file: " + cert_ + "\n"));
  ASSERT_EQ(swapped.size(), 2u);
  EXPECT_NE(swapped[0].find("(it holds a private key, not a certificate)"),
            std::string::npos)
      << swapped[0];
  EXPECT_NE(swapped[1].find("(it holds a certificate, not a private key)"),
            std::string::npos)
      << swapped[1];

  const std::string encrypted = Write(
      "enc.key",
      "-----BEGIN ENCRYPTED PRIVATE KEY-----\nx\n-----END ENCRYPTED PRIVATE "
      "KEY-----\n");
  message =
      OnlyError(Yaml("rediss://h", "    cert_file: " + cert_ +
                                       "\n    key_file: " + encrypted + "\n"))
          .message;
  EXPECT_NE(message.find("the key is encrypted"), std::string::npos) << message;

  message = OnlyError(Yaml("rediss://h", "    ca_dir: " + ca_ + "\n")).message;
  EXPECT_NE(message.find("(not a directory)"), std::string::npos) << message;

  message =
      OnlyError(Yaml("rediss://h", "    ca_file: " + dir_.string() + "\n"))
          .message;
  EXPECT_NE(message.find("(it is a directory)"), std::string::npos) << message;
}

TEST_F(TlsSection, UnreadableFile) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads every file";
  std::filesystem::permissions(ca_, std::filesystem::perms::none);
  const std::string message =
      OnlyError(Yaml("rediss://h", "    ca_file: " + ca_ + "\n")).message;
  EXPECT_NE(message.find("(Permission denied)"), std::string::npos) << message;
}

TEST_F(TlsSection, ServerNameAndTypos) {
  EXPECT_EQ(OnlyError(Yaml("rediss://h", "    server_name: a b\n")).message,
            "expected the server's DNS name or IP address, found 'a b' (a DNS "
            "name or an IP address: letters, digits, '.', '-', '_', ':')");
  EXPECT_EQ(OnlyError(Yaml("rediss://h", "    ca_fil: x\n")).message,
            "unknown key; did you mean 'ca_file'?");
  EXPECT_EQ(
      OnlyError(Yaml("rediss://h", "    insecure_skip_verify: yes\n")).message,
      "expected true or false, found 'yes'");
}

}  // namespace
}  // namespace lockfleet::config

namespace lockfleet::config {
namespace {

// ---- redis.sentinel and sentinel URLs in the config

TEST(RedisSentinelConfig, SentinelUrlAndCredentials) {
  const Config c = testing::Load(
      "redis:\n"
      "  url: rediss+sentinel://:pw@s1:26379,s2/main/2\n"
      "  sentinel: {user: watcher, password: s3cret}\n");
  EXPECT_EQ(c.redis.sentinel.user, "watcher");
  EXPECT_EQ(c.redis.sentinel.password, "s3cret");
  RedisUrl url;
  ASSERT_EQ(ParseRedisUrl(c.redis.url, &url), "");
  EXPECT_EQ(url.master_name, "main");
}

TEST(RedisSentinelConfig, SentinelSettingsNeedASentinelUrl) {
  EXPECT_EQ(OnlyError("redis:\n  url: redis://h\n  sentinel: {password: x}\n")
                .ToString(),
            "c.yaml:3:3: redis.sentinel: Sentinel settings need a "
            "redis+sentinel:// url; remove redis.sentinel or point redis.url "
            "at the sentinels");
}

TEST(RedisClusterConfig, ClusterUrlChecks) {
  const Config c = testing::Load(
      "redis:\n  url: redis+cluster://:pw@n1:7000,n2:7001\n  pool_size: 2\n");
  RedisUrl url;
  ASSERT_EQ(ParseRedisUrl(c.redis.url, &url), "");
  EXPECT_EQ(url.seeds.size(), 2u);
  EXPECT_NE(OnlyError("redis:\n  url: redis+cluster://n1/2\n")
                .message.find("a Redis Cluster has db 0 only"),
            std::string::npos);
  EXPECT_NE(OnlyError("redis:\n  url: redis+cluster://n1\n"
                      "  sentinel: {password: x}\n")
                .message.find("Sentinel settings need a redis+sentinel:// url"),
            std::string::npos);
}

TEST(RedisSentinelConfig, AUserNeedsItsPassword) {
  EXPECT_EQ(
      OnlyError("redis:\n  url: redis+sentinel://s/m\n  sentinel: {user: u}\n")
          .message,
      "a Sentinel user needs its password: set redis.sentinel.password too");
}

TEST(RedisSentinelConfig, ABadPasswordValueIsNotShown) {
  const std::string message =
      OnlyError(
          "redis:\n  url: redis+sentinel://s/m\n  sentinel: {password: ''}\n")
          .ToString();
  EXPECT_NE(message.find("redis.sentinel.password"), std::string::npos)
      << message;
  const std::string typo = OnlyError(
                               "redis:\n  url: redis+sentinel://s/m\n  "
                               "sentinel: {pasword: s3cret}\n")
                               .ToString();
  EXPECT_NE(typo.find("did you mean 'password'"), std::string::npos) << typo;
}

TEST(RedisSentinelConfig, TlsGoesWithRedissSentinel) {
  EXPECT_EQ(testing::Load("redis:\n  url: rediss+sentinel://s/m\n"
                          "  tls: {server_name: redis.internal}\n")
                .redis.tls.server_name,
            "redis.internal");
  EXPECT_NE(OnlyError("redis:\n  url: redis+sentinel://s/m\n"
                      "  tls: {server_name: redis.internal}\n")
                .message.find("redis.url is redis+sentinel://; write "
                              "rediss+sentinel://"),
            std::string::npos);
}

}  // namespace
}  // namespace lockfleet::config
