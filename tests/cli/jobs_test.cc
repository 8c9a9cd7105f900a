// `lockfleet jobs dead list|show|retry|purge` and `lockfleet jobs status`
// end to end: the real binary against a private redis-server, the embedded
// broker (in this process) and real `lockfleet worker` processes — and, when
// kafka-local is there, a real Kafka broker for the group's members. Waits
// poll with generous deadlines; nothing depends on speed.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli_process.h"
#include "cli/worker_process.h"
#include "lockfleet/lockcore/fenced_resource.h"
#include "lockfleet/lockcore/lock_client.h"
#include "lockfleet/lockcore/redis_client.h"
#include "lockfleet/metrics/scrape.h"
#include "lockfleet/notifier/embedded_broker.h"
#include "lockfleet/notifier/job_topic.h"
#include "lockfleet/worker/builtin_handlers.h"
#include "lockfleet/worker/job.h"
#include "support/kafka_admin.h"
#include "support/real_kafka.h"
#include "support/redis_server.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using json = nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr seconds kLong{60};
constexpr char kDeadKey[] = "lockfleet:jobs:dead";

worker::Job Purchase(const std::string& id, const std::string& lock) {
  worker::Job job{.id = id, .lock = lock, .type = "inventory.purchase"};
  job.payload["buyer"] = {config::Scalar::Type::kString, "buyer-" + id};
  return job;
}

worker::Job Sleep(const std::string& id, const std::string& lock, int ms) {
  worker::Job job{.id = id, .lock = lock, .type = "sleep"};
  job.payload["ms"] = {config::Scalar::Type::kInteger, std::to_string(ms)};
  return job;
}

// A dead letter as a worker writes it (runner.cc).
std::string Entry(const std::string& reason, const std::string& worker,
                  const std::string& record) {
  return reason + "\t" + worker + "\t" + record;
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class JobsToolsTest : public ::testing::Test {
 protected:
  JobsToolsTest()
      : redis_(
            std::make_shared<RedisClient>(RedisOptions{.url = server_.url()})) {
  }

  // `lockfleet jobs WORDS... --redis URL`; never finds a demo of the
  // machine's (XDG_RUNTIME_DIR is this test's).
  CliResult Jobs(std::vector<std::string> words) {
    words.insert(words.begin(), "jobs");
    words.insert(words.end(), {"--redis", server_.url()});
    return RunCli(words, Env());
  }
  CliResult JobsWithKafka(std::vector<std::string> words) {
    words.insert(words.end(), {"--bootstrap", broker_->bootstrap()});
    return Jobs(std::move(words));
  }
  std::vector<std::string> Env() const {
    return {"XDG_RUNTIME_DIR=" + dir_.path()};
  }

  void StartBroker(int partitions = 1) {
    broker_ = std::make_unique<notifier::EmbeddedBroker>(
        notifier::EmbeddedBrokerOptions{
            .partitions = partitions,
            .topics = {"lockfleet.unlock", "lockfleet.jobs"}});
  }

  void Produce(const std::vector<std::string>& records,
               const std::string& bootstrap,
               const std::string& topic = "lockfleet.jobs") {
    notifier::JobProducer producer({.bootstrap = bootstrap, .topic = topic});
    for (const std::string& record : records) {
      std::string key;
      try {
        key = worker::ParseJob(record).lock;
      } catch (const worker::JobError&) {
      }
      producer.Produce(key, record);
    }
    ASSERT_EQ(producer.Flush(seconds(30)), 0u);
  }

  // A worker's config: this test's Redis, `bootstrap`, the group
  // group_ ("jobs-test"), topics_'s kafka settings (the default topics),
  // metrics on a free port; `locks` adds to the locks section.
  std::string WriteConfig(const std::string& bootstrap,
                          const std::string& locks = "") {
    const std::string path = dir_.File("fleet.yaml");
    WriteFile(path, "redis:\n  url: " + server_.url() +
                        "\nkafka:\n  bootstrap: " + bootstrap +
                        "\n  fetch_wait: 1ms\n" + topics_ +
                        "locks:\n  lease: 5s\n" + locks +
                        "worker:\n  threads: 2\n  grace_period: 0\n"
                        "  sources:\n    kafka_jobs: {enabled: true, group: " +
                        group_ + "}\nmetrics:\n  listen: 127.0.0.1:0\n");
    return path;
  }

  void PushDead(const std::string& entry) {
    redis_->Execute({"LPUSH", kDeadKey, entry});
  }
  long long DeadCount() { return redis_->Execute({"LLEN", kDeadKey}).integer; }
  bool Done(const std::string& lock, const std::string& id) {
    return redis_
               ->Execute({"EXISTS", FencedResource::KeyOf("lockfleet", lock,
                                                          {"job", id})})
               .integer == 1;
  }
  static double JobsTotal(CliProcess& worker, const std::string& result) {
    return metrics::SumSamples(ScrapeWorker(worker), "lockfleet_jobs_total",
                               {{"result", result}});
  }

  // `jobs status --json` (plus `extra`), parsed; null if it did not exit 0.
  json Status(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> words = {"status", "--json", "--group", group_};
    words.insert(words.end(), extra.begin(), extra.end());
    const CliResult result = JobsWithKafka(words);
    if (result.status != 0) {
      ADD_FAILURE() << result.status << ": " << result.err;
      return nullptr;
    }
    return json::parse(result.out);
  }
  static int64_t SumOf(const json& status, const char* field) {
    int64_t sum = 0;
    for (const json& p : status["kafka"]["partitions"]) {
      if (p[field].is_number()) sum += p[field].get<int64_t>();
    }
    return sum;
  }

  TempDir dir_;
  RedisServer server_;
  std::shared_ptr<RedisClient> redis_;
  std::unique_ptr<notifier::EmbeddedBroker> broker_;
  std::string group_ = "jobs-test";  // the workers' group (WriteConfig)
  std::string topics_;               // kafka: lines for WriteConfig
};

TEST_F(JobsToolsTest, DeadLettersAWorkerWroteAreListedShownAndRetried) {
  StartBroker();
  worker::SeedStock(*redis_, "lockfleet", "product:1", 5);
  // order-1's lock is held here, so the worker gives up on it after
  // locks.wait; x-1 has no handler; the third record is no job at all.
  const std::string config =
      WriteConfig(broker_->bootstrap(), "  wait: 300ms\n");
  LockClient holder(redis_);
  AcquireResult held = holder.TryAcquire("product:1", {.lease = seconds(60)});
  ASSERT_TRUE(held);
  Produce({worker::EncodeJob(Purchase("order-1", "product:1")),
           R"({"id":"x-1","lock":"misc","type":"no.such.handler"})",
           "not a job\tat all"},
          broker_->bootstrap());
  auto worker = StartWorker(config, "w1");
  ASSERT_TRUE(WaitUntil([&] { return DeadCount() == 3; }, kLong))
      << worker->Stderr();

  const CliResult table = Jobs({"dead", "list"});
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_EQ(
      table.out.rfind("INDEX\tJOB ID\tLOCK\tTYPE\tREASON\tWORKER\tBYTES\n", 0),
      0u)
      << table.out;
  EXPECT_TRUE(Has(table.out,
                  "\torder-1\tproduct:1\tinventory.purchase\tlock "
                  "'product:1' not acquired within 300 ms"))
      << table.out;

  const CliResult listed = Jobs({"dead", "list", "--json"});
  ASSERT_EQ(listed.status, 0) << listed.err;
  const json all = json::parse(listed.out);
  EXPECT_EQ(all["total"], 3);
  ASSERT_EQ(all["dead"].size(), 3u);
  int malformed_index = -1;
  for (const json& d : all["dead"]) {
    EXPECT_EQ(d["worker"], "w1");
    if (d["id"].is_null()) {
      malformed_index = d["index"].get<int>();
      EXPECT_FALSE(d["retryable"].get<bool>());
      EXPECT_TRUE(Has(d["problem"].get<std::string>(), "not a job"));
      EXPECT_TRUE(Has(d["reason"].get<std::string>(), "malformed"));
      EXPECT_EQ(d["record_bytes"], 16);
    } else {
      EXPECT_TRUE(d["retryable"].get<bool>()) << d.dump();
    }
  }
  ASSERT_GE(malformed_index, 0);
  const json newest = json::parse(Jobs({"dead", "list", "--json"}).out);
  EXPECT_EQ(newest["dead"][0]["index"], 0);

  // Filters.
  const json by_reason = json::parse(
      Jobs({"dead", "list", "--json", "--reason", "malformed*"}).out);
  ASSERT_EQ(by_reason["dead"].size(), 1u);
  EXPECT_TRUE(by_reason["dead"][0]["id"].is_null());
  const json by_lock =
      json::parse(Jobs({"dead", "list", "--json", "--lock", "misc"}).out);
  ASSERT_EQ(by_lock["dead"].size(), 1u);
  EXPECT_EQ(by_lock["dead"][0]["id"], "x-1");
  const json limited =
      json::parse(Jobs({"dead", "list", "--json", "--limit", "1"}).out);
  EXPECT_EQ(limited["dead"].size(), 1u);
  EXPECT_TRUE(limited["truncated"].get<bool>());
  const CliResult none = Jobs({"dead", "list", "--reason", "zzz*"});
  EXPECT_EQ(none.status, 1);
  EXPECT_TRUE(Has(none.out, "no dead letters matching")) << none.out;

  // show: in full, as JSON and for a person; by index for the entry
  // without a job id.
  const CliResult shown = Jobs({"dead", "show", "order-1", "--json"});
  ASSERT_EQ(shown.status, 0) << shown.err;
  const json one = json::parse(shown.out)["entries"];
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0]["record"]["id"], "order-1");
  EXPECT_EQ(one[0]["record"]["payload"]["buyer"], "buyer-order-1");
  EXPECT_EQ(one[0]["record_text"],
            worker::EncodeJob(Purchase("order-1", "product:1")));
  EXPECT_TRUE(one[0]["done_marker"].is_null());
  const CliResult person = Jobs({"dead", "show", "order-1"});
  ASSERT_EQ(person.status, 0) << person.err;
  EXPECT_TRUE(Has(person.out,
                  "  done     no: a retry runs it again\n"
                  "  retry    lockfleet jobs dead retry order-1 "
                  "--lock product:1\n"))
      << person.out;
  EXPECT_TRUE(Has(person.out, "\"buyer\": \"buyer-order-1\"")) << person.out;
  const CliResult raw =
      Jobs({"dead", "show", "--index", std::to_string(malformed_index)});
  ASSERT_EQ(raw.status, 0) << raw.err;
  EXPECT_TRUE(Has(raw.out, "retry    not possible: its record is not a job"))
      << raw.out;
  EXPECT_TRUE(Has(raw.out, "not a job\\tat all")) << raw.out;
  const CliResult unknown = Jobs({"dead", "show", "nope"});
  EXPECT_EQ(unknown.status, 1);
  EXPECT_TRUE(Has(unknown.err, "no dead letter with job id 'nope'"))
      << unknown.err;

  // retry: the worker runs it now that the lock is free; exactly that
  // dead letter goes.
  ASSERT_EQ(held.lease.Release(), ReleaseStatus::kReleased);
  const CliResult retried = JobsWithKafka({"dead", "retry", "order-1"});
  ASSERT_EQ(retried.status, 0) << retried.err;
  EXPECT_TRUE(Has(retried.out,
                  "retried job 'order-1' (lock 'product:1'): produced to "
                  "lockfleet.jobs; removed its dead letter"))
      << retried.out;
  EXPECT_EQ(DeadCount(), 2);
  ASSERT_TRUE(WaitUntil([&] { return Done("product:1", "order-1"); }, kLong))
      << worker->Stderr();
  EXPECT_EQ(worker::AuditStock(*redis_, "lockfleet", "product:1").stock, 4);
  // The done marker is written inside the job; the metric counts it after
  // the handler returned, so it may trail the marker by a moment.
  EXPECT_TRUE(WaitUntil([&] { return JobsTotal(*worker, "ok") == 1; }, kLong));

  // --all --dry-run: x-1 would go, the malformed record is left.
  const CliResult dry = JobsWithKafka({"dead", "retry", "--all", "--dry-run"});
  EXPECT_EQ(dry.status, 0) << dry.err;
  EXPECT_TRUE(Has(dry.out, "would retry job 'x-1' (lock 'misc')")) << dry.out;
  EXPECT_TRUE(Has(dry.err, "cannot be retried: its record is not a job"))
      << dry.err;
  EXPECT_EQ(DeadCount(), 2);
  worker->Signal(SIGTERM);
  EXPECT_EQ(worker->Wait(kLong), 0) << worker->Stderr();
}

TEST_F(JobsToolsTest, ARepeatedRetryIsHarmlessTheWorkersSkipTheDuplicate) {
  StartBroker();
  worker::SeedStock(*redis_, "lockfleet", "product:2", 10);
  const std::string entry =
      Entry("lock 'product:2' not acquired within 300 ms (held by x)", "w0",
            worker::EncodeJob(Purchase("order-9", "product:2")));
  PushDead(entry);
  // No worker runs yet. The first retry is acknowledged and its dead
  // letter removed; the same entry back (as after a crash between the two)
  // is produced again: the record is twice on the topic.
  for (int i = 0; i < 2; ++i) {
    if (i == 1) PushDead(entry);
    const CliResult retried = JobsWithKafka({"dead", "retry", "order-9"});
    ASSERT_EQ(retried.status, 0) << retried.err;
    EXPECT_EQ(DeadCount(), 0);
  }
  EXPECT_EQ(SumOf(Status(), "high"), 2);

  auto worker = StartWorker(WriteConfig(broker_->bootstrap()), "w1");
  ASSERT_TRUE(WaitUntil(
      [&] {
        return JobsTotal(*worker, "ok") + JobsTotal(*worker, "duplicate") == 2;
      },
      kLong))
      << worker->Stderr();
  EXPECT_EQ(JobsTotal(*worker, "ok"), 1);
  EXPECT_EQ(JobsTotal(*worker, "duplicate"), 1);
  EXPECT_EQ(worker::AuditStock(*redis_, "lockfleet", "product:2").stock, 9);

  // Once it is done, a retry produces nothing: the stale dead letter goes.
  PushDead(entry);
  const CliResult dry = JobsWithKafka({"dead", "retry", "--dry-run", "--all"});
  EXPECT_EQ(dry.status, 0) << dry.err;
  EXPECT_TRUE(Has(dry.out, "already done (done marker '")) << dry.out;
  EXPECT_TRUE(Has(dry.out, "would remove its dead letter")) << dry.out;
  EXPECT_EQ(DeadCount(), 1);
  const CliResult again = JobsWithKafka({"dead", "retry", "order-9"});
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_TRUE(Has(again.out,
                  "job 'order-9' (lock 'product:2'): already done (done "
                  "marker '"))
      << again.out;
  EXPECT_TRUE(Has(again.out, "not produced")) << again.out;
  EXPECT_TRUE(Has(again.out, "retried 0 jobs")) << again.out;
  EXPECT_EQ(DeadCount(), 0);
  EXPECT_EQ(SumOf(Status(), "high"), 2);
  EXPECT_EQ(worker::AuditStock(*redis_, "lockfleet", "product:2").stock, 9);
  worker->Signal(SIGTERM);
  EXPECT_EQ(worker->Wait(kLong), 0) << worker->Stderr();
}

TEST_F(JobsToolsTest, EntriesThatAreNoJobAreLeftAndPurgeRemovesExactly) {
  // A job whose record was cut at 64 KiB (its payload is large).
  worker::Job big{.id = "big-1", .lock = "product:3", .type = "custom"};
  big.payload["blob"] = {config::Scalar::Type::kString,
                         std::string(70000, 'x')};
  const std::string record = worker::EncodeJob(big);
  const std::string cut = record.substr(0, 64 * 1024) + "... (" +
                          std::to_string(record.size()) + " bytes in all)";
  const std::string big_entry =
      Entry("no handler for type 'custom'", "w1", cut);
  // Tabs in a reason (a lock name quoted) and in a malformed record.
  const std::string tab_entry =
      Entry("lock 'a\tb' not acquired within 300 ms (held by x)", "w2",
            worker::EncodeJob(Sleep("tab-1", "a\tb", 1)));
  const std::string bad_entry =
      Entry("malformed: not JSON", "w3", "garbage\twith\ttabs");
  const std::string keep_entry =
      Entry("failed 3 times; last: boom", "w1",
            worker::EncodeJob(Sleep("keep-1", "k", 1)));
  for (const std::string& e : {big_entry, tab_entry, bad_entry, keep_entry}) {
    PushDead(e);
  }

  const CliResult shown = Jobs({"dead", "show", "big-1", "--json"});
  ASSERT_EQ(shown.status, 0) << shown.err;
  const json big_json = json::parse(shown.out)["entries"][0];
  EXPECT_TRUE(big_json["clipped"].get<bool>());
  EXPECT_EQ(big_json["record_bytes"], record.size());
  EXPECT_EQ(big_json["lock"], "product:3");
  EXPECT_FALSE(big_json["retryable"].get<bool>());
  EXPECT_TRUE(Has(Jobs({"dead", "show", "big-1"}).out,
                  "retry    not possible: its "
                  "record was cut at 64 KiB"));
  const std::string nowhere = "127.0.0.1:" + std::to_string(UnusedTcpPort());
  const CliResult refused =
      Jobs({"dead", "retry", "big-1", "--bootstrap", nowhere});
  EXPECT_EQ(refused.status, 1);
  EXPECT_TRUE(Has(refused.err,
                  "left job 'big-1' (lock 'product:3'): cannot "
                  "be retried: its record was cut at 64 KiB"))
      << refused.err;
  EXPECT_EQ(DeadCount(), 4);

  const json listed = json::parse(Jobs({"dead", "list", "--json"}).out);
  ASSERT_EQ(listed["dead"].size(), 4u);
  EXPECT_EQ(listed["dead"][0]["id"], "keep-1");
  EXPECT_EQ(listed["dead"][1]["worker"], "w3");
  EXPECT_TRUE(listed["dead"][1]["id"].is_null());
  EXPECT_EQ(listed["dead"][2]["id"], "tab-1");
  EXPECT_EQ(listed["dead"][2]["lock"], "a\tb");
  EXPECT_EQ(listed["dead"][2]["worker"], "w2");
  EXPECT_EQ(listed["dead"][2]["reason"],
            "lock 'a\tb' not acquired within 300 ms (held by x)");

  // purge needs ids or --all, never both.
  EXPECT_EQ(Jobs({"dead", "purge"}).status, 2);
  EXPECT_EQ(Jobs({"dead", "purge", "--all", "keep-1"}).status, 2);
  const CliResult dry = Jobs({"dead", "purge", "--all", "--dry-run"});
  EXPECT_EQ(dry.status, 0) << dry.err;
  EXPECT_TRUE(Has(dry.out, "would purge 4 dead letters")) << dry.out;
  EXPECT_EQ(DeadCount(), 4);
  const CliResult unknown = Jobs({"dead", "purge", "nope"});
  EXPECT_EQ(unknown.status, 1);
  EXPECT_TRUE(Has(unknown.err, "no dead letter with job id 'nope'"));

  // By id: exactly that entry (both copies when it is there twice).
  PushDead(keep_entry);
  const CliResult purged = Jobs({"dead", "purge", "keep-1", "big-1"});
  ASSERT_EQ(purged.status, 0) << purged.err;
  EXPECT_TRUE(Has(purged.out, "purged 3 dead letters")) << purged.out;
  const Reply rest = redis_->Execute({"LRANGE", kDeadKey, "0", "-1"});
  ASSERT_EQ(rest.elements.size(), 2u);
  EXPECT_EQ(rest.elements[0].str, bad_entry);
  EXPECT_EQ(rest.elements[1].str, tab_entry);
  const CliResult malformed =
      Jobs({"dead", "purge", "--all", "--reason", "malformed:*"});
  ASSERT_EQ(malformed.status, 0) << malformed.err;
  EXPECT_TRUE(Has(malformed.out, "purged the entry at index 0 (no job id)"))
      << malformed.out;
  EXPECT_EQ(DeadCount(), 1);
  ASSERT_EQ(Jobs({"dead", "purge", "--all"}).status, 0);
  const CliResult empty = Jobs({"dead", "list"});
  EXPECT_EQ(empty.status, 1);
  EXPECT_TRUE(Has(empty.out, "no dead letters in lockfleet:jobs:dead"));
  EXPECT_EQ(Jobs({"dead", "purge", "--all"}).status, 1);
}

TEST_F(JobsToolsTest, StatusShowsLagRunningJobsDeadLettersAndDoneMarkers) {
  StartBroker(/*partitions=*/2);
  // Done markers, with names that need KeyOf's encoding, and keys that
  // only look like markers.
  for (const auto& [lock, id] :
       std::vector<std::pair<std::string, std::string>>{
           {"product:7", "a:b"}, {"x}y", "1}:stock"}, {"plain", "p"}}) {
    redis_->Execute(
        {"SET", FencedResource::KeyOf("lockfleet", lock, {"job", id}), "ok"});
  }
  redis_->Execute(
      {"SET", FencedResource::KeyOf("lockfleet", "plain", {"job", "p", "x"}),
       "1"});
  redis_->Execute(
      {"SET", FencedResource::KeyOf("lockfleet", "plain", {"stock"}), "1"});
  redis_->Execute(
      {"SET", FencedResource::KeyOf("other", "plain", {"job", "p"}), "ok"});
  PushDead(Entry("failed 3 times; last: boom", "w1",
                 worker::EncodeJob(Sleep("d-1", "l", 1))));
  PushDead(Entry("failed 3 times; last: boom", "w1",
                 worker::EncodeJob(Sleep("d-2", "l", 1))));
  std::vector<std::string> records;
  for (int i = 0; i < 6; ++i) {
    records.push_back(worker::EncodeJob(
        Sleep("s-" + std::to_string(i), "lock-" + std::to_string(i), 1)));
  }
  Produce(records, broker_->bootstrap());

  // Nothing consumed yet: the whole topic is the lag.
  json status = Status();
  ASSERT_EQ(status["kafka"]["partitions"].size(), 2u) << status.dump();
  EXPECT_EQ(SumOf(status, "high"), 6);
  EXPECT_EQ(SumOf(status, "lag"), 6);
  EXPECT_EQ(status["kafka"]["lag"], 6);
  for (const json& p : status["kafka"]["partitions"]) {
    EXPECT_TRUE(p["committed"].is_null()) << p.dump();
  }
  EXPECT_TRUE(status["kafka"]["group_state"].is_string() ||
              status["kafka"]["group_error"].is_string());
  EXPECT_EQ(status["dead_letters"], 2);
  EXPECT_EQ(status["done_markers"]["count"], 3);
  EXPECT_TRUE(status["done_markers"]["exact"].get<bool>());
  EXPECT_TRUE(status["running_jobs"].is_null());
  const CliResult text = JobsWithKafka({"status", "--group", "jobs-test"});
  ASSERT_EQ(text.status, 0) << text.err;
  for (const char* line :
       {"jobs topic   lockfleet.jobs at ", "PARTITION\tCOMMITTED\tEND\tLAG",
        "lag          6 records\n", "running jobs unknown: no metrics targets",
        "dead letters 2 (lockfleet:jobs:dead)\n", "done markers 3 (exact"}) {
    EXPECT_TRUE(Has(text.out, line)) << line << " in\n" << text.out;
  }
  // A bound on the scan: a lower bound, said so.
  const CliResult bounded =
      JobsWithKafka({"status", "--group", "jobs-test", "--scan-limit", "1"});
  EXPECT_EQ(bounded.status, 0);
  EXPECT_TRUE(Has(bounded.out, "done markers ")) << bounded.out;

  // A worker consumes everything: no lag, every offset committed.
  auto worker = StartWorker(WriteConfig(broker_->bootstrap()), "w1");
  const std::string metrics =
      "127.0.0.1:" + std::to_string(WorkerMetricsPort(*worker));
  ASSERT_TRUE(WaitUntil(
      [&] {
        const json s = Status();
        return s.is_object() && s["kafka"]["lag"] == 0;
      },
      kLong))
      << worker->Stderr();
  status = Status({"--metrics", metrics});
  EXPECT_EQ(SumOf(status, "committed"), 6);
  EXPECT_EQ(status["done_markers"]["count"], 9);
  EXPECT_EQ(status["running_jobs"], 0);
  ASSERT_EQ(status["workers"].size(), 1u);
  EXPECT_TRUE(status["workers"][0]["ok"].get<bool>());

  // A long job: running, and its record is not committed.
  Produce({worker::EncodeJob(Sleep("long-1", "long", 120000))},
          broker_->bootstrap());
  ASSERT_TRUE(WaitUntil(
      [&] {
        const json s = Status({"--metrics", metrics});
        return s.is_object() && s["running_jobs"] == 1;
      },
      kLong))
      << worker->Stderr();
  status = Status({"--metrics", metrics});
  EXPECT_EQ(status["kafka"]["lag"], 1);
  EXPECT_EQ(SumOf(status, "high"), 7);
  const CliResult running =
      JobsWithKafka({"status", "--group", "jobs-test", "--metrics", metrics});
  EXPECT_TRUE(Has(running.out, "running jobs 1 (1 of 1 workers answered)"))
      << running.out;

  // A worker that does not answer: running jobs unknown, still exit 0.
  const std::string gone = "127.0.0.1:" + std::to_string(UnusedTcpPort());
  const CliResult silent =
      JobsWithKafka({"status", "--group", "jobs-test", "--metrics", gone});
  EXPECT_EQ(silent.status, 0) << silent.err;
  EXPECT_TRUE(Has(silent.out,
                  "running jobs unknown: no worker's /metrics "
                  "answered"))
      << silent.out;
  worker->Signal(SIGTERM);
  EXPECT_EQ(worker->Wait(kLong), 0) << worker->Stderr();
}

TEST_F(JobsToolsTest, BadArgumentsGiveOneLineAndStatus2) {
  PushDead(Entry("failed 3 times; last: boom", "w1",
                 worker::EncodeJob(Sleep("d-1", "l", 1))));
  const std::string nowhere = "127.0.0.1:" + std::to_string(UnusedTcpPort());
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"dead", "list", "--reason", "a["}, "a '[' is never closed"},
      {{"dead", "list", "--reason", "x\\"}, "ends with a lone"},
      {{"dead", "list", "--limit", "0"}, "--limit 0: must be 1..10000"},
      {{"dead", "list", "--lock", ""}, "--lock: must not be empty"},
      {{"dead", "show"}, "give a job ID, or --index N"},
      {{"dead", "show", "d-1", "--index", "0"}, "give a job ID, or --index N"},
      {{"dead", "show", "--index", "-1"}, "must be >= 0"},
      {{"dead", "retry", "--bootstrap", nowhere}, "give the job IDs to retry"},
      {{"dead", "retry", "d-1", "--all", "--bootstrap", nowhere},
       "give the job IDs to retry"},
      {{"dead", "retry", "d-1"}, "no jobs topic to retry to"},
      {{"dead", "retry", "d-1", "--bootstrap", "host:99999"}, "--bootstrap"},
      {{"dead", "retry", "d-1", "--bootstrap", nowhere, "--timeout", "0"},
       "--timeout 0"},
      {{"dead", "purge"}, "give the job IDs to purge"},
      {{"status", "--metrics", "nonsense"}, "--metrics 'nonsense'"},
      {{"status", "--timeout", "0"}, "--timeout 0"},
      {{"dead", "frobnicate"}, ""},
      {{"dead"}, ""},
  };
  for (const auto& [words, message] : cases) {
    const CliResult result = Jobs(words);
    EXPECT_EQ(result.status, 2) << words[1] << ": " << result.err;
    EXPECT_TRUE(Has(result.err, message)) << result.err;
    EXPECT_TRUE(Has(result.err, "lockfleet: ")) << result.err;
  }
  EXPECT_EQ(DeadCount(), 1);  // nothing was touched

  const std::string config = dir_.File("bad.yaml");
  WriteFile(config, "redis:\n  urll: x\n");
  const CliResult bad =
      RunCli({"jobs", "dead", "list", "--config", config}, Env());
  EXPECT_EQ(bad.status, 2);
  EXPECT_TRUE(Has(bad.err, config + ":2:")) << bad.err;
}

TEST_F(JobsToolsTest, UnreachableServersExit69WithOneClearLine) {
  PushDead(Entry("failed 3 times; last: boom", "w1",
                 worker::EncodeJob(Sleep("d-1", "l", 1))));
  const std::string port = std::to_string(UnusedTcpPort());
  const std::string url = "redis://:s3cret-pw@127.0.0.1:" + port;
  const std::string nowhere = "127.0.0.1:" + std::to_string(UnusedTcpPort());
  for (const std::vector<std::string>& words :
       {std::vector<std::string>{"dead", "list"},
        {"dead", "show", "d-1"},
        {"dead", "retry", "d-1", "--bootstrap", nowhere},
        {"dead", "purge", "d-1"},
        {"status"}}) {
    std::vector<std::string> args = {"jobs"};
    args.insert(args.end(), words.begin(), words.end());
    args.insert(args.end(), {"--redis", url});
    const CliResult result = RunCli(args, Env());
    EXPECT_EQ(result.status, 69) << words[1] << ": " << result.err;
    EXPECT_TRUE(Has(result.err, "127.0.0.1:" + port)) << result.err;
    EXPECT_TRUE(Has(result.err, "from --redis")) << result.err;
    EXPECT_FALSE(Has(result.err + result.out, "s3cret-pw")) << result.err;
  }
  // A wrong password is no better, and not printed either.
  RedisServer locked({.tcp = true, .requirepass = "right-pw"});
  const CliResult refused =
      RunCli({"jobs", "dead", "list", "--redis",
              "redis://:wrong-pw@127.0.0.1:" + std::to_string(locked.port())},
             Env());
  EXPECT_EQ(refused.status, 69) << refused.err;
  EXPECT_FALSE(Has(refused.err, "wrong-pw")) << refused.err;

  // Kafka down: status says what it could read, retry leaves the entry.
  const CliResult status =
      Jobs({"status", "--bootstrap", nowhere, "--timeout", "2"});
  EXPECT_EQ(status.status, 69);
  EXPECT_TRUE(Has(status.err, "lockfleet: Kafka at " + nowhere)) << status.err;
  EXPECT_TRUE(Has(status.out, "dead letters 1 (lockfleet:jobs:dead)"))
      << status.out;
  const CliResult retry =
      Jobs({"dead", "retry", "d-1", "--bootstrap", nowhere, "--timeout", "2"});
  EXPECT_EQ(retry.status, 69);
  EXPECT_TRUE(Has(retry.err, "1 of 1 jobs not acknowledged by Kafka at " +
                                 nowhere + " (from --bootstrap) within 2s"))
      << retry.err;
  EXPECT_EQ(DeadCount(), 1);
}

TEST_F(JobsToolsTest, TheDeploymentConfigAndARunningDemoAreFound) {
  // --config: its key prefix and its Kafka.
  redis_->Execute({"LPUSH", "team-a:jobs:dead",
                   Entry("failed 3 times; last: boom", "w1",
                         worker::EncodeJob(Sleep("t-1", "l", 1)))});
  const std::string nowhere = "127.0.0.1:" + std::to_string(UnusedTcpPort());
  const std::string config = dir_.File("team.yaml");
  WriteFile(config, "redis:\n  url: " + server_.url() +
                        "\n  key_prefix: team-a\nkafka:\n  bootstrap: " +
                        nowhere + "\n");
  const CliResult listed =
      RunCli({"jobs", "dead", "list", "--config", config, "--json"}, Env());
  ASSERT_EQ(listed.status, 0) << listed.err;
  EXPECT_EQ(json::parse(listed.out)["dead"][0]["id"], "t-1");
  const CliResult retry = RunCli(
      {"jobs", "dead", "retry", "t-1", "--config", config, "--timeout", "1"},
      Env());
  EXPECT_EQ(retry.status, 69);
  EXPECT_TRUE(Has(retry.err, "(from " + config + ": kafka.bootstrap)"))
      << retry.err;
  // Without the config the prefix is the default one: nothing there.
  EXPECT_EQ(Jobs({"dead", "list"}).status, 1);

  // No flags at all: a running demo's config (registered by `lockfleet
  // demo`; this process stands in for it).
  const std::string registry = dir_.File("lockfleet-demo");
  WriteFile(registry, std::to_string(getpid()) + "\n" + config + "\n");
  ASSERT_EQ(chmod(registry.c_str(), 0600), 0);
  const CliResult found = RunCli({"jobs", "dead", "list", "--json"}, Env());
  ASSERT_EQ(found.status, 0) << found.err;
  EXPECT_EQ(json::parse(found.out)["dead"][0]["id"], "t-1");
}

// On the ctest run's shared broker (support/real_kafka.h): topics and a
// group of the test's own, the topics created first (the jobs topic with 2
// partitions), as an operator does.
TEST_F(JobsToolsTest, StatusOnARealKafkaNamesTheGroupMembersAndOwners) {
  LOCKFLEET_SKIP_UNLESS_REAL_KAFKA();
  const std::unique_ptr<RealKafka> kafka = RealKafka::Shared();
  const std::string jobs_topic = RealKafka::UniqueName("lockfleet.jobs");
  const std::string unlock_topic = RealKafka::UniqueName("lockfleet.unlock");
  group_ = RealKafka::UniqueName("jobs-test");
  topics_ = "  jobs_topic: " + jobs_topic +
            "\n  unlock_topic: " + unlock_topic + "\n";
  ASSERT_EQ(CreateKafkaTopic(kafka->bootstrap(), jobs_topic, 2), "");
  ASSERT_EQ(CreateKafkaTopic(kafka->bootstrap(), unlock_topic, 3), "");
  std::vector<std::string> records;
  for (int i = 0; i < 4; ++i) {
    records.push_back(worker::EncodeJob(
        Sleep("r-" + std::to_string(i), "lock-" + std::to_string(i), 1)));
  }
  Produce(records, kafka->bootstrap(), jobs_topic);
  auto worker = StartWorker(WriteConfig(kafka->bootstrap()), "w1");
  json status;
  ASSERT_TRUE(WaitUntil(
      [&] {
        const CliResult r =
            Jobs({"status", "--json", "--bootstrap", kafka->bootstrap(),
                  "--topic", jobs_topic, "--group", group_});
        if (r.status != 0) return false;
        status = json::parse(r.out);
        return status["kafka"]["lag"] == 0 &&
               status["kafka"]["group_state"] == "Stable" &&
               status["kafka"]["members"].size() == 1 &&
               status["kafka"]["members"][0]["partitions"].size() == 2;
      },
      kLong))
      << status.dump() << "\n"
      << worker->Stderr();
  const std::string member = status["kafka"]["members"][0]["member_id"];
  for (const json& p : status["kafka"]["partitions"]) {
    EXPECT_EQ(p["owner"], member) << p.dump();
  }
  EXPECT_EQ(SumOf(status, "committed"), 4);
  worker->Signal(SIGTERM);
  EXPECT_EQ(worker->Wait(kLong), 0) << worker->Stderr();
}

}  // namespace
}  // namespace lockfleet::testing
