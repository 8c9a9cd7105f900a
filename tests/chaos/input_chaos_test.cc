// Chaos scenario 6: bad input (docs/RELIABILITY.md). Garbage, oversized
// and invalid records on the unlock and jobs topics while real workers run;
// lock names that are empty, 1 MB, binary, or full of braces and spaces;
// broken config files; abusive command lines. Each must get a clear error
// or a counted drop — never a crash, a hang or a corrupted lock.
//
// Config files: empty, not YAML, binary and mistyped files are covered one
// level down by tests/config (config_file_test.cc: EmptyFile, NotYaml,
// BinaryFile; config_cli_test.cc: CheckMissingEmptyAndNonYamlFiles,
// CheckPrintsEveryErrorAndExits2); here the same files go through both
// `lockfleet config check` and `lockfleet worker --config`, end to end.
// The decoders themselves are fuzzed by fuzz/ (scripts/fuzz.sh).
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chaos/worker_fleet.h"
#include "lockfleet/lockcore/error.h"
#include "lockfleet/lockcore/lock_client.h"

namespace lockfleet::testing {
namespace {

using std::chrono::seconds;

// A process that died by a signal (crash, abort, sanitizer) or did not end.
bool Crashed(int status) { return status < 0 || status >= 128; }

const char kJobsWorker[] = R"(worker:
  threads: 2
  grace_period: 5s
  sources:
    kafka_jobs: {enabled: true, group: input-chaos}
)";

class InputChaosTest : public WorkerFleet {};

// Every kind of bad unlock record is dropped and counted under its reason;
// valid events before and after are consumed; the worker keeps running.
TEST_F(InputChaosTest, GarbageOnTheUnlockTopicIsCountedByReason) {
  auto worker = StartWorker(WriteConfig(kJobsWorker), "w");
  // The notifier reads from the end: wait until it has its partition.
  ASSERT_TRUE(WaitUntil(
      [&] { return Metric(*worker, "lockfleet_kafka_consumer_assigned") >= 1; },
      kChaosLong))
      << worker->Stderr();
  const std::string valid =
      R"({"v":1,"lock":"chaos:valid","client":"another-process"})";
  const std::map<std::string, std::vector<std::string>> garbage{
      {"not_json",
       {"", "not json", std::string("\xff\xfe\x00\x01", 4), "{\"v\":1,",
        std::string(8000, '[')}},  // deep, unterminated nesting
      {"not_object", {"[1,2,3]", "\"a string\"", "42", "null"}},
      {"wrong_version",
       {"{}", R"({"v":2,"lock":"x"})", R"({"v":"1","lock":"x"})",
        R"({"v":1.0,"lock":"x"})"}},
      {"missing_field", {R"({"v":1})", R"({"v":1,"owner":"o"})"}},
      {"bad_field",
       {R"({"v":1,"lock":""})", R"({"v":1,"lock":5})",
        R"({"v":1,"lock_hex":"zz"})", R"({"v":1,"lock_hex":"abc"})",
        R"({"v":1,"lock":"x","cause":"boom"})",
        R"({"v":1,"lock":"x","fence":"1"})",
        R"({"v":1,"lock":"x","fence":1.5})"}},
      {"too_large",
       {std::string(20000, ' '), std::string(2 * 1024 * 1024, 'x'),
        R"({"v":1,"lock":")" + std::string(17000, 'a') + "\"}"}},
  };
  std::vector<std::pair<std::string, std::string>> records{{"k", valid}};
  size_t bad = 0;
  for (const auto& [reason, values] : garbage) {
    for (const std::string& value : values) {
      records.emplace_back(reason, value);
      ++bad;
    }
  }
  records.emplace_back("k", valid);
  ProduceRaw("lockfleet.unlock", records);

  ASSERT_TRUE(WaitUntil(
      [&] {
        return Metric(*worker, "lockfleet_unlock_events_malformed_total") >=
                   static_cast<double>(bad) &&
               Metric(*worker, "lockfleet_unlock_events_consumed_total") >= 2;
      },
      kChaosLong))
      << worker->Stderr();
  std::cout << "[chaos] unlock topic:";
  for (const auto& [reason, values] : garbage) {
    const double counted =
        Metric(*worker, "lockfleet_unlock_events_malformed_total",
               {{"reason", reason}});
    EXPECT_EQ(counted, static_cast<double>(values.size())) << reason;
    std::cout << " " << reason << "=" << counted;
  }
  std::cout << "\n";
  EXPECT_EQ(Metric(*worker, "lockfleet_unlock_events_malformed_total"),
            static_cast<double>(bad));

  // Still serving jobs.
  const worker::Job after = Sleep("after-garbage", "after", 10);
  Produce({after});
  EXPECT_TRUE(WaitUntil([&] { return Done(after); }, kChaosLong))
      << worker->Stderr();
  ASSERT_TRUE(worker->Running());
  worker->Signal(SIGTERM);
  EXPECT_EQ(worker->Wait(kChaosLong), 0) << worker->Stderr();
}

// Bad job records are dead-lettered and counted as failed, one each; the
// valid jobs between them — odd but legal lock names included — run; no
// lock is left behind and no key outside lockfleet's own is written.
TEST_F(InputChaosTest, GarbageOnTheJobsTopicIsDeadLetteredAndCounted) {
  auto worker = StartWorker(WriteConfig(kJobsWorker), "w");
  const std::vector<std::string> bad_records{
      "",
      "not json",
      std::string("\xff\xfe\x00\x01", 4),
      std::string(8000, '['),
      "[]",
      "{}",
      R"({"id":"a"})",
      R"({"id":"a","lock":"l","type":5})",
      R"({"id":"","lock":"l","type":"sleep"})",
      R"({"id":")" + std::string(300, 'i') + R"(","lock":"l","type":"sleep"})",
      R"({"id":"a","lock":")" + std::string(2000, 'l') + R"(","type":"sleep"})",
      R"({"id":"a","lock":"l","type":"sleep","payload":{"n":{"x":1}}})",
      R"({"id":"a","lock":"l","type":"sleep","payload":[1]})",
      R"({"id":"a","lock":"l","type":"no.such.handler"})",
      // 2 MB: not JSON (a truncated object) and far over any sane job.
      R"({"id":"big","lock":"l","type":"sleep","payload":{"pad":")" +
          std::string(2 * 1024 * 1024, 'x'),
  };
  const std::vector<worker::Job> good{
      Sleep("braces", "a b {c} }{ d", 10),
      Sleep("binary", std::string("nul\0ff\xc3\xbf", 8), 10),
      Sleep("long-name", std::string(1024, 'n'), 10),
      Sleep("plain", "plain", 10),
  };
  std::vector<std::pair<std::string, std::string>> records;
  for (size_t i = 0; i < bad_records.size(); ++i) {
    records.emplace_back("bad", bad_records[i]);
    if (i < good.size()) {
      records.emplace_back(good[i].lock, worker::EncodeJob(good[i]));
    }
  }
  ProduceRaw("lockfleet.jobs", records);

  const auto all_good_done = [&] {
    for (const worker::Job& job : good) {
      if (!Done(job)) return false;
    }
    return true;
  };
  ASSERT_TRUE(WaitUntil(
      [&] {
        return all_good_done() &&
               DeadLetters() == static_cast<long long>(bad_records.size());
      },
      kChaosLong))
      << "dead letters " << DeadLetters() << "\n"
      << worker->Stderr().substr(0, 20000);
  // Counted just after the job's marker: wait for it.
  EXPECT_TRUE(WaitUntil(
      [&] {
        return Jobs(*worker, "failed") ==
               static_cast<double>(bad_records.size());
      },
      kChaosLong))
      << Jobs(*worker, "failed");
  EXPECT_TRUE(WaitUntil(
      [&] { return Jobs(*worker, "ok") == static_cast<double>(good.size()); },
      kChaosLong))
      << Jobs(*worker, "ok");
  std::cout << "[chaos] jobs topic: " << bad_records.size()
            << " bad records dead-lettered and counted failed, " << good.size()
            << " valid jobs done\n";

  // Each dead letter names why, and none is larger than the cap on what a
  // worker keeps of a bad record.
  const Reply letters =
      redis_->Execute({"LRANGE", "lockfleet:jobs:dead", "0", "-1"});
  for (const Reply& letter : letters.elements) {
    EXPECT_LT(letter.str.size(), 70u * 1024) << letter.str.substr(0, 200);
    EXPECT_TRUE(letter.str.rfind("malformed: ", 0) == 0 ||
                letter.str.rfind("no handler for type", 0) == 0)
        << letter.str.substr(0, 200);
  }
  // No lock left held (a job's lock is released just after its done
  // marker is written: wait for that), no stray key: every key is
  // lockfleet's.
  const auto held = [&] {
    std::vector<std::string> locks;
    for (const std::string& key : AllKeys()) {
      if (key.size() > 5 && key.substr(key.size() - 5) == ":lock" &&
          key.find(":res:{") == std::string::npos) {
        locks.push_back(key);
      }
    }
    return locks;
  };
  EXPECT_TRUE(WaitUntil([&] { return held().empty(); }, kChaosLong))
      << "lock left held: " << held().front();
  for (const std::string& key : AllKeys()) {
    EXPECT_EQ(key.rfind("lockfleet:", 0), 0u) << key;
  }
  ASSERT_TRUE(worker->Running());
  worker->Signal(SIGTERM);
  EXPECT_EQ(worker->Wait(kChaosLong), 0) << worker->Stderr();
}

// Through the library: bad names are refused with kInvalidArgument before
// Redis sees them; odd names that are legal lock and release exactly, under
// their own keys, and leave nothing held.
TEST_F(InputChaosTest, OddLockNamesThroughTheLibrary) {
  LockClient locks(redis_);
  for (const std::string& name :
       {std::string(), std::string(1024 * 1024, 'x'), std::string(1025, 'x'),
        std::string("}{"), std::string("}")}) {  // '}' first: no hash tag
    try {
      locks.TryAcquire(name);
      ADD_FAILURE() << name.size() << "-byte name accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    }
  }
  EXPECT_TRUE(AllKeys().empty());  // refused before any write

  const std::vector<std::string> names{
      std::string("nul\0byte\xff\xfe", 10),
      "{}",
      "a}{",
      "{a}{b}",
      " { spaced } ",
      "*?[glob]",
      std::string(1024, '{'),
  };
  for (const std::string& name : names) {
    AcquireResult got = locks.TryAcquire(name);
    ASSERT_TRUE(got) << name.size();
    Lease lease = std::move(got.lease);
    const std::string key = "lockfleet:{" + name + "}:lock";
    EXPECT_EQ(redis_->Execute({"EXISTS", key}).integer, 1) << name.size();
    EXPECT_TRUE(locks.Inspect(name).locked);
    // Another owner is refused: one holder per name, binary names too.
    LockClient other(redis_);
    EXPECT_FALSE(other.TryAcquire(name)) << name.size();
    lease.Release();
    EXPECT_EQ(redis_->Execute({"EXISTS", key}).integer, 0) << name.size();
    EXPECT_FALSE(locks.Inspect(name).locked);
  }
  // Similar names stay distinct locks.
  AcquireResult a = locks.TryAcquire("x");
  AcquireResult b = LockClient(redis_).TryAcquire("x ");
  AcquireResult c = LockClient(redis_).TryAcquire(std::string("x\0", 2));
  EXPECT_TRUE(a && b && c);
}

// Through `lockfleet lock`: the same names as arguments (argv cannot carry
// a NUL, and one argument is at most 128 KiB).
TEST_F(InputChaosTest, OddLockNamesThroughTheCli) {
  const std::vector<std::string> env{"LOCKFLEET_REDIS=" + server_.url()};
  const CliResult empty = RunCli({"lock", "", "--", "true"}, env);
  EXPECT_EQ(empty.status, 2) << empty.err;
  EXPECT_NE(empty.err.find("must not be empty"), std::string::npos)
      << empty.err;
  const CliResult huge =
      RunCli({"lock", std::string(100 * 1024, 'x'), "--", "true"}, env);
  EXPECT_EQ(huge.status, 2) << huge.err.substr(0, 500);
  EXPECT_NE(huge.err.find("the limit is 1024"), std::string::npos)
      << huge.err.substr(0, 500);
  EXPECT_LT(huge.err.size(), 4096u) << "the error should not echo 100 KiB";
  for (const std::string& name :
       {std::string("\xff\xfe binary"), std::string("{a} }{ b"),
        std::string(" spaced ")}) {
    const CliResult result = RunCli(
        {"lock", name, "--", "sh", "-c", "test -n \"$LOCKFLEET_FENCE\""}, env);
    EXPECT_EQ(result.status, 0) << result.err;
    EXPECT_FALSE(LockClient(redis_).Inspect(name).locked);
  }
}

// Empty, non-YAML, binary and mistyped config files: `config check` and
// `worker --config` both exit 2 naming FILE:LINE:COL; neither crashes.
TEST_F(InputChaosTest, BrokenConfigFilesAreUsageErrorsWithPositions) {
  const std::map<std::string, std::pair<std::string, std::string>> files{
      // name -> (content, expected "FILE:LINE:COL: ..." fragment)
      {"empty.yaml", {"", "empty.yaml:1:1:"}},
      {"not-yaml.yaml", {"redis: [unclosed\n  url: x\n", "not-yaml.yaml:"}},
      {"binary.yaml",
       {std::string("\x7f"
                    "ELF\x00\x01\xff",
                    7),
        "binary.yaml:"}},
      {"mistyped.yaml",
       {"redis:\n  url: " + server_.url() +
            "\nworker:\n  threads: four\n  grace_period: -1s\n",
        "mistyped.yaml:4:12: worker.threads"}},
      {"deep.yaml", {std::string(5000, '[') + "\n", "deep.yaml:"}},
      {"list.yaml", {"- a\n- b\n", "list.yaml:1:1:"}},
  };
  for (const auto& [name, spec] : files) {
    const std::string path = dir_.File(name);
    WriteFile(path, spec.first);
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"config", "check", path},
          std::vector<std::string>{"worker", "--config", path}}) {
      const CliResult result = RunCli(args, {}, seconds(30));
      EXPECT_EQ(result.status, 2)
          << args[0] << " " << name << ": " << result.err;
      EXPECT_NE(result.err.find(spec.second), std::string::npos)
          << args[0] << " " << name << ": " << result.err;
    }
  }
}

// Abusive arguments: exit 2 with a message, never a crash or a hang.
TEST_F(InputChaosTest, AbusiveArgumentsAreUsageErrors) {
  const std::string big(100 * 1024, '9');
  const std::string not_utf8("\xc3\x28\xff\xfe");
  const std::vector<std::string> env{"LOCKFLEET_REDIS=" + server_.url()};
  const std::vector<std::vector<std::string>> cases{
      {"--no-such-flag"},
      {"no-such-subcommand"},
      {not_utf8},
      {"lock", "--wait", "99999999999999999999s", "x", "--", "true"},
      {"lock", "--wait", "-5s", "x", "--", "true"},
      {"lock", "--lease", "0", "x", "--", "true"},
      {"lock", "--lease", big, "x", "--", "true"},
      {"lock", "--park-cap", "-1ms", "x", "--", "true"},
      {"lock", "--kill-after", not_utf8, "x", "--", "true"},
      {"lock", "--redis", not_utf8, "x", "--", "true"},
      {"lock", "--bogus", "x", "--", "true"},
      {"lock", "x", "--"},
      {"jobs", "produce", "--bootstrap", "127.0.0.1:1", "--flash-sale", "-1"},
      {"jobs", "produce", "--bootstrap", "127.0.0.1:1", "--flash-sale", big},
      {"jobs", "produce", "--bootstrap", "127.0.0.1:1", "--flash-sale",
       "99999999999999999999"},
      {"jobs", "produce", "--bootstrap", "127.0.0.1:1", "--flash-sale",
       "2000000000"},
      {"jobs", "produce", "--bootstrap", "127.0.0.1:1", "--flash-sale", "10",
       "--products", "0"},
      {"jobs", "produce", "--bootstrap", "127.0.0.1:1", "--timeout", "-3",
       "--flash-sale", "1"},
      {"demo", "--workers", "100000"},
      {"demo", "--workers", "-1"},
      {"demo", "--jobs", big},
      {"broker", "--port", "99999"},
      {"broker", "--port", "-1"},
      {"broker", "--partitions", "0"},
      {"broker", "--partitions", "1000000000"},
      {"worker", "--config", dir_.File(big.substr(0, 4000))},
      {"worker", "--config", dir_.File("missing.yaml"), "--metrics-listen",
       not_utf8},
      {"worker"},
      {"config", "check", std::string(100 * 1024, 'f')},
      {"config", "no-such-verb"},
  };
  int usage_errors = 0;
  for (const std::vector<std::string>& args : cases) {
    std::string shown;
    for (const std::string& arg : args) {
      shown += (shown.empty() ? "" : " ") + arg.substr(0, 40);
    }
    const CliResult result = RunCli(args, env, seconds(30));
    EXPECT_FALSE(Crashed(result.status))
        << shown << ": status " << result.status << "\n"
        << result.err.substr(0, 2000);
    EXPECT_EQ(result.status, 2) << shown << "\n" << result.err.substr(0, 2000);
    EXPECT_FALSE(result.err.empty()) << shown;
    usage_errors += result.status == 2 ? 1 : 0;
  }
  std::cout << "[chaos] abusive arguments: " << usage_errors << " of "
            << cases.size() << " exit 2 with a message\n";
}

}  // namespace
}  // namespace lockfleet::testing
