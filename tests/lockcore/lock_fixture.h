// Shared fixture for lockcore integration tests: one private redis-server per
// test suite (FLUSHALL between tests), and helpers to build clients.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/redis_client.h"
#include "support/redis_server.h"

namespace lockfleet::testing {

class LockTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new RedisServer(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    if (server_->pid() <= 0) server_->Start();  // a test may have stopped it
    redis_ = NewRedis();
    redis_->Execute({"FLUSHALL"});
  }

  static std::shared_ptr<RedisClient> NewRedis(int pool = 4) {
    RedisOptions o;
    o.url = server_->url();
    o.pool_size = pool;
    return std::make_shared<RedisClient>(o);
  }

  // A client as a separate process would have it: its own connections.
  static std::unique_ptr<LockClient> NewClient(LockClientOptions o = {}) {
    return std::make_unique<LockClient>(NewRedis(), std::move(o));
  }

  static std::string LockKey(const std::string& name,
                             const std::string& prefix = "lockfleet") {
    return prefix + ":{" + name + "}:lock";
  }

  static RedisServer* server_;
  std::shared_ptr<RedisClient> redis_;  // for direct inspection
};

inline RedisServer* LockTest::server_ = nullptr;

}  // namespace lockfleet::testing
