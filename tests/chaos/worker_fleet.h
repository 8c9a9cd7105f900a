// WorkerFleet: the fixture of chaos scenarios 5 and 6 — a private
// redis-server, a `lockfleet broker` process (the unlock and jobs topics)
// and helpers to start `lockfleet worker` processes, feed the topics, scrape
// a worker's /metrics and read the truth back from Redis.
//
// Thread-safety: none; one test thread uses it.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli/broker_process.h"
#include "cli/cli_process.h"
#include "cli/worker_process.h"
#include "lockfleet/lockcore/fenced_resource.h"
#include "lockfleet/lockcore/redis_client.h"
#include "lockfleet/metrics/scrape.h"
#include "lockfleet/notifier/job_topic.h"
#include "lockfleet/worker/job.h"
#include "support/redis_server.h"
#include "support/wait_until.h"

namespace lockfleet::testing {

// Bounds for things that take a few seconds normally: a loaded 2-core
// machine makes them slower, never fails them.
inline constexpr std::chrono::seconds kChaosLong{60};

class WorkerFleet : public ::testing::Test {
 protected:
  void SetUp() override {
    redis_ = std::make_shared<RedisClient>(RedisOptions{.url = server_.url()});
    // One partition per topic: one worker consumes the jobs topic and the
    // others stand by, so a test knows whose jobs are in flight.
    broker_ = std::make_unique<BrokerProcess>(
        0, std::vector<std::string>{"--partitions", "1", "--topic",
                                    "lockfleet.jobs"});
  }

  // A config for this test's Redis and broker. `worker_section` is the
  // whole `worker:` block; `lease` the locks.lease.
  std::string WriteConfig(const std::string& worker_section,
                          const std::string& lease = "2s",
                          const std::string& name = "fleet.yaml") {
    // Session timeout 3 s (heartbeat 500 ms): the embedded broker makes a
    // rebalance wait session.timeout - 1 s, and a crashed member is noticed
    // after it (docs: lessons.md, "Kafka facts"). The workers log at debug
    // level with librdkafka's group debugging on: a test prints a worker's
    // stderr only when it fails, and then the group's story (joins,
    // assignments, session timeouts) is what tells a slow rebalance from a
    // worker bug.
    const std::string text =
        "redis:\n  url: " + server_.url() +
        "\nkafka:\n  bootstrap: " + broker_->bootstrap() +
        "\n  fetch_wait: 1ms\n  properties:\n"
        "    session.timeout.ms: 3000\n    heartbeat.interval.ms: 500\n"
        "    debug: cgrp\n"
        "locks:\n  lease: " +
        lease + "\n" + worker_section +
        "metrics:\n  listen: 127.0.0.1:0\nlogging:\n  level: debug\n";
    const std::string path = dir_.File(name);
    std::ofstream(path) << text;
    return path;
  }

  // `lockfleet worker --config config --id id`, once it printed its ready
  // line.
  static std::unique_ptr<CliProcess> StartWorker(const std::string& config,
                                                 const std::string& id) {
    return lockfleet::testing::StartWorker(config, id, kChaosLong);
  }

  static double Metric(CliProcess& worker, const std::string& family,
                       const metrics::LabelMatch& labels = {}) {
    return metrics::SumSamples(ScrapeWorker(worker), family, labels);
  }

  // Jobs with `result` (and `type`, when given) the worker counted.
  static double Jobs(CliProcess& worker, const std::string& result,
                     const std::string& type = "") {
    metrics::LabelMatch labels{{"result", result}};
    if (!type.empty()) labels["type"] = type;
    return Metric(worker, "lockfleet_jobs_total", labels);
  }

  // Raw records (key, value) onto `topic`; waits for every acknowledgement.
  void ProduceRaw(
      const std::string& topic,
      const std::vector<std::pair<std::string, std::string>>& records) {
    notifier::JobProducer producer(
        {.bootstrap = broker_->bootstrap(),
         .topic = topic,
         // Room for the oversized records the tests send (2 MB).
         .properties = {{"message.max.bytes", "4000000"}}});
    for (const auto& [key, value] : records) producer.Produce(key, value);
    ASSERT_EQ(producer.Flush(std::chrono::seconds(30)), 0u);
  }

  void Produce(const std::vector<worker::Job>& jobs) {
    std::vector<std::pair<std::string, std::string>> records;
    for (const worker::Job& job : jobs) {
      records.emplace_back(job.lock, worker::EncodeJob(job));
    }
    ProduceRaw("lockfleet.jobs", records);
  }

  static worker::Job Sleep(std::string id, std::string lock, int ms) {
    worker::Job job{
        .id = std::move(id), .lock = std::move(lock), .type = "sleep"};
    job.payload["ms"] = {config::Scalar::Type::kInteger, std::to_string(ms)};
    return job;
  }

  static worker::Job Purchase(int i, int products) {
    worker::Job job{.id = "order-" + std::to_string(i),
                    .lock = "product:" + std::to_string(i % products),
                    .type = "inventory.purchase"};
    job.payload["buyer"] = {config::Scalar::Type::kString,
                            "buyer-" + std::to_string(i)};
    return job;
  }

  // The job's done marker exists (it finished: ran, or was rejected).
  bool Done(const worker::Job& job) {
    return redis_
               ->Execute({"EXISTS", FencedResource::KeyOf("lockfleet", job.lock,
                                                          "job:" + job.id)})
               .integer == 1;
  }

  // The lock's owner token as Redis has it now ("" when free).
  std::string Owner(std::string_view lock) {
    const Reply reply = redis_->Execute(
        {"HGET", "lockfleet:{" + std::string(lock) + "}:lock", "owner"});
    return reply.type == Reply::Type::kString ? reply.str : "";
  }

  long long DeadLetters() {
    return redis_->Execute({"LLEN", "lockfleet:jobs:dead"}).integer;
  }

  // Every key in Redis (SCAN), for checks that nothing stray was written.
  std::vector<std::string> AllKeys() {
    std::vector<std::string> keys;
    std::string cursor = "0";
    do {
      const Reply reply =
          redis_->Execute({"SCAN", cursor, "MATCH", "*", "COUNT", "1000"});
      cursor = reply.elements.at(0).str;
      for (const Reply& key : reply.elements.at(1).elements) {
        keys.push_back(key.str);
      }
    } while (cursor != "0");
    return keys;
  }

  TempDir dir_;
  RedisServer server_;
  std::shared_ptr<RedisClient> redis_;
  std::unique_ptr<BrokerProcess> broker_;
};

}  // namespace lockfleet::testing
