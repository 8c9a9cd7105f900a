// The dashboards and alerting rules against a real fleet: two `lockfleet
// worker` processes (Kafka jobs, a private redis-server, the embedded
// broker in this process) sell products to purchase jobs, and run
// catalogue jobs under a read-write lock and a limit, while a real
// Prometheus scrapes them every second and evaluates the rules. Then every
// panel's query must return data, every metric a panel or rule names must
// be in the workers' exposition, and every rule must evaluate cleanly
// without paging anyone. Waits are generous and condition-based: a loaded
// machine or a sanitizer build only makes the test slower.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli_process.h"
#include "cli/worker_process.h"
#include "dashboards/grafana.h"
#include "dashboards/metric_names.h"
#include "dashboards/prometheus_server.h"
#include "dashboards/repo_files.h"
#include "lockfleet/lockcore/redis_client.h"
#include "lockfleet/metrics/http.h"
#include "lockfleet/metrics/scrape.h"
#include "lockfleet/notifier/embedded_broker.h"
#include "lockfleet/notifier/job_topic.h"
#include "lockfleet/worker/builtin_handlers.h"
#include "lockfleet/worker/job.h"
#include "support/promtool.h"
#include "support/redis_server.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using std::chrono::seconds;

constexpr seconds kLong{60};  // bounds for things that take ~1 s normally
constexpr int kPartitions = 4;
constexpr int kProducts = 2;
constexpr int kUnits = 100;
constexpr int kBatches = 5;
constexpr int kJobsPerBatch = 60;  // 300 jobs for 200 units: some sell out
// Per batch, also jobs that read (and now and then write) a catalogue under
// a read-write lock and a limit: the semaphore and read-write lock panels
// get data. The limit has a permit for every worker thread (2 x 4), so no
// job ever queues for one and LockfleetLimitExhausted stays quiet.
constexpr int kCatalogueJobsPerBatch = 8;
constexpr int kLimitPermits = 8;
constexpr char kJob[] = "lockfleet";

// WaitUntil for a condition that asks a server: at most ten times a second.
bool Poll(const std::function<bool()>& condition) {
  return WaitUntil(
      [&] {
        if (condition()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        return false;
      },
      kLong);
}

struct Worker {
  std::unique_ptr<CliProcess> process;
  uint16_t metrics_port = 0;
};

class DashboardsFleetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(FindOnPath("prometheus").has_value()) << kNoPrometheus;
    redis_server_ = std::make_unique<RedisServer>();
    broker_ = std::make_unique<notifier::EmbeddedBroker>(
        notifier::EmbeddedBrokerOptions{
            .partitions = kPartitions,
            .topics = {"lockfleet.unlock", "lockfleet.jobs"}});
    redis_ = std::make_shared<RedisClient>(
        RedisOptions{.url = redis_server_->url()});
    for (int p = 0; p < kProducts; ++p) {
      worker::SeedStock(*redis_, "lockfleet", "product:" + std::to_string(p),
                        kUnits);
    }
    std::ofstream(dir_.File("fleet.yaml"))
        << "redis:\n  url: " << redis_server_->url() << "\n"
        << "kafka:\n  bootstrap: " << broker_->bootstrap()
        << "\n  fetch_wait: 1ms\n"
        << "locks:\n  lease: 2s\n"
        << "worker:\n  threads: 4\n  grace_period: 5s\n"
        << "  sources:\n    kafka_jobs: {enabled: true, group: dashboards}\n"
        << "metrics:\n  listen: 127.0.0.1:0\n";
  }

  void TearDown() override {
    for (Worker& worker : workers_) worker.process->Signal(SIGTERM);
    for (Worker& worker : workers_) {
      EXPECT_EQ(worker.process->Wait(kLong), 0) << worker.process->Stderr();
    }
  }

  void StartWorker(const std::string& id) {
    Worker worker{.process = ::lockfleet::testing::StartWorker(
                      dir_.File("fleet.yaml"), id, kLong)};
    worker.metrics_port = WorkerMetricsPort(*worker.process);
    ASSERT_NE(worker.metrics_port, 0) << worker.process->Stderr();
    workers_.push_back(std::move(worker));
  }

  static std::vector<metrics::Sample> Scrape(const Worker& worker) {
    return ScrapeWorker(*worker.process);
  }

  // Every worker holds jobs-topic partitions and together they hold all,
  // unchanged over a few scrapes: produced jobs reach both workers.
  bool GroupStable() const {
    int stable_rounds = 0;
    return Poll([&] {
      double total = 0;
      bool each = true;
      for (const Worker& worker : workers_) {
        const double partitions = metrics::SumSamples(
            Scrape(worker), "lockfleet_jobs_consumer_partitions");
        total += partitions;
        each = each && partitions >= 1;
      }
      stable_rounds = total == kPartitions && each ? stable_rounds + 1 : 0;
      return stable_rounds >= 5;
    });
  }

  // Waits until the instant query's single value equals `value`.
  static bool PrometheusSees(const PrometheusServer& prometheus,
                             const std::string& expr, double value) {
    return Poll([&] {
      std::string error;
      const auto samples = prometheus.Query(expr, &error);
      return samples && samples->size() == 1 && (*samples)[0].value == value;
    });
  }

  // Purchases keyed by job id, not by lock: each product's jobs spread over
  // every partition and so over both workers, which contend for its lock.
  void ProduceBatch(int batch) {
    notifier::JobProducer producer(
        {.bootstrap = broker_->bootstrap(), .topic = "lockfleet.jobs"});
    for (int i = batch * kJobsPerBatch; i < (batch + 1) * kJobsPerBatch; ++i) {
      const worker::Job job = worker::FlashSaleJob(i, kProducts);
      producer.Produce(job.id, worker::EncodeJob(job));
    }
    for (int i = 0; i < kCatalogueJobsPerBatch; ++i) {
      worker::Job job{
          .id = "catalogue-" + std::to_string(batch) + "-" + std::to_string(i),
          .lock = "catalogue:eu",
          .type = std::string(worker::kSleep),
          .limit = config::LimitConfig{.name = "partner-api",
                                       .permits = kLimitPermits},
          .lock_mode =
              i % 4 == 0 ? config::LockMode::kWrite : config::LockMode::kRead};
      job.payload["ms"] = {config::Scalar::Type::kInteger, "20"};
      producer.Produce(job.id, worker::EncodeJob(job));
    }
    ASSERT_EQ(producer.Flush(seconds(30)), 0u);
  }

  TempDir dir_;
  std::unique_ptr<RedisServer> redis_server_;
  std::shared_ptr<RedisClient> redis_;
  std::unique_ptr<notifier::EmbeddedBroker> broker_;
  std::vector<Worker> workers_;
};

TEST_F(DashboardsFleetTest, EveryPanelAndRuleWorksOnARealFleet) {
  StartWorker("w1");
  StartWorker("w2");
  ASSERT_EQ(workers_.size(), 2u);
  PrometheusServer prometheus(
      {.job = kJob,
       .targets = {"127.0.0.1:" + std::to_string(workers_[0].metrics_port),
                   "127.0.0.1:" + std::to_string(workers_[1].metrics_port)},
       .rule_files = {SourcePath(kRulesFile)}});
  ASSERT_TRUE(GroupStable()) << workers_[0].process->Stderr();
  ASSERT_TRUE(PrometheusSees(prometheus, "sum(up{job=\"lockfleet\"})", 2))
      << prometheus.Log();

  // Batches, each seen by Prometheus before the next: the counters rise
  // across several scrapes, so rate() has something to show.
  for (int batch = 0; batch < kBatches; ++batch) {
    ProduceBatch(batch);
    ASSERT_TRUE(PrometheusSees(
        prometheus, "sum(lockfleet_jobs_total{job=\"lockfleet\"})",
        (batch + 1) * (kJobsPerBatch + kCatalogueJobsPerBatch)))
        << "batch " << batch << "\n"
        << workers_[0].process->Stderr() << workers_[1].process->Stderr();
  }
  EXPECT_EQ(worker::AuditStock(*redis_, "lockfleet", "product:0").sold, kUnits);
  // The limit's gauges come from a sample taken every 5 s.
  ASSERT_TRUE(PrometheusSees(
      prometheus,
      "clamp_max(count(lockfleet_semaphore_permits_in_use{job=\"lockfleet\"})"
      ", 1)",
      1))
      << prometheus.Log();

  // The metric names the workers expose (the families' sample names, so a
  // histogram counts as its _bucket, _sum and _count) plus Prometheus's up.
  std::set<std::string> exposed{"up"};
  for (const Worker& worker : workers_) {
    for (const metrics::Sample& sample : Scrape(worker)) {
      exposed.insert(sample.name);
    }
  }

  {
    SCOPED_TRACE("alerting rules");
    nlohmann::json groups;
    ASSERT_TRUE(Poll([&] {
      const ApiResult rules = prometheus.Api("rules");
      if (!rules.ok) return false;
      groups = rules.data.value("groups", nlohmann::json::array());
      bool evaluated = !groups.empty();
      for (const auto& group : groups) {
        for (const auto& rule : group["rules"]) {
          evaluated = evaluated && rule.value("health", "") != "unknown";
        }
      }
      return evaluated;
    })) << prometheus.Log();
    std::set<std::string> names;
    for (const auto& group : groups) {
      names.insert(group.value("name", ""));
      for (const auto& rule : group["rules"]) {
        const std::string name = rule.value("name", "");
        EXPECT_EQ(rule.value("health", ""), "ok")
            << name << ": " << rule.value("lastError", "");
        for (const std::string& metric : MetricNames(rule.value("query", ""))) {
          EXPECT_TRUE(exposed.contains(metric))
              << name << " uses " << metric << ", which no worker exposes";
        }
      }
    }
    EXPECT_EQ(names,
              (std::set<std::string>{"lockfleet-fleet", "lockfleet-locks",
                                     "lockfleet-kafka", "lockfleet-jobs"}));
    // A healthy fleet pages nobody: not even a pending alert. Except for
    // a high lock wait, which a loaded machine (sanitizers, parallel tests)
    // can cause for real.
    const ApiResult alerts = prometheus.Api("alerts");
    ASSERT_TRUE(alerts.ok) << alerts.error;
    for (const auto& alert :
         alerts.data.value("alerts", nlohmann::json::array())) {
      EXPECT_EQ(alert["labels"].value("alertname", ""), "LockfleetLockWaitHigh")
          << alert.dump(2);
    }
  }

  for (const GrafanaDashboard& dashboard :
       LoadDashboards(SourcePath(kDashboardsDir))) {
    SCOPED_TRACE(dashboard.file);
    // Variables as Grafana resolves them, in order: a query variable takes
    // its "All" value when it has one, else its first value.
    std::map<std::string, std::string> values = BuiltinVariables();
    for (const GrafanaVariable& v : dashboard.variables) {
      if (v.type != "query") continue;
      std::vector<std::string> unknown;
      const auto query =
          ParseLabelValues(Interpolate(v.query, values, &unknown));
      ASSERT_TRUE(query.has_value()) << v.query;
      std::vector<std::pair<std::string, std::string>> params;
      if (!query->selector.empty())
        params.push_back({"match[]", query->selector});
      const ApiResult answer =
          prometheus.Api("label/" + query->label + "/values", params);
      ASSERT_TRUE(answer.ok) << v.name << ": " << answer.error;
      ASSERT_FALSE(answer.data.empty()) << v.name << " has no values";
      values[v.name] = v.include_all && !v.all_value.empty()
                           ? v.all_value
                           : answer.data[0].get<std::string>();
    }
    EXPECT_EQ(values["job"], kJob);
    for (const GrafanaPanel& panel : dashboard.panels) {
      for (const GrafanaTarget& target : panel.targets) {
        std::vector<std::string> unknown;
        const std::string expr = Interpolate(target.expr, values, &unknown);
        SCOPED_TRACE(panel.title + " " + target.ref_id + ": " + expr);
        EXPECT_TRUE(unknown.empty()) << "undefined variable $" << unknown[0];
        for (const std::string& metric : MetricNames(expr)) {
          EXPECT_TRUE(exposed.contains(metric))
              << metric << " is not in the workers' exposition";
        }
        std::string error;
        const auto samples = prometheus.Query(expr, &error);
        ASSERT_TRUE(samples.has_value()) << error;
        EXPECT_FALSE(samples->empty()) << "no data";
        // Data, not only NaN: a quantile or ratio over an idle window is
        // NaN, so this catches queries that select the wrong series.
        EXPECT_TRUE(samples->empty() ||
                    std::any_of(samples->begin(), samples->end(),
                                [](const PromSample& s) {
                                  return std::isfinite(s.value);
                                }))
            << "every value is NaN or infinite";
      }
    }
  }
}

}  // namespace
}  // namespace lockfleet::testing
