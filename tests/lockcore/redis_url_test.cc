#include "lockfleet/lockcore/redis_url.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/redis_client.h"

namespace lockfleet {
namespace {

TEST(RedisUrl, HostPortDb) {
  RedisEndpoint e = ParseRedisUrl("redis://cache.internal:6380/3");
  EXPECT_EQ(e.host, "cache.internal");
  EXPECT_EQ(e.port, 6380);
  EXPECT_EQ(e.db, 3);
  EXPECT_TRUE(e.user.empty());
  EXPECT_TRUE(e.password.empty());
  EXPECT_TRUE(e.unix_path.empty());
}

TEST(RedisUrl, DefaultPort) {
  RedisEndpoint e = ParseRedisUrl("redis://localhost");
  EXPECT_EQ(e.host, "localhost");
  EXPECT_EQ(e.port, 6379);
  EXPECT_EQ(e.db, 0);
}

TEST(RedisUrl, UserPasswordWithEscapes) {
  RedisEndpoint e = ParseRedisUrl("redis://app:p%40ss%3Aword@10.0.0.5:7000");
  EXPECT_EQ(e.user, "app");
  EXPECT_EQ(e.password, "p@ss:word");
  EXPECT_EQ(e.host, "10.0.0.5");
  EXPECT_EQ(e.port, 7000);
  EXPECT_EQ(e.Redacted(), "redis://app:***@10.0.0.5:7000");
}

TEST(RedisUrl, PasswordOnly) {
  RedisEndpoint e = ParseRedisUrl("redis://:secret@h:1");
  EXPECT_EQ(e.user, "");
  EXPECT_EQ(e.password, "secret");
}

TEST(RedisUrl, Ipv6) {
  RedisEndpoint e = ParseRedisUrl("redis://[::1]:6390/1");
  EXPECT_EQ(e.host, "::1");
  EXPECT_EQ(e.port, 6390);
  EXPECT_EQ(e.db, 1);
  EXPECT_EQ(e.Redacted(), "redis://[::1]:6390/1");
}

TEST(RedisUrl, UnixSocket) {
  RedisEndpoint e = ParseRedisUrl("unix:///run/redis/redis.sock?db=5");
  EXPECT_EQ(e.unix_path, "/run/redis/redis.sock");
  EXPECT_EQ(e.db, 5);
  EXPECT_EQ(e.Redacted(), "unix:///run/redis/redis.sock?db=5");
}

TEST(RedisUrl, UnixSocketWithAuth) {
  RedisEndpoint e = ParseRedisUrl("unix://u:pw@/tmp/r.sock");
  EXPECT_EQ(e.user, "u");
  EXPECT_EQ(e.password, "pw");
  EXPECT_EQ(e.unix_path, "/tmp/r.sock");
}

TEST(RedisUrl, RejectsGarbage) {
  for (const char* bad :
       {"", "http://h:1", "redis://", "redis://h:0", "redis://h:70000",
        "redis://h:12x", "redis://h/abc", "unix://relative.sock",
        "unix:///x?db=", "unix:///x?foo=1", "redis://[::1",
        "redis://u:%zz@h"}) {
    try {
      ParseRedisUrl(bad);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << bad;
      EXPECT_NE(std::string(e.what()).find("invalid Redis URL"),
                std::string::npos);
    }
  }
}

TEST(RedisUrl, RedissTurnsTlsOn) {
  RedisEndpoint e = ParseRedisUrl("rediss://app:pw@cache:6380/2");
  EXPECT_TRUE(e.tls);
  EXPECT_EQ(e.host, "cache");
  EXPECT_EQ(e.port, 6380);
  EXPECT_EQ(e.db, 2);
  EXPECT_EQ(e.Redacted(), "rediss://app:***@cache:6380/2");
  EXPECT_FALSE(ParseRedisUrl("redis://cache").tls);
}

// The password leak of issue 15: ParseRedisUrl's message quoted the URL as
// given, and every caller printed it (`lockfleet lock --redis
// 'redis://u:s3cret@h:x' ...` showed s3cret on stderr).
TEST(RedisUrl, ErrorsNeverRepeatThePassword) {
  const std::vector<std::string> bad = {
      "redis://u:s3cret@h:x",
      "redis://:s3cret@h/x",
      "redis://u:s3cret%zz@h",
      "rediss://u:s3cret@",
      "unix://u:s3cret@rel.sock",
      "http://u:s3cret@h",
      "u:s3cret@h:6379",
      "s3cret@h",
      // The host forgotten: the password is where a port would be.
      "redis://u:s3cret",
      "redis://u:s3cret/0",
      "rediss://default:s3cret",
      "redis://:s3cret",
  };
  for (const std::string& url : bad) {
    try {
      ParseRedisUrl(url);
      ADD_FAILURE() << "accepted " << url;
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_EQ(message.find("s3cret"), std::string::npos) << message;
      EXPECT_NE(message.find("invalid Redis URL"), std::string::npos);
    }
    try {
      RedisClient client(RedisOptions{.url = url});
      ADD_FAILURE() << "accepted " << url;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_EQ(std::string(e.what()).find("s3cret"), std::string::npos)
          << e.what();
    }
  }
}

TEST(RedisUrl, ConnectionErrorsNeverRepeatThePassword) {
  // Nothing listens on port 1: the connect is refused at once.
  RedisClient client(RedisOptions{.url = "redis://app:s3cret@127.0.0.1:1/2"});
  try {
    client.Execute({"PING"});
    ADD_FAILURE() << "connected to port 1";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(e.code(), ErrorCode::kRedisUnavailable) << message;
    EXPECT_NE(message.find("redis://app:***@127.0.0.1:1/2"), std::string::npos)
        << message;
    EXPECT_EQ(message.find("s3cret"), std::string::npos) << message;
  }
  // TLS options beside a plaintext URL are refused, redacted too.
  RedisOptions options{.url = "redis://:s3cret@h"};
  options.tls.ca_file = "/etc/ssl/certs/ca-certificates.crt";
  try {
    RedisClient tls_client(options);
    ADD_FAILURE() << "TLS options with redis:// accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(std::string(e.what()).find("s3cret"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace lockfleet
