// Shared by the notifier's integration tests: one simulated lockfleet
// process (its own Redis connections, LockClient and KafkaNotifier, wired as
// `lockfleet worker` wires them), a suite fixture with a private
// redis-server and embedded broker, and one that runs a test on both the
// embedded broker and a real one.
#pragma once

#include <gtest/gtest.h>
#include <librdkafka/rdkafkacpp.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/notifier/embedded_broker.h"
#include "lockfleet/notifier/kafka_notifier.h"
#include "support/kafka_admin.h"
#include "support/real_kafka.h"
#include "support/redis_server.h"

namespace lockfleet::notifier::testing {

inline constexpr std::chrono::milliseconds kNoCap{600000};  // parks end by
                                                            // wake-up or TTL
// Presence windows so long that a fair waiter's presence refresh (every
// presence_window / 3) comes after 30 s: with kNoCap and the 30 s default
// lease, no park ends by a bound within a test's time scale, so "woken by
// the event, not by a bound" does not depend on how fast the machine is.
inline constexpr std::chrono::milliseconds kLongWindow{90000};

inline void Quiet(LogLevel, std::string_view) {}

struct ProcessOptions {
  std::chrono::milliseconds park_cap = kNoCap;
  std::vector<std::string> event_keys;     // Default: unsigned events
  std::string topic = "lockfleet.unlock";  // the unlock topic
  FanOut fan_out = FanOut::kBroadcast;
  std::chrono::milliseconds targeted_linger{2000};
};

struct Process {
  Process(const std::string& redis_url, const std::string& bootstrap,
          ProcessOptions options = {}) {
    KafkaOptions k;
    k.bootstrap = bootstrap;
    k.topic = std::move(options.topic);
    k.event_keys = std::move(options.event_keys);
    k.fan_out = options.fan_out;
    k.targeted_linger = options.targeted_linger;
    k.log = Quiet;
    notifier = std::make_shared<KafkaNotifier>(k);
    locks = std::make_unique<LockClient>(
        std::make_shared<RedisClient>(RedisOptions{.url = redis_url}),
        LockClientOptions{.park_cap = options.park_cap,
                          .presence_window = kLongWindow,
                          .claim_window = kLongWindow,
                          .publisher = notifier,
                          // These tests are about the events: a queue head
                          // that finds its grant itself would take their
                          // wake-ups (spinning: tests/lockcore/spin_test).
                          .spin_max_hold = std::chrono::milliseconds(0)});
    notifier->Subscribe(locks.get());
    EXPECT_TRUE(notifier->WaitUntilReady(std::chrono::seconds(30)));
  }
  ~Process() { notifier->Unsubscribe(locks.get()); }

  // Records dropped by this process's consumer for `reason`.
  uint64_t Dropped(const std::string& reason) const {
    const NotifierStats s = notifier->stats();
    const auto it = s.malformed_by_reason.find(reason);
    return it == s.malformed_by_reason.end() ? 0 : it->second;
  }

  std::shared_ptr<KafkaNotifier> notifier;
  std::unique_ptr<LockClient> locks;
};

// Writes `values` to the unlock topic with a producer of its own: someone
// who can write to the topic but is no lockfleet process. With a `key`,
// each record is keyed by it and librdkafka's default partitioner picks its
// partition (as a producer that keys by the lock name does).
inline void Forge(const std::string& bootstrap,
                  const std::vector<std::string>& values,
                  const std::string& topic = "lockfleet.unlock",
                  const std::string& key = "") {
  std::string err;
  std::unique_ptr<RdKafka::Conf> conf(
      RdKafka::Conf::create(RdKafka::Conf::CONF_GLOBAL));
  conf->set("bootstrap.servers", bootstrap, err);
  conf->set("linger.ms", "0", err);
  std::unique_ptr<RdKafka::Producer> producer(
      RdKafka::Producer::create(conf.get(), err));
  ASSERT_TRUE(producer) << err;
  for (const std::string& v : values) {
    ASSERT_EQ(producer->produce(topic, RdKafka::Topic::PARTITION_UA,
                                RdKafka::Producer::RK_MSG_COPY,
                                const_cast<char*>(v.data()), v.size(),
                                key.empty() ? nullptr : key.data(), key.size(),
                                0, nullptr),
              RdKafka::ERR_NO_ERROR);
  }
  ASSERT_EQ(producer->flush(10000), RdKafka::ERR_NO_ERROR);
}

// One redis-server and one embedded broker per test suite.
class KafkaRedisTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    redis_ = new lockfleet::testing::RedisServer();
    broker_ = new EmbeddedBroker();
  }
  static void TearDownTestSuite() {
    delete broker_;
    broker_ = nullptr;
    delete redis_;
    redis_ = nullptr;
  }
  inline static lockfleet::testing::RedisServer* redis_ = nullptr;
  inline static EmbeddedBroker* broker_ = nullptr;
};

// The same tests on the embedded broker and on a real Apache Kafka broker
// (kafka-local, support/real_kafka.h): a real broker long-polls and has a
// real group coordinator. TEST_P tests of a fixture derived from this one,
// instantiated with INSTANTIATE_TEST_SUITE_P(Brokers, Fixture,
// ::testing::Values(false, true), BrokerName), give their processes
// {.topic = unlock_topic()}: on the real broker, the ctest run's shared one,
// each test has an unlock topic of its own, created (3 partitions) before
// its first process starts, as deploy/README.md tells operators.
class BothBrokersTest : public ::testing::TestWithParam<bool> {
 protected:
  static void SetUpTestSuite() {
    redis_ = new lockfleet::testing::RedisServer();
  }
  static void TearDownTestSuite() {
    embedded_.reset();
    real_.reset();
    delete redis_;
    redis_ = nullptr;
  }
  void SetUp() override {
    if (real()) {
      LOCKFLEET_SKIP_UNLESS_REAL_KAFKA();
      if (!real_) real_ = lockfleet::testing::RealKafka::Shared();
      unlock_topic_ =
          lockfleet::testing::RealKafka::UniqueName("lockfleet.unlock");
      ASSERT_EQ(lockfleet::testing::CreateKafkaTopic(real_->bootstrap(),
                                                     unlock_topic_, 3),
                "");
    } else if (!embedded_) {
      embedded_ = std::make_unique<EmbeddedBroker>();
    }
  }

  bool real() const { return GetParam(); }
  std::string bootstrap() const {
    return real() ? real_->bootstrap() : embedded_->bootstrap();
  }
  const std::string& unlock_topic() const { return unlock_topic_; }

  inline static lockfleet::testing::RedisServer* redis_ = nullptr;
  inline static std::unique_ptr<EmbeddedBroker> embedded_;
  inline static std::unique_ptr<lockfleet::testing::RealKafka> real_;

 private:
  std::string unlock_topic_ = "lockfleet.unlock";
};

inline std::string BrokerName(const ::testing::TestParamInfo<bool>& info) {
  return info.param ? "RealKafka" : "EmbeddedBroker";
}

}  // namespace lockfleet::notifier::testing
