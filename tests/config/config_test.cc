// LoadString: what a valid file yields, and the error for each kind of
// mistake (with its FILE:LINE:COLUMN, key path and message).
#include "lockfleet/config/config.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "config_test_util.h"

namespace lockfleet::config {
namespace {

using std::chrono::milliseconds;
using testing::ErrorLines;
using testing::Errors;
using testing::kMinimal;
using testing::Load;
using testing::OnlyError;

// --- valid files -------------------------------------------------------------

TEST(ConfigTest, MinimalFileGetsEveryDefault) {
  const Config config = Load(kMinimal);
  Config expected;
  expected.redis.url = "redis://h:1";
  EXPECT_EQ(config, expected);
  EXPECT_FALSE(config.kafka.has_value());
  EXPECT_EQ(config.redis.pool_size, 4);
  EXPECT_EQ(config.locks.lease, milliseconds(30000));
  EXPECT_FALSE(config.locks.wait.has_value()) << "wait defaults to forever";
  EXPECT_EQ(config.worker.threads, 4);
  EXPECT_EQ(config.metrics.listen, "");
  EXPECT_EQ(config.logging.level, LogLevel::kInfo);
}

TEST(ConfigTest, ReadsEveryKey) {
  const Config config = Load(R"(
redis:
  url: unix:///run/redis.sock?db=2
  pool_size: 16
  connect_timeout: 500ms
  command_timeout: 1.5s
  key_prefix: app
  min_replicas: 2
  replica_timeout: 250ms
kafka:
  bootstrap: k1:9092,[::1]:9093,SSL://k3:9094
  unlock_topic: u
  jobs_topic: j
  fetch_wait: 0
  fan_out: targeted
  targeted_replay: 100
  targeted_linger: 500ms
  message_timeout: 10s
  queue_max_messages: 5
  client_id: me
  properties: {security.protocol: SASL_SSL, linger.ms: 5, enable.idempotence: true}
locks:
  lease: 10s
  wait: 0
  park_cap: 250ms
  fair: false
  presence_window: 6s
  claim_window: 2001ms
  spin_max_hold: 0
worker:
  threads: 8
  grace_period: 0
  health_listen: "[::]:0"
  sources:
    kafka_jobs: {enabled: true, group: g}
    schedules:
      - {name: a, lock: "report:a", lock_mode: write, every: 1h, catch_up: 3, handler: h, payload: {ms: 100, f: 1.5, b: true, s: "7", t: text}, limit: {name: partner-api, permits: 3, take: 2}}
      - {name: b, cron: "@daily", handler: h2}
  handlers:
    inventory.purchase: {stock_prefix: stock, limit: 3}
metrics: {listen: "127.0.0.1:9464"}
logging: {level: debug, format: json}
)");
  EXPECT_EQ(config.redis.url, "unix:///run/redis.sock?db=2");
  EXPECT_EQ(config.redis.pool_size, 16);
  EXPECT_EQ(config.redis.connect_timeout, milliseconds(500));
  EXPECT_EQ(config.redis.command_timeout, milliseconds(1500));
  EXPECT_EQ(config.redis.min_replicas, 2);
  EXPECT_EQ(config.redis.replica_timeout, milliseconds(250));
  EXPECT_EQ(config.redis.key_prefix, "app");
  ASSERT_TRUE(config.kafka.has_value());
  EXPECT_EQ(config.kafka->bootstrap, "k1:9092,[::1]:9093,SSL://k3:9094");
  EXPECT_EQ(config.kafka->unlock_topic, "u");
  EXPECT_EQ(config.kafka->jobs_topic, "j");
  EXPECT_EQ(config.kafka->fetch_wait, milliseconds(0));
  EXPECT_EQ(config.kafka->fan_out, FanOut::kTargeted);
  EXPECT_EQ(config.kafka->targeted_replay, 100);
  EXPECT_EQ(config.kafka->targeted_linger, milliseconds(500));
  EXPECT_EQ(config.kafka->message_timeout, milliseconds(10000));
  EXPECT_EQ(config.kafka->queue_max_messages, 5);
  EXPECT_EQ(config.kafka->client_id, "me");
  const std::map<std::string, std::string> properties = {
      {"security.protocol", "SASL_SSL"},
      {"linger.ms", "5"},
      {"enable.idempotence", "true"}};
  EXPECT_EQ(config.kafka->properties, properties);
  EXPECT_EQ(config.locks.lease, milliseconds(10000));
  EXPECT_EQ(config.locks.wait, milliseconds(0));
  EXPECT_EQ(config.locks.park_cap, milliseconds(250));
  EXPECT_FALSE(config.locks.fair);
  EXPECT_EQ(config.locks.presence_window, milliseconds(6000));
  EXPECT_EQ(config.locks.claim_window, milliseconds(2001));
  EXPECT_EQ(config.locks.spin_max_hold, milliseconds(0));
  EXPECT_EQ(config.worker.threads, 8);
  EXPECT_EQ(config.worker.grace_period, milliseconds(0));
  EXPECT_EQ(config.worker.health_listen, "[::]:0");
  EXPECT_TRUE(config.worker.sources.kafka_jobs.enabled);
  EXPECT_EQ(config.worker.sources.kafka_jobs.group, "g");
  ASSERT_EQ(config.worker.sources.schedules.size(), 2u);
  const ScheduleConfig& a = config.worker.sources.schedules[0];
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.lock, "report:a");
  EXPECT_EQ(a.lock_mode, LockMode::kWrite);
  EXPECT_EQ(a.every, milliseconds(3600000));
  EXPECT_FALSE(a.cron.has_value());
  EXPECT_EQ(a.handler, "h");
  EXPECT_EQ(a.catch_up, 3);
  const Settings payload = {{"ms", {Scalar::Type::kInteger, "100"}},
                            {"f", {Scalar::Type::kNumber, "1.5"}},
                            {"b", {Scalar::Type::kBool, "true"}},
                            {"s", {Scalar::Type::kString, "7"}},
                            {"t", {Scalar::Type::kString, "text"}}};
  EXPECT_EQ(a.payload, payload);
  ASSERT_TRUE(a.limit.has_value());
  EXPECT_EQ(*a.limit,
            (LimitConfig{.name = "partner-api", .permits = 3, .take = 2}));
  const ScheduleConfig& b = config.worker.sources.schedules[1];
  EXPECT_EQ(b.lock, "b") << "the lock defaults to the name";
  EXPECT_FALSE(b.lock_mode.has_value()) << "the plain lock by default";
  EXPECT_FALSE(b.limit.has_value());
  EXPECT_FALSE(b.every.has_value());
  ASSERT_TRUE(b.cron.has_value());
  EXPECT_EQ(*b.cron, CronSchedule::Parse("0 0 * * *"));
  EXPECT_TRUE(b.payload.empty());
  EXPECT_EQ(b.catch_up, 1) << "by default only the latest missed one runs";
  const Settings purchase = {{"stock_prefix", {Scalar::Type::kString, "stock"}},
                             {"limit", {Scalar::Type::kInteger, "3"}}};
  EXPECT_EQ(config.worker.handlers.at("inventory.purchase"), purchase);
  EXPECT_EQ(config.metrics.listen, "127.0.0.1:9464");
  EXPECT_EQ(config.logging.level, LogLevel::kDebug);
  EXPECT_EQ(config.logging.format, LogFormat::kJson);
}

TEST(ConfigTest, EmptySectionsMeanDefaults) {
  const Config config = Load(std::string(kMinimal) +
                             "locks:\nworker:\n  sources:\nmetrics: {}\n");
  EXPECT_EQ(config.locks, LocksConfig{});
  EXPECT_EQ(config.worker, WorkerConfig{});
}

TEST(ConfigTest, WaitForeverAndQuotedNumbers) {
  const Config config =
      Load(std::string(kMinimal) +
           "locks: {wait: forever}\nworker: {threads: \"2\"}");
  EXPECT_FALSE(config.locks.wait.has_value());
  EXPECT_EQ(config.worker.threads, 2);
}

TEST(ConfigTest, RedisUrlForms) {
  for (const char* url :
       {"redis://h", "redis://h:6380", "redis://:pw@h:1/3", "redis://u:p@h",
        "redis://[::1]:6379", "redis://[::1]", "unix:///tmp/r.sock",
        "unix://:pw@/tmp/r.sock?db=1", "redis://p%40ss@h"}) {
    EXPECT_TRUE(Errors(std::string("redis: {url: \"") + url + "\"}").empty())
        << url << ": "
        << ::testing::PrintToString(
               ErrorLines(std::string("redis: {url: \"") + url + "\"}"));
  }
}

// --- unknown keys ------------------------------------------------------------

TEST(ConfigErrorTest, UnknownKeySuggestsTheClosest) {
  const Diagnostic error =
      OnlyError("redis:\n  url: redis://h\n  comand_timeout: 2s\n");
  EXPECT_EQ(error.ToString(),
            "c.yaml:3:3: redis.comand_timeout: unknown key; did you mean "
            "'command_timeout'?");
}

TEST(ConfigErrorTest, UnknownKeySuggestionsIgnoreCaseAndDashes) {
  EXPECT_EQ(OnlyError("redis:\n  url: redis://h\n  Pool-Size: 2\n").message,
            "unknown key; did you mean 'pool_size'?");
  EXPECT_EQ(OnlyError(std::string(kMinimal) + "loging: {}\n").message,
            "unknown key; did you mean 'logging'?");
  EXPECT_EQ(
      OnlyError(std::string(kMinimal) + "locks: {presence: 3s}\n").message,
      "unknown key; did you mean 'presence_window'?");
}

TEST(ConfigErrorTest, UnknownKeyWithoutAnythingCloseListsTheKeys) {
  EXPECT_EQ(OnlyError(std::string(kMinimal) + "metrics: {port: 1}\n").message,
            "unknown key; expected one of listen, targets");
  EXPECT_EQ(OnlyError(std::string(kMinimal) + "zzz: 1\n").message,
            "unknown key; expected one of redis, kafka, locks, worker, "
            "metrics, logging");
}

TEST(ConfigErrorTest, UnknownKeyInEverySection) {
  const std::vector<std::string> lines =
      ErrorLines(R"(redis: {url: "redis://h", x1: 1}
kafka: {bootstrap: "h:1", x2: 1}
locks: {x3: 1}
worker:
  x4: 1
  sources:
    x5: 1
    kafka_jobs: {x6: 1}
    schedules: [{name: n, every: 1h, handler: h, x7: 1}]
metrics: {x8: 1}
logging: {x9: 1}
)");
  const std::vector<std::string> paths = {"redis.x1",
                                          "kafka.x2",
                                          "locks.x3",
                                          "worker.x4",
                                          "worker.sources.x5",
                                          "worker.sources.kafka_jobs.x6",
                                          "worker.sources.schedules[0].x7",
                                          "metrics.x8",
                                          "logging.x9"};
  ASSERT_EQ(lines.size(), paths.size()) << ::testing::PrintToString(lines);
  for (size_t i = 0; i < paths.size(); ++i) {
    EXPECT_PRED_FORMAT2(::testing::IsSubstring,
                        ": " + paths[i] + ": unknown key", lines[i]);
  }
}

TEST(ConfigErrorTest, DuplicateKey) {
  EXPECT_EQ(
      OnlyError("redis:\n  url: redis://h\n  url: redis://g\n").ToString(),
      "c.yaml:3:3: redis.url: duplicate key (first given on line 2)");
}

// --- wrong types -------------------------------------------------------------

TEST(ConfigErrorTest, StringForInteger) {
  EXPECT_EQ(
      OnlyError("redis:\n  url: redis://h\n  pool_size: four\n").ToString(),
      "c.yaml:3:14: redis.pool_size: expected an integer from 1 to "
      "1024, found 'four'");
  EXPECT_EQ(OnlyError("redis:\n  url: redis://h\n  pool_size: 4.0\n").message,
            "expected an integer from 1 to 1024, found '4.0'");
}

TEST(ConfigErrorTest, MappingOrListForScalar) {
  EXPECT_EQ(OnlyError("redis:\n  url: {host: h}\n").ToString(),
            "c.yaml:2:8: redis.url: expected a Redis URL: "
            "redis://[[user]:password@]host[:port][/db], rediss://... (TLS), "
            "unix:///path/to.sock[?db=N], "
            "redis+sentinel://host[:port][,host[:port]...]/master[/db] or "
            "redis+cluster://host[:port][,host[:port]...], found "
            "a mapping");
  EXPECT_EQ(
      OnlyError(std::string(kMinimal) + "worker: {threads: [1]}\n").message,
      "expected an integer from 1 to 1024, found a list");
}

TEST(ConfigErrorTest, ScalarForSection) {
  EXPECT_EQ(OnlyError("redis: redis://h\n").ToString(),
            "c.yaml:1:8: redis: expected a mapping of Redis settings, found "
            "'redis://h'")
      << "one error: no extra 'missing redis.url'";
  EXPECT_EQ(OnlyError(std::string(kMinimal) + "locks: [1]\n").message,
            "expected a mapping of lock settings, found a list");
}

TEST(ConfigErrorTest, EmptyValue) {
  EXPECT_EQ(OnlyError("redis:\n  url: redis://h\n  pool_size:\n").ToString(),
            "c.yaml:3:3: redis.pool_size: expected an integer from 1 to 1024, "
            "found nothing");
}

TEST(ConfigErrorTest, BadBoolean) {
  EXPECT_EQ(OnlyError(std::string(kMinimal) + "locks: {fair: yes}\n").message,
            "expected true or false, found 'yes'");
}

TEST(ConfigErrorTest, NonScalarKey) {
  EXPECT_PRED_FORMAT2(
      ::testing::IsSubstring, "expected a key name, found a list",
      OnlyError(std::string(kMinimal) + "? [a]\n: 1\n").message);
}

// --- out of range ------------------------------------------------------------

TEST(ConfigErrorTest, IntegersOutOfRange) {
  EXPECT_EQ(OnlyError("redis: {url: redis://h, pool_size: 0}").message,
            "expected an integer from 1 to 1024, found '0'");
  EXPECT_EQ(OnlyError("redis: {url: redis://h, pool_size: 1025}").message,
            "expected an integer from 1 to 1024, found '1025'");
  EXPECT_EQ(
      OnlyError("redis: {url: redis://h, pool_size: 99999999999999999999}")
          .message,
      "expected an integer from 1 to 1024, found '99999999999999999999'");
  EXPECT_EQ(OnlyError(std::string(kMinimal) + "worker: {threads: -1}").message,
            "expected an integer from 1 to 1024, found '-1'");
}

TEST(ConfigErrorTest, DurationsOutOfRange) {
  EXPECT_EQ(OnlyError("redis: {url: redis://h, command_timeout: 0}").message,
            "expected a duration greater than 0, found '0'");
  EXPECT_EQ(OnlyError("redis: {url: redis://h, replica_timeout: 0}").message,
            "expected a duration greater than 0, found '0'");
  EXPECT_EQ(OnlyError("redis: {url: redis://h, min_replicas: 101}").message,
            "expected an integer from 0 to 100, found '101'");
  EXPECT_EQ(OnlyError("redis: {url: redis://h, min_replicas: -1}").message,
            "expected an integer from 0 to 100, found '-1'");
  EXPECT_EQ(OnlyError(std::string(kMinimal) + "locks: {lease: 10ms}").message,
            "expected a duration of at least 30ms, found '10ms'");
  EXPECT_EQ(OnlyError(std::string(kMinimal) + "locks: {park_cap: 2h}").message,
            "expected a duration from 1ms to 1h, found '2h'");
  EXPECT_EQ(OnlyError(std::string(kMinimal) +
                      "worker: {sources: {schedules: [{name: n, every: 10ms, "
                      "handler: h}]}}")
                .message,
            "expected a duration of at least 1s, found '10ms'");
}

TEST(ConfigErrorTest, ClaimWindowMustNotExceedPresenceWindow) {
  EXPECT_EQ(OnlyError(std::string(kMinimal) +
                      "locks:\n  presence_window: 3s\n  claim_window: 4s\n")
                .ToString(),
            "c.yaml:5:17: locks.claim_window: expected claim_window <= "
            "presence_window = 3s, found claim_window '4s'");
}

TEST(ConfigErrorTest, ClaimWindowMustExceedAThirdOfPresenceWindow) {
  EXPECT_EQ(OnlyError(std::string(kMinimal) +
                      "locks:\n  presence_window: 6s\n  claim_window: 2s\n")
                .ToString(),
            "c.yaml:5:17: locks.claim_window: expected a duration greater "
            "than presence_window / 3 = 2s, found '2s'");
  // Only presence_window given: the default claim_window is too small.
  EXPECT_EQ(
      OnlyError(std::string(kMinimal) + "locks:\n  presence_window: 30s\n")
          .ToString(),
      "c.yaml:4:20: locks.presence_window: expected less than 3 * "
      "claim_window (claim_window defaults to 2s), found '30s'; raise "
      "claim_window above 10s");
}

TEST(ConfigErrorTest, BadRedisUrls) {
  const auto message = [](const std::string& url) {
    return OnlyError("redis: {url: \"" + url + "\"}").message;
  };
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "(unknown scheme 'http://')",
                      message("http://h"));
  EXPECT_PRED_FORMAT2(::testing::IsSubstring,
                      "(no redis://, rediss://, unix://, redis+sentinel:// or "
                      "redis+cluster:// in front)",
                      message("localhost:6379"));
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "no host after rediss://",
                      message("rediss://"));
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "an IPv6 host goes in brackets",
                      message("redis://::1:6379"));
  EXPECT_PRED_FORMAT2(::testing::IsSubstring,
                      "the only query parameter is db=N",
                      message("unix:///r.sock?timeout=1"));
  EXPECT_PRED_FORMAT2(::testing::IsSubstring,
                      "the port must be a number from 1 to 65535",
                      message("redis://h:0"));
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "the port must be a number",
                      message("redis://h:x"));
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "no host", message("redis://"));
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "the db must be a number",
                      message("redis://h/x"));
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "must be absolute",
                      message("unix://tmp/r.sock"));
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "found ''", message(""));
}

TEST(ConfigErrorTest, RedisUrlErrorHidesThePassword) {
  const std::string message =
      OnlyError("redis: {url: \"redis://user:s3cret@h:99999\"}").message;
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "'redis://user:***@h:99999'",
                      message);
  EXPECT_EQ(message.find("s3cret"), std::string::npos) << message;
}

TEST(ConfigTest, MetricsTargetsAreTheWorkersEndpoints) {
  EXPECT_TRUE(Load(kMinimal).metrics.targets.empty());
  const Config config =
      Load(std::string(kMinimal) +
           "metrics:\n  targets: [10.0.0.1:9464, \"[::1]:9465\", w3:80]\n");
  EXPECT_EQ(config.metrics.targets,
            (std::vector<std::string>{"10.0.0.1:9464", "[::1]:9465", "w3:80"}));
}

TEST(ConfigErrorTest, BadMetricsTargets) {
  const Diagnostic port0 =
      OnlyError(std::string(kMinimal) + "metrics:\n  targets: [a:1, b:0]\n");
  EXPECT_EQ(port0.path, "metrics.targets[1]");
  EXPECT_EQ(port0.line, 4);
  EXPECT_PRED_FORMAT2(::testing::IsSubstring,
                      "expected HOST:PORT of a worker's /metrics endpoint, "
                      "found 'b:0'",
                      port0.message);
  EXPECT_PRED_FORMAT2(
      ::testing::IsSubstring, "'a:1' is listed twice",
      OnlyError(std::string(kMinimal) + "metrics: {targets: [a:1, a:1]}")
          .message);
  EXPECT_PRED_FORMAT2(
      ::testing::IsSubstring, "expected a list of HOST:PORT",
      OnlyError(std::string(kMinimal) + "metrics: {targets: a:1}").message);
}

TEST(ConfigErrorTest, BadHostPorts) {
  EXPECT_EQ(
      OnlyError(std::string(kMinimal) + "metrics: {listen: localhost}").message,
      "expected HOST:PORT to listen on, or \"\" for none, found "
      "'localhost' (no ':PORT' after the host)");
  EXPECT_PRED_FORMAT2(
      ::testing::IsSubstring, "an IPv6 host goes in brackets",
      OnlyError(std::string(kMinimal) + "worker: {health_listen: \"::1:80\"}")
          .message);
  EXPECT_PRED_FORMAT2(
      ::testing::IsSubstring, "no host before ':PORT'",
      OnlyError(std::string(kMinimal) + "metrics: {listen: \":9464\"}")
          .message);
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "an empty server in the list",
                      OnlyError("redis: {url: redis://h}\nkafka: {bootstrap: "
                                "\"a:1,,b:2\"}")
                          .message);
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "'b': no ':PORT'",
                      OnlyError("redis: {url: redis://h}\nkafka: {bootstrap: "
                                "\"a:1,b\"}")
                          .message);
}

TEST(ConfigErrorTest, BadTopics) {
  EXPECT_PRED_FORMAT2(::testing::IsSubstring,
                      "only letters, digits, '.', '_' and '-'",
                      OnlyError("redis: {url: redis://h}\nkafka: {bootstrap: "
                                "\"a:1\", jobs_topic: \"a/b\"}")
                          .message);
  EXPECT_EQ(OnlyError("redis: {url: redis://h}\nkafka: {bootstrap: "
                      "\"a:1\", jobs_topic: lockfleet.unlock}")
                .message,
            "expected a topic other than kafka.unlock_topic, found "
            "'lockfleet.unlock' for both");
}

TEST(ConfigErrorTest, ReservedKafkaProperty) {
  EXPECT_EQ(OnlyError("redis: {url: redis://h}\nkafka:\n  bootstrap: "
                      "a:1\n  properties: {bootstrap.servers: b:1}\n")
                .ToString(),
            "c.yaml:4:16: kafka.properties[\"bootstrap.servers\"]: reserved "
            "property; set kafka.bootstrap instead");
  // Every process must put a lock's events on the same partition.
  EXPECT_EQ(OnlyError("redis: {url: redis://h}\nkafka:\n  bootstrap: "
                      "a:1\n  properties: {partitioner: murmur2}\n")
                .message,
            "reserved property; unlock events go to the partition of their "
            "lock name (CRC32), which targeted fan-out relies on "
            "(docs/unlock-events.md)");
}

// --- missing required values -------------------------------------------------

TEST(ConfigErrorTest, MissingRedisUrl) {
  EXPECT_EQ(
      OnlyError("redis:\n  pool_size: 2\n").ToString(),
      "c.yaml:1:1: redis.url: missing required key; expected a Redis "
      "URL: redis://[[user]:password@]host[:port][/db], rediss://... (TLS), "
      "unix:///path/to.sock[?db=N], "
      "redis+sentinel://host[:port][,host[:port]...]/master[/db] or "
      "redis+cluster://host[:port][,host[:port]...]");
}

TEST(ConfigErrorTest, MissingRedisSection) {
  EXPECT_EQ(
      OnlyError("# comment\nlogging: {level: info}\n").ToString(),
      "c.yaml:2:1: redis.url: missing required key; expected a Redis "
      "URL: redis://[[user]:password@]host[:port][/db], rediss://... (TLS), "
      "unix:///path/to.sock[?db=N], "
      "redis+sentinel://host[:port][,host[:port]...]/master[/db] or "
      "redis+cluster://host[:port][,host[:port]...]");
}

TEST(ConfigErrorTest, MissingKafkaBootstrapWhenKafkaPresent) {
  EXPECT_EQ(
      OnlyError(std::string(kMinimal) + "kafka:\n  jobs_topic: j\n").ToString(),
      "c.yaml:3:1: kafka.bootstrap: missing required key; expected "
      "Kafka bootstrap servers: HOST:PORT[,HOST:PORT...]");
  EXPECT_EQ(OnlyError(std::string(kMinimal) + "kafka:\n").path,
            "kafka.bootstrap")
      << "an empty kafka section is present";
}

TEST(ConfigErrorTest, KafkaJobsNeedKafka) {
  EXPECT_EQ(OnlyError(std::string(kMinimal) +
                      "worker:\n  sources:\n    kafka_jobs: {enabled: true}\n")
                .ToString(),
            "c.yaml:5:27: worker.sources.kafka_jobs.enabled: expected false "
            "without a kafka section, found true (jobs arrive on "
            "kafka.jobs_topic: add kafka.bootstrap)");
}

TEST(ConfigErrorTest, ScheduleProblems) {
  const std::vector<std::string> lines =
      ErrorLines(std::string(kMinimal) + R"(worker:
  sources:
    schedules:
      - {name: a, every: 1h, handler: h}
      - {name: a, every: 1h, handler: h}
      - {name: b, every: 1h, cron: "@daily", handler: h}
      - {name: c}
      - {name: "d e", cron: "0 3 * *", handler: h, payload: {x: [1]}}
      - 5
)");
  const std::vector<std::string> expected = {
      "c.yaml:7:16: worker.sources.schedules[1].name: duplicate schedule "
      "name 'a' (first used on line 6)",
      "c.yaml:8:30: worker.sources.schedules[2].cron: expected either "
      "'every' or 'cron', found both",
      "c.yaml:9:9: worker.sources.schedules[3].every: missing required key; "
      "expected 'every' (an interval such as 1h) or 'cron' (such as \"0 3 * "
      "* *\")",
      "c.yaml:9:9: worker.sources.schedules[3].handler: missing required "
      "key; expected the name of the handler that runs the job",
      "c.yaml:10:16: worker.sources.schedules[4].name: expected a schedule "
      "name, found 'd e' (only letters, digits, '.', '_', ':' and '-')",
      "c.yaml:10:29: worker.sources.schedules[4].cron: invalid cron "
      "expression '0 3 * *': expected 5 fields (minute hour day-of-month "
      "month day-of-week) or a macro such as @daily, found 4 fields",
      "c.yaml:10:65: worker.sources.schedules[4].payload.x: expected a "
      "string, number or boolean, found a list",
      "c.yaml:11:9: worker.sources.schedules[5]: expected a schedule: a "
      "mapping with name, every or cron, handler; found '5'",
  };
  EXPECT_EQ(lines, expected);
}

TEST(ConfigErrorTest, CatchUpIsACountFrom0To1000) {
  const std::vector<std::string> lines =
      ErrorLines(std::string(kMinimal) + R"(worker:
  sources:
    schedules:
      - {name: a, every: 1h, handler: h, catch_up: -1}
      - {name: b, every: 1h, handler: h, catch_up: 1001}
      - {name: c, every: 1h, handler: h, catch_up: all}
      - {name: d, every: 1h, handler: h, catch_up: 1.5}
      - {name: e, every: 1h, handler: h, catch_up: 0}
      - {name: f, every: 1h, handler: h, catch_up: 1000}
)");
  const std::vector<std::string> expected = {
      "c.yaml:6:52: worker.sources.schedules[0].catch_up: expected an "
      "integer from 0 to 1000, found '-1'",
      "c.yaml:7:52: worker.sources.schedules[1].catch_up: expected an "
      "integer from 0 to 1000, found '1001'",
      "c.yaml:8:52: worker.sources.schedules[2].catch_up: expected an "
      "integer from 0 to 1000, found 'all'",
      "c.yaml:9:52: worker.sources.schedules[3].catch_up: expected an "
      "integer from 0 to 1000, found '1.5'",
  };
  EXPECT_EQ(lines, expected);
}

TEST(ConfigErrorTest, ALimitNamesASemaphoreAndItsPermits) {
  const std::vector<std::string> lines =
      ErrorLines(std::string(kMinimal) + R"(worker:
  sources:
    schedules:
      - {name: a, every: 1h, handler: h, limit: {name: p, permits: 2}}
      - {name: b, every: 1h, handler: h, limit: {permits: 0}}
      - {name: c, every: 1h, handler: h, limit: {name: "}p", permits: 1000001}}
      - {name: d, every: 1h, handler: h, limit: {name: p, permits: 2, take: 3}}
      - {name: e, every: 1h, handler: h, limit: {name: p, permits: 2, taek: 1}}
      - {name: f, every: 1h, handler: h, limit: 3}
      - {name: g, every: 1h, handler: h, limit: {name: p, permits: 4}}
      - {name: h, every: 1h, handler: h, limit: {name: q, take: 2}}
)");
  const std::vector<std::string> expected = {
      "c.yaml:7:42: worker.sources.schedules[1].limit.name: missing required "
      "key; expected the name of the limit's semaphore",
      "c.yaml:7:59: worker.sources.schedules[1].limit.permits: expected an "
      "integer from 1 to 1000000, found '0'",
      "c.yaml:8:56: worker.sources.schedules[2].limit.name: expected a "
      "semaphore name, found '}p' (it starts with '}')",
      "c.yaml:8:71: worker.sources.schedules[2].limit.permits: expected an "
      "integer from 1 to 1000000, found '1000001'",
      "c.yaml:9:77: worker.sources.schedules[3].limit.take: take 3 is more "
      "than the limit's 2 permits",
      "c.yaml:10:71: worker.sources.schedules[4].limit.taek: unknown key; "
      "did you mean 'take'?",
      "c.yaml:11:49: worker.sources.schedules[5].limit: expected a limit: a "
      "mapping with name, permits and optionally take, found '3'",
      "c.yaml:12:68: worker.sources.schedules[6].limit.permits: limit 'p' "
      "has 2 permits on line 6: one limit, one number of permits",
      "c.yaml:13:42: worker.sources.schedules[7].limit.permits: missing "
      "required key; expected how many runs at once (1..1000000)",
  };
  EXPECT_EQ(lines, expected);
}

// lock_mode: write only (a schedule's occurrence runs once, under a lock one
// worker holds), spelled exactly; one lock name is either the plain lock or
// the read-write lock across the schedules.
TEST(ConfigErrorTest, AScheduleLockModeIsWriteAndOneLockIsOneKind) {
  const std::vector<std::string> lines =
      ErrorLines(std::string(kMinimal) + R"(worker:
  sources:
    schedules:
      - {name: a, every: 1h, handler: h, lock_mode: write}
      - {name: b, every: 1h, handler: h, lock_mode: sideways}
      - {name: c, every: 1h, handler: h, lock_mode: read}
      - {name: d, every: 1h, handler: h, lock_mode: Write}
      - {name: e, every: 1h, handler: h, lock_mode: [write]}
      - {name: f, every: 1h, handler: h, lock: a}
      - {name: g, every: 1h, handler: h, lock: x}
      - {name: h, every: 1h, handler: h, lock: x, lock_mode: write}
      - {name: i, every: 1h, handler: h, lock: a, lock_mode: write}
)");
  const std::vector<std::string> expected = {
      "c.yaml:7:53: worker.sources.schedules[1].lock_mode: expected one of "
      "read, write, found 'sideways'",
      "c.yaml:8:53: worker.sources.schedules[2].lock_mode: expected write (or "
      "no lock_mode) for a schedule, found 'read': an occurrence runs once, "
      "under a lock one worker holds, and a read lock is shared by every "
      "worker that asks for it (lock_mode: read is for Kafka jobs)",
      "c.yaml:9:53: worker.sources.schedules[3].lock_mode: expected one of "
      "read, write, found 'Write'; did you mean 'write'?",
      "c.yaml:10:53: worker.sources.schedules[4].lock_mode: expected one of "
      "read, write, found a list",
      "c.yaml:11:48: worker.sources.schedules[5].lock: lock 'a' is the "
      "read-write lock (lock_mode) on line 6 and the plain lock (no "
      "lock_mode) here: the two are different locks that do not exclude each "
      "other; give every schedule on one lock lock_mode, or none",
      "c.yaml:13:62: worker.sources.schedules[7].lock_mode: lock 'x' is the "
      "plain lock (no lock_mode) on line 12 and the read-write lock "
      "(lock_mode) here: the two are different locks that do not exclude "
      "each other; give every schedule on one lock lock_mode, or none",
  };
  EXPECT_EQ(lines, expected);
}

TEST(ConfigErrorTest, SchedulesMustBeAList) {
  EXPECT_EQ(OnlyError(std::string(kMinimal) +
                      "worker: {sources: {schedules: {name: a}}}")
                .message,
            "expected a list of schedules, found a mapping");
}

// --- bad durations and enums -------------------------------------------------

TEST(ConfigErrorTest, BadDuration) {
  EXPECT_EQ(OnlyError("redis: {url: redis://h, connect_timeout: 5}").ToString(),
            "c.yaml:1:42: redis.connect_timeout: invalid duration '5': "
            "expected a duration such as 500ms, 2s, 1.5s, 1m or 1h (units ms, "
            "s, m, h), found no unit after '5'");
  EXPECT_PRED_FORMAT2(
      ::testing::IsSubstring, "found unknown unit 'x' after '1'",
      OnlyError(std::string(kMinimal) + "locks: {lease: 1x}").message);
}

TEST(ConfigErrorTest, BadWait) {
  EXPECT_EQ(OnlyError(std::string(kMinimal) + "locks: {wait: never}").message,
            "expected a duration such as 30s, 0 (try once) or forever, found "
            "'never'");
  EXPECT_PRED_FORMAT2(
      ::testing::IsSubstring, "no unit after '5'",
      OnlyError(std::string(kMinimal) + "locks: {wait: 5}").message);
}

// kafka.fetch_wait: auto (or absent) leaves the choice to the notifier,
// which picks it for the broker (1 ms embedded, 500 ms real).
TEST(ConfigTest, FetchWaitAutoOrADuration) {
  const std::string kafka =
      std::string(kMinimal) + "kafka:\n  bootstrap: k:1\n";
  EXPECT_FALSE(Load(kafka).kafka->fetch_wait.has_value());
  EXPECT_FALSE(
      Load(kafka + "  fetch_wait: auto\n").kafka->fetch_wait.has_value());
  EXPECT_EQ(Load(kafka + "  fetch_wait: 250ms\n").kafka->fetch_wait,
            milliseconds(250));
  EXPECT_EQ(Load(kafka + "  fetch_wait: \"5m\"\n").kafka->fetch_wait,
            milliseconds(300000));
}

TEST(ConfigErrorTest, BadFetchWait) {
  const std::string kafka =
      std::string(kMinimal) + "kafka:\n  bootstrap: k:1\n";
  EXPECT_EQ(OnlyError(kafka + "  fetch_wait: soon\n").ToString(),
            "c.yaml:5:15: kafka.fetch_wait: expected a duration such as 500ms "
            "(0 to 5m), or auto, found 'soon'");
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "no unit after '5'",
                      OnlyError(kafka + "  fetch_wait: 5\n").message);
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "5m",
                      OnlyError(kafka + "  fetch_wait: 6m\n").message);
  EXPECT_FALSE(Errors(kafka + "  fetch_wait: [auto]\n").empty());
}

TEST(ConfigErrorTest, BadEnums) {
  EXPECT_EQ(
      OnlyError(std::string(kMinimal) + "logging:\n  level: warn\n").ToString(),
      "c.yaml:4:10: logging.level: expected one of debug, info, "
      "warning, error, found 'warn'; did you mean 'warning'?");
  EXPECT_EQ(OnlyError(std::string(kMinimal) + "logging: {format: xml}").message,
            "expected one of text, json, found 'xml'");
  EXPECT_EQ(OnlyError(std::string(kMinimal) +
                      "kafka: {bootstrap: \"k:9092\", fan_out: everyone}")
                .message,
            "expected one of broadcast, targeted, found 'everyone'");
  EXPECT_EQ(OnlyError(std::string(kMinimal) +
                      "kafka: {bootstrap: \"k:9092\", targeted_replay: -1}")
                .message,
            "expected an integer from 0 to 1000000, found '-1'");
}

// --- many errors at once -----------------------------------------------------

TEST(ConfigErrorTest, ReportsEveryErrorInFileOrder) {
  const std::vector<std::string> lines = ErrorLines(
      "redis:\n"                      // 1
      "  pool_size: 0\n"              // 2
      "  comand_timeout: 2s\n"        // 3
      "locks:\n"                      // 4
      "  lease: soon\n"               // 5
      "logging: {level: loud}\n"      // 6
      "metrics: {listen: nowhere}\n"  // 7
  );
  const std::vector<std::string> expected = {
      "c.yaml:1:1: redis.url: missing required key; expected a Redis URL: "
      "redis://[[user]:password@]host[:port][/db], rediss://... (TLS), "
      "unix:///path/to.sock[?db=N], "
      "redis+sentinel://host[:port][,host[:port]...]/master[/db] or "
      "redis+cluster://host[:port][,host[:port]...]",
      "c.yaml:2:14: redis.pool_size: expected an integer from 1 to 1024, "
      "found '0'",
      "c.yaml:3:3: redis.comand_timeout: unknown key; did you mean "
      "'command_timeout'?",
      "c.yaml:5:10: locks.lease: invalid duration 'soon': expected a "
      "duration such as 500ms, 2s, 1.5s, 1m or 1h (units ms, s, m, h), found "
      "'soon', which does not start with a digit",
      "c.yaml:6:18: logging.level: expected one of debug, info, warning, "
      "error, found 'loud'",
      "c.yaml:7:19: metrics.listen: expected HOST:PORT to listen on, or \"\" "
      "for none, found 'nowhere' (no ':PORT' after the host)",
  };
  EXPECT_EQ(lines, expected);
}

TEST(ConfigErrorTest, WhatListsEveryError) {
  try {
    LoadString("redis: {pool_size: 0}", "x.yaml", {});
    FAIL() << "loaded";
  } catch (const ConfigError& e) {  // ConfigErrors is a ConfigError
    EXPECT_EQ(
        std::string(e.what()),
        "x.yaml:1:1: redis.url: missing required key; expected a Redis "
        "URL: redis://[[user]:password@]host[:port][/db], rediss://... (TLS), "
        "unix:///path/to.sock[?db=N], "
        "redis+sentinel://host[:port][,host[:port]...]/master[/db] or "
        "redis+cluster://host[:port][,host[:port]...]\n"
        "x.yaml:1:20: redis.pool_size: expected an integer from 1 to "
        "1024, found '0'");
  }
}

// --- the environment ---------------------------------------------------------

// A handler setting `v: VALUE`, in block style (in a flow mapping, {...},
// a value with ${...} must be quoted: '{' and '}' end the mapping).
std::string SettingYaml(const std::string& value) {
  return std::string(kMinimal) +
         "worker:\n  handlers:\n    h:\n      v: " + value + "\n";
}
// Its text after expansion.
std::string Expanded(const std::string& value, testing::Env env = {}) {
  return Load(SettingYaml(value), std::move(env))
      .worker.handlers.at("h")
      .at("v")
      .text;
}
// The one error it gives.
std::string ExpandError(const std::string& value, testing::Env env = {}) {
  return OnlyError(SettingYaml(value), std::move(env)).message;
}

TEST(ConfigEnvTest, SetVariable) {
  const Config config =
      Load("redis:\n  url: redis://${HOST}:${PORT}\n  pool_size: ${N}\n",
           {{"HOST", "r1"}, {"PORT", "7000"}, {"N", "9"}});
  EXPECT_EQ(config.redis.url, "redis://r1:7000");
  EXPECT_EQ(config.redis.pool_size, 9);
  EXPECT_EQ(Expanded("\"${A}\"", {{"A", "x y"}}), "x y") << "quoted too";
  EXPECT_EQ(Expanded("'${A}'", {{"A", "x"}}), "x") << "single-quoted too";
}

TEST(ConfigEnvTest, UnsetVariableIsAnErrorAtItsValue) {
  EXPECT_EQ(OnlyError("redis:\n  url: redis://h\n  key_prefix: ${PREFIX}\n")
                .ToString(),
            "c.yaml:3:15: redis.key_prefix: environment variable PREFIX is "
            "not set (write ${PREFIX:-default} to give a default)");
}

TEST(ConfigEnvTest, DefaultWhenUnsetOrEmpty) {
  EXPECT_EQ(Expanded("${V:-fallback}"), "fallback");
  EXPECT_EQ(Expanded("${V:-fallback}", {{"V", ""}}), "fallback");
  EXPECT_EQ(Expanded("${V:-fallback}", {{"V", "set"}}), "set");
  EXPECT_EQ(Expanded("a${V:-}b"), "ab") << "an empty default";
  EXPECT_EQ(Expanded("${V:-redis://h:1/0}"), "redis://h:1/0");
}

TEST(ConfigEnvTest, SetButEmptyWithoutDefaultIsEmpty) {
  EXPECT_EQ(Expanded("a${V}b", {{"V", ""}}), "ab");
  EXPECT_EQ(OnlyError("redis:\n  url: ${URL}\n", {{"URL", ""}}).message,
            "expected a Redis URL: redis://[[user]:password@]host[:port][/db], "
            "rediss://... (TLS), unix:///path/to.sock[?db=N], "
            "redis+sentinel://host[:port][,host[:port]...]/master[/db] or "
            "redis+cluster://host[:port][,host[:port]...], found "
            "'' (no redis://, rediss://, unix://, redis+sentinel:// or "
            "redis+cluster:// in front)");
}

TEST(ConfigEnvTest, DollarDollarIsALiteralDollar) {
  EXPECT_EQ(Expanded("a$$b$${X}$$"), "a$b${X}$");
}

TEST(ConfigEnvTest, ExpandsOnlyOnce) {
  EXPECT_EQ(Expanded("${A}", {{"A", "${B}$$"}}), "${B}$$");
}

TEST(ConfigEnvTest, MalformedReferences) {
  EXPECT_EQ(ExpandError("$HOME"),
            "expected ${VAR} or ${VAR:-default} after '$' (write $$ for a "
            "literal '$'), found '$HOME'");
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "after '$'", ExpandError("a$"));
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "found an unterminated '${A'",
                      ExpandError("${A"));
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "found '${}'",
                      ExpandError("${}"));
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "letters, digits and '_'",
                      ExpandError("${1A}"));
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "found '${A-x}'",
                      ExpandError("${A-x}"));
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "defaults are literal text",
                      ExpandError("${A:-$B}"));
}

TEST(ConfigEnvTest, ReportsEveryUnsetVariable) {
  EXPECT_EQ(Errors("redis:\n  url: redis://${A}:${B}\n").size(), 2u);
}

TEST(ConfigEnvTest, ExpandedValuesAreTyped) {
  const Config config = Load(std::string(kMinimal) +
                             "worker:\n  handlers:\n    h:\n      n: ${N:-5}\n"
                             "      s: \"${N:-5}\"\n  threads: ${T:-3}\n");
  EXPECT_EQ(config.worker.threads, 3);
  EXPECT_EQ(config.worker.handlers.at("h").at("n").type,
            Scalar::Type::kInteger);
  EXPECT_EQ(config.worker.handlers.at("h").at("s").type, Scalar::Type::kString)
      << "quoted stays a string";
}

TEST(ConfigEnvTest, KeysAreNotExpanded) {
  EXPECT_EQ(OnlyError(std::string(kMinimal) + "${SECTION}: {}",
                      {{"SECTION", "locks"}})
                .path,
            "[\"${SECTION}\"]");
}

// --- the document as a whole -------------------------------------------------

TEST(ConfigDocumentTest, Empty) {
  for (const char* text : {"", "\n\n", "# only a comment\n", "---\n", "~\n"}) {
    EXPECT_EQ(OnlyError(text).ToString(),
              "c.yaml:1:1: expected a mapping with at least redis.url, found "
              "an empty file (see 'lockfleet config example')")
        << ::testing::PrintToString(text);
  }
}

TEST(ConfigDocumentTest, NotYaml) {
  EXPECT_EQ(OnlyError("redis: [1\nlocks: {}\n").ToString(),
            "c.yaml:2:6: invalid YAML: end of sequence flow not found");
  EXPECT_EQ(OnlyError("redis:\n  url: a: b\n").ToString(),
            "c.yaml:2:9: invalid YAML: illegal map value");
}

TEST(ConfigDocumentTest, TabIndentationGetsAHint) {
  EXPECT_EQ(
      OnlyError("redis:\n  url: redis://h\nlocks:\n\tfair: true\n").message,
      "invalid YAML: illegal map value (a tab in the indentation? YAML "
      "indents with spaces only)");
}

TEST(ConfigDocumentTest, BinaryData) {
  EXPECT_EQ(OnlyError(std::string("redis:\n  u\0rl: x\n", 16)).ToString(),
            "c.yaml:2:4: expected a YAML text file, found a NUL byte (a "
            "binary file?)");
}

TEST(ConfigDocumentTest, TopLevelNotAMapping) {
  EXPECT_EQ(OnlyError("- redis\n- locks\n").ToString(),
            "c.yaml:1:1: expected a mapping of sections (redis, kafka, locks, "
            "worker, metrics, logging) at the top level, found a list");
  EXPECT_EQ(OnlyError("just text").message,
            "expected a mapping of sections (redis, kafka, locks, worker, "
            "metrics, logging) at the top level, found 'just text'");
}

TEST(ConfigDocumentTest, MoreThanOneDocument) {
  EXPECT_EQ(OnlyError(std::string(kMinimal) + "---\nlocks: {}\n").ToString(),
            "c.yaml:4:1: expected one YAML document, found 2 (separated by "
            "'---')");
}

TEST(ConfigDocumentTest, TextYamlCppLoopsOnIsAnErrorNotAHang) {
  // Regression (found by fuzz/config_fuzz.cc): yaml-cpp 0.7's LoadAll never
  // returned on these, filling memory with empty documents.
  for (const std::string yaml : {",}", ",\x02  }\n", "redis: {url: x}\n,}"}) {
    const Diagnostic error = OnlyError(yaml);
    EXPECT_NE(error.message.find("invalid YAML"), std::string::npos)
        << error.ToString();
    EXPECT_GE(error.line, 1) << error.ToString();
  }
}

TEST(ConfigDocumentTest, AnchorsAndAliasesWork) {
  const Config config = Load(
      "redis: {url: redis://h, connect_timeout: &t 3s, command_timeout: *t}");
  EXPECT_EQ(config.redis.command_timeout, milliseconds(3000));
}

// --- the example -------------------------------------------------------------

TEST(ExampleConfigTest, LoadsWithoutEnvironment) {
  Config config;
  ASSERT_NO_THROW(config = LoadString(ExampleConfig(), "example.yaml",
                                      testing::WithEnv({})))
      << ::testing::PrintToString(
             ErrorLines(ExampleConfig()));  // shows the errors if any
  EXPECT_EQ(config.redis.url, "redis://127.0.0.1:6379");
  ASSERT_TRUE(config.kafka.has_value());
  EXPECT_EQ(config.kafka->bootstrap, "127.0.0.1:9092");
  EXPECT_EQ(config.worker.sources.schedules.size(), 3u);
  EXPECT_EQ(config.worker.sources.schedules[1].lock_mode, LockMode::kWrite);
}

TEST(ExampleConfigTest, ItsValuesAreTheDefaults) {
  const Config config = Load(ExampleConfig());
  EXPECT_EQ(config.redis.pool_size, RedisConfig{}.pool_size);
  EXPECT_EQ(config.redis.connect_timeout, RedisConfig{}.connect_timeout);
  EXPECT_EQ(config.redis.command_timeout, RedisConfig{}.command_timeout);
  EXPECT_EQ(config.redis.key_prefix, RedisConfig{}.key_prefix);
  KafkaConfig kafka;
  kafka.bootstrap = "127.0.0.1:9092";
  EXPECT_EQ(config.kafka, kafka);
  EXPECT_EQ(config.locks, LocksConfig{});
  EXPECT_EQ(config.worker.threads, WorkerConfig{}.threads);
  EXPECT_EQ(config.worker.grace_period, WorkerConfig{}.grace_period);
  EXPECT_EQ(config.worker.health_listen, WorkerConfig{}.health_listen);
  EXPECT_EQ(config.worker.sources.kafka_jobs, KafkaJobsConfig{});
  EXPECT_EQ(config.metrics, MetricsConfig{});
  EXPECT_EQ(config.logging, LoggingConfig{});
}

TEST(ExampleConfigTest, UsesTheEnvironment) {
  const Config config =
      Load(ExampleConfig(), {{"LOCKFLEET_REDIS", "redis://other:1"}});
  EXPECT_EQ(config.redis.url, "redis://other:1");
}

}  // namespace
}  // namespace lockfleet::config
