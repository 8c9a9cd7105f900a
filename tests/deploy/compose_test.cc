// deploy/compose: the services agree with the lockfleet config they mount,
// with each other and with the Prometheus and Grafana provisioning files.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "deploy_test_util.h"
#include "support/promtool.h"

namespace lockfleet::deploy_test {
namespace {

fs::path ComposeDir() { return DeployDir() / "compose"; }

// The host side of the volume mounted at `target` ("./a:/b:ro" → "./a"),
// or "" when nothing is.
std::string MountSource(const YAML::Node& service, const std::string& target) {
  for (const std::string& volume : Strings(service["volumes"])) {
    const size_t colon = volume.find(':');
    if (colon == std::string::npos) continue;
    std::string rest = volume.substr(colon + 1);
    rest = rest.substr(0, rest.find(':'));  // drop ":ro"
    if (rest == target) return volume.substr(0, colon);
  }
  return "";
}

class ComposeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    compose_ = LoadYaml(ComposeDir() / "docker-compose.yaml");
    services_ = compose_["services"];
    worker_ = services_["worker"];
    ASSERT_TRUE(worker_) << "no worker service";
    config_ = LoadLockfleetConfig(WorkerConfigFile());
  }

  // The file mounted where the worker's --config points.
  fs::path WorkerConfigFile() const {
    const std::string path =
        ArgumentOf(Strings(worker_["command"]), "--config");
    const std::string source = MountSource(worker_, path);
    if (source.empty()) return ComposeDir() / "nothing-mounted-at-config";
    return (ComposeDir() / source).lexically_normal();
  }

  bool DependsOn(const YAML::Node& service, const std::string& other,
                 const std::string& condition) const {
    return service["depends_on"][other]["condition"].as<std::string>("") ==
           condition;
  }

  YAML::Node compose_;
  YAML::Node services_;
  YAML::Node worker_;
  config::Config config_;
};

// Worker and producer read a shipped config (checked by files_test.cc).
TEST_F(ComposeTest, WorkerAndProducerMountTheShippedConfig) {
  for (const char* name : {"worker", "producer"}) {
    SCOPED_TRACE(name);
    const YAML::Node service = services_[name];
    ASSERT_TRUE(service);
    const std::string path =
        ArgumentOf(Strings(service["command"]), "--config");
    ASSERT_FALSE(path.empty()) << "no --config";
    const std::string source = MountSource(service, path);
    ASSERT_FALSE(source.empty()) << "nothing mounted at " << path;
    const fs::path file = (ComposeDir() / source).lexically_normal();
    EXPECT_TRUE(fs::is_regular_file(file)) << file;
    EXPECT_TRUE(IsLockfleetConfigName(file)) << file;
    // Built from the repository's Dockerfile.
    EXPECT_TRUE(fs::is_regular_file(
        ComposeDir() / service["build"]["context"].as<std::string>() /
        service["build"]["dockerfile"].as<std::string>()));
  }
}

// `--scale worker=N` fails on a fixed container name or host port.
TEST_F(ComposeTest, WorkerScales) {
  EXPECT_FALSE(worker_["container_name"]);
  EXPECT_FALSE(worker_["ports"]);
}

TEST_F(ComposeTest, StopGracePeriodCoversTheDrain) {
  // Compose's default is 10s.
  const std::string period =
      worker_["stop_grace_period"].as<std::string>("10s");
  EXPECT_GT(ParseTimeSpan(period), MinimumStopTimeout(config_))
      << "stop_grace_period " << period << ", worker.grace_period "
      << config_.worker.grace_period.count() << " ms";
  EXPECT_EQ(worker_["stop_signal"].as<std::string>("SIGTERM"), "SIGTERM");
}

TEST_F(ComposeTest, HealthcheckProbesHealthListen) {
  std::string test;
  for (const std::string& word : Strings(worker_["healthcheck"]["test"])) {
    test += word + " ";
  }
  const int port = ListenPort(config_.worker.health_listen);
  EXPECT_NE(test.find("/dev/tcp/127.0.0.1/" + std::to_string(port) + " "),
            std::string::npos)
      << test;
  EXPECT_NE(test.find("GET /readyz "), std::string::npos) << test;
}

TEST_F(ComposeTest, EveryConfigVariableIsProvided) {
  const std::set<std::string> read =
      ReferencedVariables(LoadYaml(WorkerConfigFile()));
  for (const std::string& name : read) {
    EXPECT_TRUE(worker_["environment"][name])
        << name << " is not in the worker's environment";
  }
  // The worker authenticates with the password Redis requires.
  const std::vector<std::string> redis = Strings(services_["redis"]["command"]);
  EXPECT_EQ(ArgumentOf(redis, "--requirepass"),
            worker_["environment"]["REDIS_PASSWORD"].as<std::string>(""));
}

TEST_F(ComposeTest, KafkaInitCreatesTheConfiguredTopics) {
  const YAML::Node init = services_["kafka-init"];
  ASSERT_TRUE(init);
  const std::string script = init["command"][0].as<std::string>();
  EXPECT_GT(CreatedPartitions(script, config_.kafka->unlock_topic), 0);
  EXPECT_GT(CreatedPartitions(script, config_.kafka->jobs_topic), 0);
  EXPECT_NE(script.find("--bootstrap-server " + config_.kafka->bootstrap),
            std::string::npos);
  // The broker tells clients to come back at the address they were given.
  const std::string advertised =
      services_["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
          .as<std::string>("");
  EXPECT_NE(advertised.find("://" + config_.kafka->bootstrap),
            std::string::npos)
      << advertised;
  for (const char* name : {"worker", "producer"}) {
    EXPECT_TRUE(DependsOn(services_[name], "kafka-init",
                          "service_completed_successfully"))
        << name;
  }
}

// The stock lands where the inventory.purchase handler reads it
// (FencedResource::KeyOf: <prefix>:res:{<lock>}:stock), for as many products
// as the producer spreads its jobs over.
TEST_F(ComposeTest, SeedWritesTheKeysTheHandlerReads) {
  const YAML::Node seed = services_["seed"];
  ASSERT_TRUE(seed);
  const std::string script = seed["command"][0].as<std::string>();
  const std::string key = config_.redis.key_prefix + ":res:{product:";
  EXPECT_NE(script.find(key + "$$i}:stock"), std::string::npos) << script;
  EXPECT_NE(script.find(key + "$$i}:initial"), std::string::npos) << script;
  const YAML::Node producer = services_["producer"];
  EXPECT_EQ(seed["environment"]["PRODUCTS"].as<std::string>(""),
            ArgumentOf(Strings(producer["command"]), "--products"));
  EXPECT_FALSE(
      ArgumentOf(Strings(producer["command"]), "--flash-sale").empty());
  EXPECT_TRUE(DependsOn(producer, "seed", "service_completed_successfully"));
}

TEST_F(ComposeTest, PrometheusScrapesEveryWorker) {
  const YAML::Node prometheus_service = services_["prometheus"];
  const std::string source =
      MountSource(prometheus_service, "/etc/prometheus/prometheus.yml");
  ASSERT_FALSE(source.empty());
  const YAML::Node prometheus = LoadYaml(ComposeDir() / source);
  bool found = false;
  for (const YAML::Node& job : prometheus["scrape_configs"]) {
    for (const YAML::Node& sd : job["dns_sd_configs"]) {
      const std::vector<std::string> names = Strings(sd["names"]);
      if (std::find(names.begin(), names.end(), "worker") == names.end()) {
        continue;
      }
      found = true;
      // deploy/prometheus/rules select the workers with job=~"lockfleet.*".
      EXPECT_TRUE(job["job_name"].as<std::string>("").starts_with("lockfleet"));
      EXPECT_EQ(sd["type"].as<std::string>("SRV"), "A");
      EXPECT_EQ(sd["port"].as<int>(0), ListenPort(config_.metrics.listen));
    }
  }
  EXPECT_TRUE(found) << "no dns_sd_configs job on the worker service";
  // The rules directory the other half of issue 8 fills.
  EXPECT_EQ(MountSource(prometheus_service, "/etc/prometheus/rules"),
            "../prometheus/rules");
  for (const std::string& rules : Strings(prometheus["rule_files"])) {
    EXPECT_TRUE(rules.starts_with("/etc/prometheus/rules/")) << rules;
  }
}

// promtool checks the config and every rule file its rule_files globs
// match, read from deploy/prometheus/rules/ where compose mounts them from
// (so a glob that also matches a promtool test file fails here).
TEST_F(ComposeTest, PromtoolAcceptsThePrometheusConfigAndItsRules) {
  const std::optional<std::string> promtool =
      lockfleet::testing::FindPromtool();
  ASSERT_TRUE(promtool.has_value()) << lockfleet::testing::kNoPromtool;
  std::string text = ReadText(ComposeDir() / "prometheus.yml");
  const std::string mounted = "/etc/prometheus/rules/";
  const std::string source = (DeployDir() / "prometheus/rules").string() + "/";
  for (size_t at; (at = text.find(mounted)) != std::string::npos;) {
    text.replace(at, mounted.size(), source);
  }
  const TempFile config("prometheus.yml", text);
  const ShellResult check = RunShell(ShellQuote(*promtool) + " check config " +
                                     ShellQuote(config.path().string()));
  EXPECT_EQ(check.status, 0) << check.output;
}

TEST_F(ComposeTest, GrafanaProvisionsThePrometheusAndTheDashboards) {
  const YAML::Node grafana = services_["grafana"];
  ASSERT_TRUE(grafana);
  const std::string provisioning =
      MountSource(grafana, "/etc/grafana/provisioning");
  ASSERT_FALSE(provisioning.empty());
  const fs::path provisioning_dir = ComposeDir() / provisioning;

  const YAML::Node datasources =
      LoadYaml(provisioning_dir / "datasources/prometheus.yaml");
  ASSERT_EQ(datasources["datasources"].size(), 1u);
  const YAML::Node datasource = datasources["datasources"][0];
  EXPECT_EQ(datasource["type"].as<std::string>(), "prometheus");
  EXPECT_EQ(datasource["uid"].as<std::string>(""), "prometheus");
  EXPECT_EQ(datasource["url"].as<std::string>(), "http://prometheus:9090");
  EXPECT_TRUE(services_["prometheus"]);

  const YAML::Node providers =
      LoadYaml(provisioning_dir / "dashboards/dashboards.yaml");
  ASSERT_EQ(providers["providers"].size(), 1u);
  const std::string path =
      providers["providers"][0]["options"]["path"].as<std::string>();
  const std::string dashboards = MountSource(grafana, path);
  EXPECT_EQ(dashboards, "../../dashboards");
  EXPECT_EQ((ComposeDir() / dashboards).lexically_normal(),
            (SourceDir() / "dashboards").lexically_normal());
}

}  // namespace
}  // namespace lockfleet::deploy_test
