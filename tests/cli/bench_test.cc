// `lockfleet bench` end to end: short runs of every mode against a private
// redis-server (and a `lockfleet broker` process, or the tool's own embedded
// broker), checking the JSON report's shape and invariants — never timings,
// so a loaded machine slows these tests without failing them.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/broker_process.h"
#include "cli/cli_process.h"
#include "lockfleet/lockcore/redis_client.h"
#include "support/real_kafka.h"
#include "support/redis_server.h"

namespace lockfleet::testing {
namespace {

using nlohmann::json;
using std::chrono::seconds;

constexpr auto kRunTimeout = seconds(180);

// The fields the issue promises, each percentile object complete.
void ExpectReportShape(const json& report) {
  for (const char* field :
       {"acquisitions", "acquisitions_per_second", "violations",
        "redis_calls_per_acquisition", "redis_commands_per_acquisition",
        "jain_index", "releaser_reacquire_share", "wakeups", "errors",
        "processes", "resources", "redis_connected_clients"}) {
    EXPECT_TRUE(report.contains(field)) << field;
  }
  for (const char* field :
       {"handoff_us", "cross_process_handoff_us", "same_process_handoff_us"}) {
    ASSERT_TRUE(report.contains(field)) << field;
    for (const char* stat : {"p50", "p90", "p99", "max", "count"}) {
      EXPECT_TRUE(report.at(field).contains(stat)) << field << "." << stat;
    }
  }
}

json RunBench(const std::vector<std::string>& extra,
              const std::string& seconds = "2") {
  std::vector<std::string> args{"bench", "--json", "--seconds", seconds};
  args.insert(args.end(), extra.begin(), extra.end());
  const CliResult result = RunCli(args, {}, kRunTimeout);
  EXPECT_EQ(result.status, 0) << result.err;
  if (result.status != 0) return json::object();
  json report = json::parse(result.out);
  ExpectReportShape(report);
  return report;
}

// What every successful run of P processes x T threads on one lock shows.
void ExpectSoundRun(const json& report, int processes, int threads) {
  const auto acquisitions = report.at("acquisitions").get<uint64_t>();
  EXPECT_GT(acquisitions, 0u);
  EXPECT_EQ(report.at("violations").get<uint64_t>(), 0u);
  // One lock: every section after the first is a hand-off.
  EXPECT_EQ(report.at("handoffs").get<uint64_t>(), acquisitions - 1);
  EXPECT_EQ(report.at("handoff_us").at("count").get<uint64_t>(),
            acquisitions - 1);
  if (threads == 1) {
    EXPECT_EQ(report.at("same_process_handoff_us").at("count").get<uint64_t>(),
              0u);
  }
  if (processes == 1) {
    EXPECT_EQ(report.at("cross_process_handoff_us").at("count").get<uint64_t>(),
              0u);
  }
  EXPECT_GT(report.at("redis_calls_per_acquisition").get<double>(), 0);
  EXPECT_GT(report.at("redis_commands_per_acquisition").get<double>(), 0);
  EXPECT_GT(report.at("jain_index").get<double>(), 0);
  EXPECT_LE(report.at("jain_index").get<double>(), 1.0);
  // The whole host's CPU over the window: the contenders at least kept it
  // busy some of the time, and no more than all of it.
  EXPECT_GT(report.at("host_cpu_percent").get<double>(), 0);
  EXPECT_LE(report.at("host_cpu_percent").get<double>(), 100.0);
  const json& processes_json = report.at("processes");
  ASSERT_EQ(processes_json.size(), static_cast<size_t>(processes));
  uint64_t sum = 0;
  for (const json& p : processes_json) {
    EXPECT_TRUE(p.at("ok").get<bool>()) << p.dump();
    EXPECT_GT(p.at("rss_kb_end").get<long long>(), 0);
    EXPECT_GT(p.at("fds_end").get<long long>(), 2);
    sum += p.at("acquisitions").get<uint64_t>();
  }
  EXPECT_EQ(sum, acquisitions);
  EXPECT_EQ(report.at("failed_processes").get<int>(), 0);
}

class BenchTest : public ::testing::Test {
 protected:
  RedisServer redis_;
};

TEST_F(BenchTest, KafkaModeAgainstABrokerProcess) {
  BrokerProcess broker;
  const json report =
      RunBench({"--mode", "kafka", "--processes", "2", "--threads", "2",
                "--redis", redis_.url(), "--kafka", broker.bootstrap()});
  ExpectSoundRun(report, 2, 2);
  EXPECT_TRUE(report.at("config").at("fair").get<bool>());  // the default
  EXPECT_TRUE(report.at("wakeups").contains("event"));
  EXPECT_TRUE(report.at("wakeups").contains("local"));
  const json& clients = report.at("redis_connected_clients");
  EXPECT_GT(clients.at("during").get<long long>(),
            clients.at("before").get<long long>());
}

TEST_F(BenchTest, KafkaModeWithSignedEvents) {
  // Every contender reads the key from the file the parent passes on, signs
  // its events and accepts only signed ones: the event wake-ups prove they
  // share it.
  TempDir dir;
  WriteFile(dir.File("event-key"), "bench-test-event-key-0123\n");
  const json report =
      RunBench({"--mode", "kafka", "--processes", "2", "--redis", redis_.url(),
                "--event-key-file", dir.File("event-key"), "--spin-max-hold-ms",
                "0"});  // every hand-off by its event
  ExpectSoundRun(report, 2, 1);
  EXPECT_NE(
      report.at("config").at("kafka").get<std::string>().find("signed events"),
      std::string::npos)
      << report.at("config").dump();
  EXPECT_GT(report.at("wakeups").value("event", json(0)).get<double>(), 0)
      << report.at("wakeups").dump();
}

// Issue 14 item 6: --config benches the deployment the file describes: its
// Redis, its Kafka with its properties, and its event key (every contender
// is handed the file and signs with the key its variable holds).
TEST_F(BenchTest, ConfigGivesRedisKafkaAndTheEventKey) {
  BrokerProcess broker;
  TempDir dir;
  const std::string config = dir.File("worker.yaml");
  WriteFile(config, "redis:\n  url: " + redis_.url() +
                        "\nkafka:\n  bootstrap: " + broker.bootstrap() +
                        "\n  event_key_env: BENCH_KEY\n  properties:\n"
                        "    socket.keepalive.enable: true\n");
  const CliResult result =
      RunCli({"bench", "--config", config, "--mode", "kafka", "--processes",
              "2", "--seconds", "3", "--spin-max-hold-ms", "0", "--json"},
             {"BENCH_KEY=bench-config-event-key-0123"}, kRunTimeout);
  ASSERT_EQ(result.status, 0) << result.err;
  const json report = json::parse(result.out);
  ExpectSoundRun(report, 2, 1);
  EXPECT_EQ(report.at("config").at("redis").get<std::string>(), redis_.url());
  const std::string kafka = report.at("config").at("kafka").get<std::string>();
  EXPECT_NE(kafka.find(broker.bootstrap()), std::string::npos) << kafka;
  EXPECT_NE(kafka.find("signed events"), std::string::npos) << kafka;
  EXPECT_GT(report.at("wakeups").value("event", json(0)).get<double>(), 0)
      << report.at("wakeups").dump();

  // The properties reach librdkafka: one it does not know fails the run.
  WriteFile(config, "redis:\n  url: " + redis_.url() +
                        "\nkafka:\n  bootstrap: " + broker.bootstrap() +
                        "\n  properties:\n    no.such.property: 1\n");
  const CliResult bad =
      RunCli({"bench", "--config", config, "--seconds", "1"}, {}, kRunTimeout);
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("no.such.property"), std::string::npos) << bad.err;
}

TEST_F(BenchTest, KafkaBargingWithItsOwnRedisAndBroker) {
  const json report = RunBench(
      {"--mode", "kafka", "--no-fair", "--processes", "2", "--threads", "1"});
  ExpectSoundRun(report, 2, 1);
  EXPECT_FALSE(report.at("config").at("fair").get<bool>());
  EXPECT_NE(report.at("config").at("redis").get<std::string>().find("private"),
            std::string::npos);
}

TEST_F(BenchTest, LocalMode) {
  const json report = RunBench({"--mode", "local", "--processes", "2",
                                "--threads", "2", "--redis", redis_.url()});
  ExpectSoundRun(report, 2, 2);
  EXPECT_FALSE(report.at("wakeups").contains("event"));
}

TEST_F(BenchTest, PollMode) {
  const json report =
      RunBench({"--mode", "poll", "--poll-interval-ms", "2", "--processes", "2",
                "--threads", "2", "--redis", redis_.url()});
  ExpectSoundRun(report, 2, 2);
  EXPECT_TRUE(report.at("wakeups").contains("poll"));
  EXPECT_FALSE(report.at("config").at("fair").get<bool>());
}

// Issue 16 item 6: the floor is a token in a Redis list, BLPOP and RPUSH:
// two round trips per acquisition, no wake-up causes of lockfleet's, and
// the token lists are gone afterwards.
TEST_F(BenchTest, FloorModeIsATokenTakenWithBlpop) {
  const json report =
      RunBench({"--mode", "floor", "--processes", "2", "--threads", "2",
                "--locks", "1", "--redis", redis_.url()});
  ExpectSoundRun(report, 2, 2);
  EXPECT_EQ(report.at("config").at("mode"), "floor");
  EXPECT_FALSE(report.at("config").at("fair").get<bool>());
  EXPECT_TRUE(report.at("wakeups").empty()) << report.at("wakeups").dump();
  // BLPOP + RPUSH; a BLPOP that timed out (0.5 s without the token) adds
  // one. Counted up to the run's end: the RPUSH of a token held then, or
  // taken by a BLPOP blocked then, is not in it (one per thread at most,
  // 2 - threads/acquisitions at worst).
  EXPECT_GE(report.at("redis_calls_per_acquisition").get<double>(), 1.95);
  EXPECT_LT(report.at("redis_calls_per_acquisition").get<double>(), 2.5);
  RedisClient redis(RedisOptions{.url = redis_.url()});
  EXPECT_EQ(redis.Execute({"EXISTS", "lockfleet-bench:floor:bench:0"}).integer,
            0);
}

// --repeat N: every run's report, and each figure's median and spread over
// them.
TEST_F(BenchTest, RepeatReportsTheMedianAndSpreadOfEachFigure) {
  const CliResult result =
      RunCli({"bench", "--json", "--seconds", "1", "--repeat", "3", "--mode",
              "floor", "--processes", "2", "--redis", redis_.url()},
             {}, kRunTimeout);
  ASSERT_EQ(result.status, 0) << result.err;
  const json out = json::parse(result.out);
  EXPECT_EQ(out.at("repeat").get<int>(), 3);
  EXPECT_EQ(out.at("violations").get<uint64_t>(), 0u);
  ASSERT_EQ(out.at("runs").size(), 3u);
  std::vector<double> rates;
  for (const json& run : out.at("runs")) {
    ExpectSoundRun(run, 2, 1);
    rates.push_back(run.at("acquisitions_per_second").get<double>());
  }
  std::sort(rates.begin(), rates.end());
  const json& rate = out.at("summary").at("acquisitions_per_second");
  EXPECT_DOUBLE_EQ(rate.at("median").get<double>(), rates[1]);
  EXPECT_DOUBLE_EQ(rate.at("min").get<double>(), rates[0]);
  EXPECT_DOUBLE_EQ(rate.at("max").get<double>(), rates[2]);
  EXPECT_EQ(rate.at("runs").get<int>(), 3);
  // Two processes, one thread each: no same-process hand-offs to summarize.
  EXPECT_FALSE(out.at("summary").contains("same_process_handoff_us/p50"));
  EXPECT_TRUE(out.at("summary").contains("cross_process_handoff_us/p50"));

  // The table says what it summarizes.
  const CliResult table = RunCli({"bench", "--seconds", "1", "--repeat", "2",
                                  "--mode", "floor", "--redis", redis_.url()},
                                 {}, kRunTimeout);
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("2 runs: median (min - max)"), std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("NOT a lock"), std::string::npos) << table.out;
}

// --kafka kafka-local starts a private real Apache Kafka broker for the run
// and stops it afterwards.
TEST_F(BenchTest, KafkaLocalStartsARealBroker) {
  LOCKFLEET_SKIP_UNLESS_REAL_KAFKA();
  const auto kafka_dirs = [] {
    int n = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/tmp")) {
      n += entry.path().filename().string().starts_with(
          "lockfleet-bench-kafka-");
    }
    return n;
  };
  const int dirs_before = kafka_dirs();
  // A 5 s window: in 2 s on a loaded machine under TSan, one CI run saw no
  // park end at all (0 wake-ups of any kind) while its real broker was slow.
  const json report = RunBench(
      {"--kafka", "kafka-local", "--processes", "2", "--redis", redis_.url(),
       "--fetch-wait-ms", "100", "--spin-max-hold-ms", "0"},
      "5");
  ExpectSoundRun(report, 2, 1);
  const std::string kafka = report.at("config").at("kafka").get<std::string>();
  EXPECT_NE(kafka.find("real broker, kafka-local (127.0.0.1:"),
            std::string::npos)
      << kafka;
  EXPECT_GT(report.at("wakeups").value("event", json(0)).get<double>(), 0)
      << report.at("wakeups").dump();
  // Stopped with the run: its data directory is gone.
  EXPECT_EQ(kafka_dirs(), dirs_before);
}

TEST_F(BenchTest, ManyLocksAndOneProcess) {
  const json report =
      RunBench({"--mode", "local", "--processes", "1", "--threads", "3",
                "--locks", "5", "--hold-ms", "0", "--redis", redis_.url()});
  EXPECT_EQ(report.at("violations").get<uint64_t>(), 0u);
  EXPECT_GT(report.at("acquisitions").get<uint64_t>(), 0u);
  EXPECT_EQ(report.at("cross_process_handoff_us").at("count").get<uint64_t>(),
            0u);
}

TEST_F(BenchTest, TableByDefault) {
  const CliResult result =
      RunCli({"bench", "--mode", "local", "--processes", "1", "--seconds", "1",
              "--redis", redis_.url()},
             {}, kRunTimeout);
  EXPECT_EQ(result.status, 0) << result.err;
  EXPECT_NE(result.out.find("violations"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("hand-off gap"), std::string::npos) << result.out;
}

TEST(BenchArgsTest, BadArgumentsExitTwoWithAMessage) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--processes", "0"}, "--processes"},
      {{"--processes", "-3"}, "--processes"},
      {{"--processes", "100000"}, "--processes"},
      {{"--threads", "0"}, "--threads"},
      {{"--locks", "0"}, "--locks"},
      {{"--seconds", "0"}, "--seconds"},
      {{"--seconds", "999999"}, "--seconds"},
      {{"--hold-ms", "-1"}, "--hold-ms"},
      {{"--mode", "carrier-pigeon"}, "--mode"},
      {{"--poll-interval-ms", "5"}, "--poll-interval-ms"},
      {{"--mode", "poll", "--poll-interval-ms", "0"}, "--poll-interval-ms"},
      {{"--mode", "poll", "--fair"}, "--fair"},
      {{"--fair", "--no-fair"}, "--no-fair"},
      {{"--mode", "local", "--kafka", "127.0.0.1:9092"}, "--kafka"},
      {{"--mode", "local", "--event-key-env", "K"}, "--event-key-env"},
      {{"--event-key-env", "LOCKFLEET_TEST_UNSET_VARIABLE"},
       "--event-key-env: environment variable LOCKFLEET_TEST_UNSET_VARIABLE"},
      {{"--kafka", "host:99999"}, "--kafka"},
      {{"--redis", "http://nope"}, "--redis"},
      {{"--processes", "many"}, "--processes"},
      {{"--frobnicate"}, "frobnicate"},
      {{"--mode", "floor", "--fair"}, "--fair"},
      {{"--mode", "floor", "--kafka", "127.0.0.1:9092"}, "--kafka"},
      {{"--mode", "poll", "--park-cap-ms", "5"}, "--park-cap-ms"},
      {{"--repeat", "0"}, "--repeat"},
      {{"--repeat", "101"}, "--repeat"},
  };
  for (const auto& [extra, mention] : cases) {
    std::vector<std::string> args{"bench"};
    args.insert(args.end(), extra.begin(), extra.end());
    const CliResult result = RunCli(args);
    EXPECT_EQ(result.status, 2) << extra.front() << ": " << result.err;
    EXPECT_NE(result.err.find(mention), std::string::npos)
        << extra.front() << ": " << result.err;
  }
}

TEST(BenchArgsTest, UnreachableRedisExitsUnavailable) {
  const std::string url =
      "redis://127.0.0.1:" + std::to_string(UnusedTcpPort());
  const CliResult result =
      RunCli({"bench", "--mode", "local", "--redis", url}, {}, kRunTimeout);
  EXPECT_EQ(result.status, 69) << result.err;
  EXPECT_NE(result.err.find("unreachable"), std::string::npos) << result.err;
}

TEST(BenchArgsTest, HelpExplainsTheFigures) {
  const CliResult help = RunCli({"bench", "--help"});
  EXPECT_EQ(help.status, 0);
  for (const char* text :
       {"--processes", "--mode", "hand-off", "violations", "Exit status",
        "--json", "floor", "NOT a lock", "--repeat", "kafka-local"}) {
    EXPECT_NE(help.out.find(text), std::string::npos) << text;
  }
  EXPECT_EQ(help.out.find("--child-index"), std::string::npos);
}

}  // namespace
}  // namespace lockfleet::testing
