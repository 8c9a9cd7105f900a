// RealKafka: an Apache Kafka broker for a test, run by kafka-local
// (../shared/kafka, see its README: Kafka 2.1.1 and ZooKeeper, needs
// `java`). A real broker long-polls, has a real group coordinator and
// enforces group.min.session.timeout.ms = 6 s — what librdkafka's mock
// cluster (`lockfleet broker`) does not.
//
// Two kinds:
//   RealKafka::Shared()   the broker of the whole ctest run: the ctest
//                         fixture real_kafka (tests/CMakeLists.txt,
//                         support/shared_kafka.sh) starts one and hands its
//                         kafka-local data directory to the tests that
//                         require it in $LOCKFLEET_SHARED_KAFKA. Without it
//                         (the test binary run by hand, or the fixture's
//                         broker did not start) a private broker with the
//                         same settings stands in. A test on it names its
//                         topics and groups with UniqueName (tests run
//                         against it two at a time, and again with ctest
//                         --repeat), creates its topics with the partitions
//                         it wants (support/kafka_admin.h) rather than
//                         relying on auto-creation's num.partitions, and
//                         changes no broker setting. Starting a broker
//                         costs two JVMs some 5 CPU seconds, 40-50 s of a
//                         test's time on a loaded 2-core CI machine.
//   RealKafka(settings)   a private broker, started here and stopped by the
//                         destructor: for a test that sets broker settings,
//                         loads the broker heavily, or stops it.
//
// Where kafka-local is: $LOCKFLEET_KAFKA_LOCAL, else the path CMake found
// (LOCKFLEET_KAFKA_LOCAL_DEFAULT: ../shared/kafka/kafka-local beside the
// source tree). A test (or its SetUp) says LOCKFLEET_SKIP_UNLESS_REAL_KAFKA()
// first: without it (or without java) the test is skipped, with the reason,
// unless $LOCKFLEET_REQUIRE_REAL_KAFKA=1, which makes that a failure. With
// $LOCKFLEET_NO_REAL_KAFKA=1 (scripts/test.sh's sanitizer stages) it is
// skipped in any case.
//
// Thread-safety: none; one test thread uses it.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
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
    if (Off()) {
      return "real-broker tests are off ($LOCKFLEET_NO_REAL_KAFKA=1, as in "
             "scripts/test.sh's sanitizer stages)";
    }
    if (!Script().empty()) return "";
    return "no real Kafka broker: kafka-local (../shared/kafka, or "
           "$LOCKFLEET_KAFKA_LOCAL) or java is missing";
  }

  // $LOCKFLEET_REQUIRE_REAL_KAFKA=1 (and not Off()): a missing broker is a
  // failure, not a skip.
  static bool Required() {
    const char* env = std::getenv("LOCKFLEET_REQUIRE_REAL_KAFKA");
    return env != nullptr && std::string(env) == "1" && !Off();
  }

  // $LOCKFLEET_NO_REAL_KAFKA=1: the real-broker tests skip.
  static bool Off() {
    const char* env = std::getenv("LOCKFLEET_NO_REAL_KAFKA");
    return env != nullptr && std::string(env) == "1";
  }

  // The shared broker's settings (support/shared_kafka.sh starts it with
  // them): one partition for __consumer_offsets makes a group's first join
  // about 1 s faster. Kafka's defaults otherwise (num.partitions=1,
  // group.min.session.timeout.ms=6000, ...).
  static std::vector<std::string> SharedSettings() {
    return {"offsets.topic.num.partitions=1"};
  }

  // The ctest run's broker, or a private stand-in (see the top of this
  // file). Throws as the constructor does when the stand-in fails to start.
  static std::unique_ptr<RealKafka> Shared() {
    if (const char* dir = std::getenv("LOCKFLEET_SHARED_KAFKA");
        dir != nullptr && *dir != '\0') {
      std::string bootstrap;
      std::ifstream in(std::string(dir) + "/run/bootstrap");
      std::getline(in, bootstrap);
      if (bootstrap.rfind("bootstrap: ", 0) == 0) bootstrap.erase(0, 11);
      if (!bootstrap.empty() && Listens(bootstrap)) {
        return std::unique_ptr<RealKafka>(new RealKafka(Attached{bootstrap}));
      }
      std::cerr << "[real_kafka] no shared broker answers in " << dir
                << " (see the output of ctest's SharedKafka.Start):"
                   " starting a private one\n";
    }
    return std::make_unique<RealKafka>(SharedSettings());
  }

  // `prefix` + "." + a random part: a topic or group name of the caller's
  // own on a shared broker ([a-zA-Z0-9._-], as Kafka wants).
  static std::string UniqueName(const std::string& prefix) {
    static const char kDigits[] = "0123456789abcdef";
    std::random_device random;
    std::string name = prefix + "." + std::to_string(getpid()) + ".";
    for (int i = 0; i < 8; ++i) name += kDigits[random() % 16];
    return name;
  }

  // Starts a private broker with `settings` ("key=value", passed as --set).
  // Throws std::runtime_error with the tail of kafka-local's output on
  // failure.
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
  struct Attached {
    std::string bootstrap;
  };
  // The shared broker: not started here, not stopped by the destructor.
  explicit RealKafka(Attached attached)
      : bootstrap_(std::move(attached.bootstrap)) {}

  // Something accepts connections at "127.0.0.1:PORT".
  static bool Listens(const std::string& bootstrap) {
    const size_t colon = bootstrap.rfind(':');
    if (colon == std::string::npos) return false;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port =
        htons(static_cast<uint16_t>(std::atoi(bootstrap.c_str() + colon + 1)));
    if (inet_pton(AF_INET, bootstrap.substr(0, colon).c_str(),
                  &addr.sin_addr) != 1) {
      return false;
    }
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    const bool ok =
        connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
    return ok;
  }

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
