// deploy/systemd: the unit agrees with the config it starts the worker with
// and with the environment file that carries the secrets.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "deploy_test_util.h"

namespace lockfleet::deploy_test {
namespace {

fs::path SystemdDir() { return DeployDir() / "systemd"; }

// "[Section]" → key → values in order (a key may repeat).
using Unit =
    std::map<std::string, std::map<std::string, std::vector<std::string>>>;

Unit ParseUnit(const fs::path& file) {
  Unit unit;
  std::string section;
  std::istringstream lines(ReadText(file));
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      section = line.substr(1, line.size() - 2);
      continue;
    }
    const size_t equals = line.find('=');
    if (equals == std::string::npos) continue;
    unit[section][line.substr(0, equals)].push_back(line.substr(equals + 1));
  }
  return unit;
}

std::vector<std::string> Words(const std::string& text) {
  std::istringstream stream(text);
  std::vector<std::string> words;
  for (std::string word; stream >> word;) words.push_back(word);
  return words;
}

class SystemdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    unit_ = ParseUnit(SystemdDir() / "lockfleet-worker.service");
    service_ = unit_["Service"];
    ASSERT_EQ(service_["ExecStart"].size(), 1u);
    config_path_ = ArgumentOf(Words(service_["ExecStart"][0]), "--config");
    ASSERT_FALSE(config_path_.empty()) << "ExecStart has no --config";
    // Installed from the file of the same name beside the unit.
    config_file_ = SystemdDir() / config_path_.filename();
    ASSERT_TRUE(fs::is_regular_file(config_file_)) << config_file_;
    config_ = LoadLockfleetConfig(config_file_);
  }

  std::string Only(const std::string& key) {
    const std::vector<std::string>& values = service_[key];
    return values.size() == 1 ? values[0] : "";
  }

  Unit unit_;
  std::map<std::string, std::vector<std::string>> service_;
  fs::path config_path_;
  fs::path config_file_;
  config::Config config_;
};

TEST_F(SystemdTest, StartsTheWorkerWithAShippedConfig) {
  EXPECT_TRUE(IsLockfleetConfigName(config_file_)) << config_file_;
  const std::vector<std::string> start = Words(service_["ExecStart"][0]);
  ASSERT_GE(start.size(), 2u);
  EXPECT_TRUE(start[0].ends_with("/lockfleet")) << start[0];
  EXPECT_EQ(start[1], "worker");
  // The pre-start check reads the same file.
  EXPECT_EQ(Only("ExecStartPre"),
            start[0] + " config check " + config_path_.string());
}

TEST_F(SystemdTest, StopsGracefullyWithinTimeoutStopSec) {
  EXPECT_EQ(Only("KillSignal"), "SIGTERM");
  const std::string timeout = Only("TimeoutStopSec");
  ASSERT_FALSE(timeout.empty()) << "the default (90s) is not stated";
  EXPECT_GT(ParseTimeSpan(timeout), MinimumStopTimeout(config_))
      << "TimeoutStopSec=" << timeout << ", worker.grace_period "
      << config_.worker.grace_period.count() << " ms";
  // A bad config (exit 2) is not retried in a loop.
  EXPECT_NE(Only("RestartPreventExitStatus").find('2'), std::string::npos);
}

// The worker speaks sd_notify (tests/cli/worker_test.cc,
// UnderSystemdItNotifiesReadyPingsTheWatchdogAndStops): the unit listens to
// it, and its watchdog leaves room for a loaded host (pings every half).
TEST_F(SystemdTest, WaitsForReadyAndWatchesTheWorker) {
  EXPECT_EQ(Only("Type"), "notify");
  EXPECT_EQ(Only("NotifyAccess"), "main");
  const std::string watchdog = Only("WatchdogSec");
  ASSERT_FALSE(watchdog.empty());
  EXPECT_GE(ParseTimeSpan(watchdog), std::chrono::seconds(10)) << watchdog;
  // A watchdog kill is a failure, so Restart= must bring the worker back.
  EXPECT_TRUE(Only("Restart") == "on-failure" || Only("Restart") == "always" ||
              Only("Restart") == "on-watchdog");
}

// Every ${VAR} of the config is set by the EnvironmentFile, shipped beside
// the unit with the same name.
TEST_F(SystemdTest, EnvironmentFileProvidesEveryConfigVariable) {
  std::string file = Only("EnvironmentFile");
  ASSERT_FALSE(file.empty());
  if (file.starts_with("-")) file.erase(0, 1);
  const fs::path shipped = SystemdDir() / fs::path(file).filename();
  ASSERT_TRUE(fs::is_regular_file(shipped)) << shipped;
  std::set<std::string> defined;
  std::istringstream lines(ReadText(shipped));
  for (std::string line; std::getline(lines, line);) {
    const size_t equals = line.find('=');
    if (line.empty() || line[0] == '#' || equals == std::string::npos) continue;
    defined.insert(line.substr(0, equals));
  }
  for (const std::string& name : ReferencedVariables(LoadYaml(config_file_))) {
    EXPECT_TRUE(defined.contains(name)) << name << " is not in " << shipped;
  }
}

TEST_F(SystemdTest, IsHardened) {
  for (const auto& [key, value] : std::map<std::string, std::string>{
           {"NoNewPrivileges", "yes"},
           {"ProtectSystem", "strict"},
           {"ProtectHome", "yes"},
           {"PrivateTmp", "yes"},
           {"CapabilityBoundingSet", ""},
       }) {
    ASSERT_EQ(service_[key].size(), 1u) << key;
    EXPECT_EQ(service_[key][0], value) << key;
  }
  // Not root: a dynamic or a named user.
  EXPECT_TRUE(Only("DynamicUser") == "yes" ||
              (!Only("User").empty() && Only("User") != "root"));
}

}  // namespace
}  // namespace lockfleet::deploy_test
