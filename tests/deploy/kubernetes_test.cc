// deploy/kubernetes: the worker's config (embedded in the ConfigMap) is
// valid, and the manifests agree with it and with each other — the mistakes
// that `kubectl apply` accepts and a rollout only reveals.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "deploy_test_util.h"

namespace lockfleet::deploy_test {
namespace {

struct Manifest {
  fs::path file;
  YAML::Node object;
};

fs::path KubernetesDir() { return DeployDir() / "kubernetes"; }

// Every object of every manifest (kustomization.yaml is not one).
std::vector<Manifest> Manifests() {
  std::vector<Manifest> manifests;
  for (const fs::path& file : FilesUnder(KubernetesDir(), {".yaml", ".yml"})) {
    if (file.filename() == "kustomization.yaml") continue;
    for (const YAML::Node& object : LoadYamlDocuments(file)) {
      manifests.push_back({file, object});
    }
  }
  return manifests;
}

// The one object of `kind`; throws unless there is exactly one.
YAML::Node One(const std::vector<Manifest>& manifests, const std::string& kind,
               const std::string& name = "") {
  std::vector<YAML::Node> found;
  for (const Manifest& manifest : manifests) {
    if (manifest.object["kind"].as<std::string>("") == kind &&
        (name.empty() ||
         manifest.object["metadata"]["name"].as<std::string>("") == name)) {
      found.push_back(manifest.object);
    }
  }
  if (found.size() != 1) {
    throw std::runtime_error("expected one " + kind + " " + name + ", found " +
                             std::to_string(found.size()));
  }
  return found[0];
}

YAML::Node WorkerContainer(const YAML::Node& deployment) {
  for (const YAML::Node& container :
       deployment["spec"]["template"]["spec"]["containers"]) {
    if (container["name"].as<std::string>("") == "worker") return container;
  }
  throw std::runtime_error("the Deployment has no container named worker");
}

// A probe's or Service's port: a number, or the name of a container port.
int ContainerPort(const YAML::Node& container, const YAML::Node& port) {
  const std::string text = port.as<std::string>();
  for (const YAML::Node& declared : container["ports"]) {
    if (declared["name"].as<std::string>("") == text) {
      return declared["containerPort"].as<int>();
    }
  }
  return port.as<int>();
}

// True if every label of `selector` is on `labels`.
bool Selects(const YAML::Node& selector, const YAML::Node& labels) {
  if (!selector.IsMap() || selector.size() == 0) return false;
  for (const auto& label : selector) {
    const YAML::Node value = labels[label.first.as<std::string>()];
    if (!value || value.as<std::string>() != label.second.as<std::string>()) {
      return false;
    }
  }
  return true;
}

// Follows the worker's `--config PATH` through its volume mount and volume
// to the ConfigMap key it reads, and returns that key's text.
std::string WorkerConfigText(const std::vector<Manifest>& manifests) {
  const YAML::Node deployment = One(manifests, "Deployment");
  const YAML::Node container = WorkerContainer(deployment);
  const fs::path path = ArgumentOf(Strings(container["args"]), "--config");
  if (path.empty()) throw std::runtime_error("the worker has no --config");

  std::string volume_name;
  for (const YAML::Node& mount : container["volumeMounts"]) {
    if (fs::path(mount["mountPath"].as<std::string>()) == path.parent_path()) {
      volume_name = mount["name"].as<std::string>();
    }
  }
  if (volume_name.empty()) {
    throw std::runtime_error("nothing is mounted at " +
                             path.parent_path().string());
  }
  for (const YAML::Node& volume :
       deployment["spec"]["template"]["spec"]["volumes"]) {
    if (volume["name"].as<std::string>("") != volume_name) continue;
    const YAML::Node source = volume["configMap"];
    if (!source) throw std::runtime_error(volume_name + " is no ConfigMap");
    std::string key = path.filename().string();
    for (const YAML::Node& item : source["items"]) {
      if (item["path"].as<std::string>() == path.filename().string()) {
        key = item["key"].as<std::string>();
      }
    }
    const YAML::Node data = One(manifests, "ConfigMap",
                                source["name"].as<std::string>())["data"][key];
    if (!data) throw std::runtime_error("the ConfigMap has no key " + key);
    return data.as<std::string>();
  }
  throw std::runtime_error("no volume named " + volume_name);
}

class KubernetesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    manifests_ = Manifests();
    config_text_ = WorkerConfigText(manifests_);
    config_ = LoadLockfleetConfigText(config_text_, "configmap.yaml");
    deployment_ = One(manifests_, "Deployment");
    container_ = WorkerContainer(deployment_);
  }

  std::vector<Manifest> manifests_;
  std::string config_text_;
  config::Config config_;
  YAML::Node deployment_;
  YAML::Node container_;
};

TEST(KubernetesFilesTest, KustomizationListsEveryManifest) {
  const YAML::Node kustomization =
      LoadYaml(KubernetesDir() / "kustomization.yaml");
  std::set<std::string> listed;
  for (const std::string& resource : Strings(kustomization["resources"])) {
    listed.insert(resource);
    EXPECT_TRUE(fs::is_regular_file(KubernetesDir() / resource)) << resource;
  }
  // Examples (secret.example.yaml) are left out on purpose: applying the
  // kustomization must not overwrite the real Secret.
  for (const fs::path& file : FilesUnder(KubernetesDir(), {".yaml", ".yml"})) {
    if (file.filename() == "kustomization.yaml") continue;
    if (file.filename().string().ends_with(".example.yaml")) {
      EXPECT_FALSE(listed.contains(file.filename().string()));
      continue;
    }
    EXPECT_TRUE(listed.contains(file.filename().string()))
        << file.filename() << " is not in kustomization.yaml";
  }
}

// The config the worker actually reads, extracted from the ConfigMap.
TEST_F(KubernetesTest, ConfigMapConfigPassesConfigCheck) {
  const TempFile file("lockfleet.yaml", config_text_);
  const ShellResult check = ConfigCheck(file.path());
  EXPECT_EQ(check.status, 0) << check.output;
  EXPECT_EQ(check.output, "ok\n");
  ExpectDeploymentConfig(config_);
}

// Every ${VAR} of the config comes from the Secret or the container's env.
TEST_F(KubernetesTest, EveryConfigVariableIsProvided) {
  std::set<std::string> provided;
  for (const YAML::Node& env : container_["env"]) {
    provided.insert(env["name"].as<std::string>());
  }
  for (const YAML::Node& source : container_["envFrom"]) {
    if (!source["secretRef"]) continue;
    const YAML::Node secret = One(
        manifests_, "Secret", source["secretRef"]["name"].as<std::string>());
    for (const char* field : {"data", "stringData"}) {
      for (const auto& entry : secret[field]) {
        provided.insert(entry.first.as<std::string>());
      }
    }
  }
  const std::set<std::string> read =
      ReferencedVariables(YAML::Load(config_text_));
  EXPECT_FALSE(read.empty()) << "secrets are expected to come from ${VAR}";
  for (const std::string& name : read) {
    EXPECT_TRUE(provided.contains(name)) << name << " is not provided";
  }
}

// The kubelet probes the pod IP on the port and path health_listen serves.
TEST_F(KubernetesTest, ProbesPointAtHealthListen) {
  const std::string host = ListenHost(config_.worker.health_listen);
  EXPECT_TRUE(host == "0.0.0.0" || host.empty())
      << "health_listen " << config_.worker.health_listen
      << " is not reachable on the pod IP";
  // Liveness checks no dependency (/livez); readiness does (/readyz).
  for (const auto& [probe, path] : {std::pair{"readinessProbe", "/readyz"},
                                    std::pair{"livenessProbe", "/livez"}}) {
    SCOPED_TRACE(probe);
    const YAML::Node get = container_[probe]["httpGet"];
    ASSERT_TRUE(get) << "no httpGet probe";
    EXPECT_EQ(get["path"].as<std::string>(), path);
    EXPECT_EQ(ContainerPort(container_, get["port"]),
              ListenPort(config_.worker.health_listen));
  }
}

// A Redis failover must not restart every worker (a restarted worker exits
// 69 until Redis is back): liveness is slow even though /livez checks no
// dependency.
TEST_F(KubernetesTest, LivenessOutlastsARedisFailover) {
  const YAML::Node probe = container_["livenessProbe"];
  const int window =
      probe["periodSeconds"].as<int>(10) * probe["failureThreshold"].as<int>(3);
  EXPECT_GE(window, 60);
}

TEST_F(KubernetesTest, TerminationGraceCoversTheDrain) {
  const std::chrono::seconds grace(
      deployment_["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
          .as<int>(30));
  EXPECT_GT(grace, MinimumStopTimeout(config_))
      << "worker.grace_period is " << config_.worker.grace_period.count()
      << " ms";
}

TEST_F(KubernetesTest, ServiceScrapeAnnotationsMatchMetricsListen) {
  const int metrics_port = ListenPort(config_.metrics.listen);
  ASSERT_GT(metrics_port, 0) << config_.metrics.listen;
  const YAML::Node service = One(manifests_, "Service");
  const YAML::Node annotations = service["metadata"]["annotations"];
  EXPECT_EQ(annotations["prometheus.io/scrape"].as<std::string>(""), "true");
  EXPECT_EQ(annotations["prometheus.io/port"].as<std::string>(""),
            std::to_string(metrics_port));
  EXPECT_EQ(annotations["prometheus.io/path"].as<std::string>("/metrics"),
            "/metrics");
  for (const YAML::Node& port : service["spec"]["ports"]) {
    EXPECT_EQ(ContainerPort(container_, port["targetPort"]), metrics_port);
  }
  const YAML::Node pod_labels =
      deployment_["spec"]["template"]["metadata"]["labels"];
  EXPECT_TRUE(Selects(service["spec"]["selector"], pod_labels));
  // The pod template's own annotations (pod discovery), when present.
  const YAML::Node pod_port = deployment_["spec"]["template"]["metadata"]
                                         ["annotations"]["prometheus.io/port"];
  if (pod_port) {
    EXPECT_EQ(pod_port.as<std::string>(), std::to_string(metrics_port));
  }
}

TEST_F(KubernetesTest, DisruptionBudgetAndAutoscalerTargetTheWorkers) {
  const YAML::Node pod_labels =
      deployment_["spec"]["template"]["metadata"]["labels"];
  EXPECT_TRUE(
      Selects(deployment_["spec"]["selector"]["matchLabels"], pod_labels));
  const YAML::Node pdb = One(manifests_, "PodDisruptionBudget");
  EXPECT_TRUE(Selects(pdb["spec"]["selector"]["matchLabels"], pod_labels));

  const YAML::Node hpa = One(manifests_, "HorizontalPodAutoscaler");
  EXPECT_EQ(hpa["spec"]["scaleTargetRef"]["kind"].as<std::string>(),
            "Deployment");
  EXPECT_EQ(hpa["spec"]["scaleTargetRef"]["name"].as<std::string>(),
            deployment_["metadata"]["name"].as<std::string>());
  // CPU utilisation is relative to the request.
  EXPECT_TRUE(container_["resources"]["requests"]["cpu"]);
  // Workers beyond the jobs topic's partitions get no partition to consume.
  const YAML::Node job = One(manifests_, "Job");
  const YAML::Node job_container =
      job["spec"]["template"]["spec"]["containers"][0];
  const int partitions = CreatedPartitions(
      job_container["args"][0].as<std::string>(), config_.kafka->jobs_topic);
  EXPECT_LE(hpa["spec"]["maxReplicas"].as<int>(), partitions);
  EXPECT_LE(hpa["spec"]["minReplicas"].as<int>(1),
            hpa["spec"]["maxReplicas"].as<int>());
}

// The Job creates the topics the config names, on the broker it names.
TEST_F(KubernetesTest, TopicsJobCreatesTheConfiguredTopics) {
  const YAML::Node job = One(manifests_, "Job");
  const YAML::Node container = job["spec"]["template"]["spec"]["containers"][0];
  const std::string script = container["args"][0].as<std::string>();
  EXPECT_GT(CreatedPartitions(script, config_.kafka->unlock_topic), 0)
      << script;
  EXPECT_GT(CreatedPartitions(script, config_.kafka->jobs_topic), 0) << script;
  std::string bootstrap;
  for (const YAML::Node& env : container["env"]) {
    if (env["name"].as<std::string>() == "BOOTSTRAP") {
      bootstrap = env["value"].as<std::string>();
    }
  }
  EXPECT_EQ(bootstrap, config_.kafka->bootstrap);
}

}  // namespace
}  // namespace lockfleet::deploy_test
