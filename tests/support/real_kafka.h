// RealKafka: a private Apache Kafka broker for a test, started with
// kafka-local (../shared/kafka, see its README: Kafka 2.1.1 and ZooKeeper,
// needs `java`). A real broker long-polls, has a real group coordinator and
// enforces group.min.session.timeout.ms = 6 s — what librdkafka's mock
// cluster (`lockfleet broker`) does not.
//
// Where kafka-local is: $LOCKFLEET_KAFKA_LOCAL, else the path CMake found
// (LOCKFLEET_KAFKA_LOCAL_DEFAULT: ../shared/kafka/kafka-local beside the
// source tree). A test (or its SetUp) says LOCKFLEET_SKIP_UNLESS_REAL_KAFKA()
// first: without it (or without java) the test is skipped, with the reason,
// unless $LOCKFLEET_REQUIRE_REAL_KAFKA=1, which makes that a failure.
//
// Thread-safety: none; one test thread uses it.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

// Skips the calling test (fails it, with $LOCKFLEET_REQUIRE_REAL_KAFKA=1)
// where no real broker can run; returns from the calling function then.
#define LOCKFLEET_SKIP_UNLESS_REAL_KAFKA()                  \
  do {                                                      \
    if (const std::string lockfleet_why_ =                  \
            ::lockfleet::testing::RealKafka::Unavailable(); \
        !lockfleet_why_.empty()) {                          \
      if (::lockfleet::testing::RealKafka::Required())      \
        FAIL() << lockfleet_why_;                           \
      GTEST_SKIP() << lockfleet_why_;                       \
    }                                                       \
  } while (false)

namespace lockfleet::testing {

class RealKafka {
 public:
  // The kafka-local script, or "" when there is none (or no java).
  static std::string Script() {
    std::string path;
    if (const char* env = std::getenv("LOCKFLEET_KAFKA_LOCAL"); env && *env) {
      path = env;
    } else {
#ifdef LOCKFLEET_KAFKA_LOCAL_DEFAULT
      path = LOCKFLEET_KAFKA_LOCAL_DEFAULT;
#endif
    }
    if (path.empty() || access(path.c_str(), X_OK) != 0) return "";
    if (std::system("command -v java >/dev/null 2>&1") != 0) return "";
    return path;
  }

  // Why a test cannot run here, or "" when it can.
  static std::string Unavailable() {
    if (!Script().empty()) return "";
    return "no real Kafka broker: kafka-local (../shared/kafka, or "
           "$LOCKFLEET_KAFKA_LOCAL) or java is missing";
  }

  static bool Required() {
    const char* env = std::getenv("LOCKFLEET_REQUIRE_REAL_KAFKA");
    return env != nullptr && std::string(env) == "1";
  }

  // Starts a broker with `settings` ("key=value", passed as --set). Throws
  // std::runtime_error with the tail of kafka-local's output on failure.
  explicit RealKafka(const std::vector<std::string>& settings = {}) {
    const std::string script = Script();
    if (script.empty()) throw std::runtime_error(Unavailable());
    char tmpl[] = "/tmp/lockfleet-kafka-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    stop_ = "'" + script + "' stop --data '" + dir_ + "/data'";
    std::string command = "'" + script + "' start --data '" + dir_ + "/data'";
    for (const std::string& setting : settings) {
      command += " --set '" + setting + "'";
    }
    command += " >'" + dir_ + "/start.out' 2>&1";
    if (std::system(command.c_str()) != 0) {
      std::string output;
      std::ifstream in(dir_ + "/start.out");
      for (std::string line; std::getline(in, line);) output += line + "\n";
      Stop();
      throw std::runtime_error("kafka-local start failed:\n" + output);
    }
    std::ifstream in(dir_ + "/data/run/bootstrap");
    std::getline(in, bootstrap_);
    if (bootstrap_.rfind("bootstrap: ", 0) == 0) bootstrap_.erase(0, 11);
  }

  ~RealKafka() { Stop(); }
  RealKafka(const RealKafka&) = delete;
  RealKafka& operator=(const RealKafka&) = delete;

  const std::string& bootstrap() const { return bootstrap_; }

 private:
  void Stop() {
    if (dir_.empty()) return;
    const std::string command = stop_ + " >/dev/null 2>&1";
    [[maybe_unused]] const int status = std::system(command.c_str());
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
    dir_.clear();
  }

  std::string dir_;
  std::string stop_;
  std::string bootstrap_;
};

}  // namespace lockfleet::testing
