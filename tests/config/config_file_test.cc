// LoadFile: files that cannot be read, and every config file the repository
// ships.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config_test_util.h"
#include "lockfleet/config/config.h"

namespace lockfleet::config {
namespace {

namespace fs = std::filesystem;

class ConfigFileTest : public lockfleet::config::testing::TempDirTest {
 protected:
  // The errors LoadFile reports, as lines.
  static std::vector<std::string> LoadErrors(const std::string& path) {
    std::vector<std::string> lines;
    try {
      LoadFile(path, testing::WithEnv({}));
    } catch (const ConfigErrors& e) {
      for (const Diagnostic& error : e.errors()) {
        lines.push_back(error.ToString());
      }
    }
    return lines;
  }
};

TEST_F(ConfigFileTest, LoadsAValidFile) {
  const std::string path = Write("ok.yaml", "redis: {url: redis://h:1}\n");
  EXPECT_EQ(LoadFile(path, testing::WithEnv({})).redis.url, "redis://h:1");
}

TEST_F(ConfigFileTest, MissingFile) {
  const std::string path = (dir_ / "absent.yaml").string();
  EXPECT_EQ(LoadErrors(path),
            std::vector<std::string>{
                path + ": cannot read: No such file or directory"});
}

TEST_F(ConfigFileTest, Directory) {
  EXPECT_EQ(LoadErrors(dir_.string()),
            std::vector<std::string>{
                dir_.string() +
                ": cannot read: it is a directory, expected a YAML file"});
}

TEST_F(ConfigFileTest, EmptyFile) {
  const std::string path = Write("empty.yaml", "");
  EXPECT_EQ(
      LoadErrors(path),
      std::vector<std::string>{
          path + ":1:1: expected a mapping with at least redis.url, found an "
                 "empty file (see 'lockfleet config example')"});
}

TEST_F(ConfigFileTest, NotYaml) {
  const std::string path = Write("bad.yaml", "redis: {url: [\n");
  const std::vector<std::string> errors = LoadErrors(path);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].rfind(path + ":2:1: invalid YAML: ", 0), 0u) << errors[0];
}

TEST_F(ConfigFileTest, BinaryFile) {
  const std::string path = Write("a.out", std::string("\x7f"
                                                      "ELF\x02\x01\x01\0\0\0",
                                                      10));
  EXPECT_EQ(LoadErrors(path),
            std::vector<std::string>{
                path + ":1:8: expected a YAML text file, found a NUL byte (a "
                       "binary file?)"});
}

TEST_F(ConfigFileTest, ErrorsNameThePathAsGiven) {
  const std::string path = Write("typo.yaml",
                                 "redis:\n  url: redis://h\n  "
                                 "pool: 2\n");
  EXPECT_EQ(LoadErrors(path),
            std::vector<std::string>{
                path + ":3:3: redis.pool: unknown key; did you mean "
                       "'pool_size'?"});
}

// Every lockfleet config the repository ships under deploy/ or config/ must
// load. A lockfleet config is a file named exactly lockfleet.yaml or
// lockfleet.yml (one per deployment directory: deploy/compose/,
// deploy/systemd/, ...); the other YAML there (compose, Kubernetes,
// Prometheus, Grafana) is not one, and other names that start with
// "lockfleet" (lockfleet.rules.yaml) are not either. deploy/README.md states
// the rule, and tests/deploy checks that no file with a top-level `redis:`
// escapes it, and checks the config embedded in the Kubernetes ConfigMap.
// They are loaded with an empty environment, so give each ${VAR} a default
// (${KAFKA_USER:-}) — `lockfleet config check` in CI then works on them.
TEST(ShippedConfigsTest, AllLoad) {
  const fs::path root = LOCKFLEET_SOURCE_DIR;
  std::vector<fs::path> files;
  for (const char* dir : {"deploy", "config"}) {
    if (!fs::is_directory(root / dir)) continue;
    for (const fs::directory_entry& entry :
         fs::recursive_directory_iterator(root / dir)) {
      const std::string name = entry.path().filename().string();
      if (entry.is_regular_file() &&
          (name == "lockfleet.yaml" || name == "lockfleet.yml")) {
        files.push_back(entry.path());
      }
    }
  }
  if (files.empty()) {
    GTEST_SKIP() << "no lockfleet.yaml under deploy/ or config/";
  }
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.string());
    try {
      LoadFile(file.string(), testing::WithEnv({}));
    } catch (const ConfigErrors& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

}  // namespace
}  // namespace lockfleet::config
