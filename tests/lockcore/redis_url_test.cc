#include "lockfleet/lockcore/redis_url.h"

#include <gtest/gtest.h>

#include "lockfleet/lockcore/error.h"

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

}  // namespace
}  // namespace lockfleet
