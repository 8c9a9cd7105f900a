// `lockfleet config check` and `lockfleet config example`, run as a child
// process: output streams and exit statuses. No servers.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "config_test_util.h"

namespace {

namespace fs = std::filesystem;

struct Result {
  int status = -1;  // exit status
  std::string out;
  std::string err;
};

class ConfigCliTest : public lockfleet::config::testing::TempDirTest {
 protected:
  static std::string Read(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream content;
    content << in.rdbuf();
    return content.str();
  }

  // Runs `lockfleet ARGS` through /bin/sh (ARGS are shell words), with an
  // empty environment apart from `env` (e.g. "A=1 B=2").
  Result Run(const std::string& args, const std::string& env = "") {
    const fs::path out = dir_ / "stdout";
    const fs::path err = dir_ / "stderr";
    const std::string command = "env -i " + env + " '" + LOCKFLEET_CLI_PATH +
                                "' " + args + " >'" + out.string() + "' 2>'" +
                                err.string() + "'";
    const int raw = std::system(command.c_str());
    Result result;
    result.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    result.out = Read(out);
    result.err = Read(err);
    return result;
  }
};

TEST_F(ConfigCliTest, CheckValidFilePrintsOk) {
  const std::string path = Write("ok.yaml", "redis: {url: redis://h:1}\n");
  const Result result = Run("config check '" + path + "'");
  EXPECT_EQ(result.status, 0) << result.err;
  EXPECT_EQ(result.out, "ok\n");
  EXPECT_EQ(result.err, "");
}

// The password leak of issue 15: a bad Redis URL's message repeated the URL
// as given, password included, from `config check` and from every command
// that takes --redis or $LOCKFLEET_REDIS.
TEST_F(ConfigCliTest, BadRedisUrlsNeverPrintThePassword) {
  const std::string path =
      Write("pw.yaml", "redis: {url: \"redis://u:s3cret@h:x\"}\n");
  Result result = Run("config check '" + path + "'");
  EXPECT_EQ(result.status, 2);
  EXPECT_NE(result.err.find("'redis://u:***@h:x'"), std::string::npos)
      << result.err;
  EXPECT_EQ(result.err.find("s3cret"), std::string::npos) << result.err;

  result = Run("lock --redis 'redis://u:s3cret@h:x' name -- true");
  EXPECT_EQ(result.status, 2);
  EXPECT_NE(result.err.find("invalid Redis URL 'redis://u:***@h:x'"),
            std::string::npos)
      << result.err;
  EXPECT_EQ(result.err.find("s3cret"), std::string::npos) << result.err;

  result = Run("lock name -- true", "LOCKFLEET_REDIS='u:s3cret@h:6379'");
  EXPECT_EQ(result.status, 2);
  EXPECT_NE(result.err.find("u:***@h:6379"), std::string::npos) << result.err;
  EXPECT_EQ(result.err.find("s3cret"), std::string::npos) << result.err;
}

TEST_F(ConfigCliTest, CheckPrintsEveryErrorAndExits2) {
  const std::string path = Write("bad.yaml",
                                 "redis:\n"
                                 "  pool_size: 0\n"
                                 "  comand_timeout: 2s\n");
  const Result result = Run("config check '" + path + "'");
  EXPECT_EQ(result.status, 2);
  EXPECT_EQ(result.out, "");
  EXPECT_EQ(
      result.err,
      path +
          ":1:1: redis.url: missing required key; expected a Redis URL: "
          "redis://[[user]:password@]host[:port][/db], rediss://... (TLS), "
          "unix:///path/to.sock[?db=N], "
          "redis+sentinel://host[:port][,host[:port]...]/master[/db] or "
          "redis+cluster://host[:port][,host[:port]...]\n" +
          path +
          ":2:14: redis.pool_size: expected an integer from 1 to 1024, "
          "found '0'\n" +
          path +
          ":3:3: redis.comand_timeout: unknown key; did you mean "
          "'command_timeout'?\n");
}

TEST_F(ConfigCliTest, CheckRejectsABadCatchUp) {
  const std::string path = Write("catch_up.yaml",
                                 "redis: {url: redis://h:1}\n"
                                 "worker:\n"
                                 "  sources:\n"
                                 "    schedules:\n"
                                 "      - name: tick\n"
                                 "        every: 1s\n"
                                 "        catch_up: -2\n"
                                 "        handler: sleep\n");
  const Result result = Run("config check '" + path + "'");
  EXPECT_EQ(result.status, 2);
  EXPECT_EQ(result.err, path +
                            ":7:19: worker.sources.schedules[0].catch_up: "
                            "expected an integer from 0 to 1000, found '-2'\n");
}

TEST_F(ConfigCliTest, CheckRejectsAnUnknownLockMode) {
  const std::string path = Write("lock_mode.yaml",
                                 "redis: {url: redis://h:1}\n"
                                 "worker:\n"
                                 "  sources:\n"
                                 "    schedules:\n"
                                 "      - name: rebuild\n"
                                 "        every: 1h\n"
                                 "        lock_mode: sideways\n"
                                 "        handler: sleep\n");
  const Result result = Run("config check '" + path + "'");
  EXPECT_EQ(result.status, 2);
  EXPECT_EQ(result.err, path +
                            ":7:20: worker.sources.schedules[0].lock_mode: "
                            "expected one of read, write, found 'sideways'\n");
  const std::string good = Write("write.yaml",
                                 "redis: {url: redis://h:1}\n"
                                 "worker:\n"
                                 "  sources:\n"
                                 "    schedules:\n"
                                 "      - {name: rebuild, every: 1h, "
                                 "lock_mode: write, handler: sleep}\n");
  EXPECT_EQ(Run("config check '" + good + "'").status, 0);
}

TEST_F(ConfigCliTest, CheckUsesTheEnvironment) {
  const std::string path = Write("env.yaml", "redis: {url: \"${URL}\"}\n");
  EXPECT_EQ(Run("config check '" + path + "'", "URL=redis://h").status, 0);
  const Result unset = Run("config check '" + path + "'");
  EXPECT_EQ(unset.status, 2);
  EXPECT_NE(unset.err.find("environment variable URL is not set"),
            std::string::npos)
      << unset.err;
}

TEST_F(ConfigCliTest, CheckReadsTheEventKeyAndNeverPrintsIt) {
  const std::string path = Write("keyed.yaml",
                                 "redis: {url: redis://h:1}\n"
                                 "kafka:\n"
                                 "  bootstrap: k:9092\n"
                                 "  event_key_env: LOCKFLEET_EVENT_KEY\n");
  const std::string key = "config-check-SECRET-0123456789";
  const Result ok =
      Run("config check '" + path + "'", "LOCKFLEET_EVENT_KEY=" + key);
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_EQ(ok.out, "ok\n");
  EXPECT_EQ(ok.err, "");

  const Result unset = Run("config check '" + path + "'");
  EXPECT_EQ(unset.status, 2);
  EXPECT_EQ(unset.err, path +
                           ":4:18: kafka.event_key_env: environment variable "
                           "LOCKFLEET_EVENT_KEY (the event key) is not set\n");

  const Result short_key =
      Run("config check '" + path + "'", "LOCKFLEET_EVENT_KEY=short-SECRET");
  EXPECT_EQ(short_key.status, 2);
  EXPECT_EQ(short_key.err.rfind(path + ":4:18: kafka.event_key_env: the event "
                                       "key on line 1 of environment variable "
                                       "LOCKFLEET_EVENT_KEY has 12 bytes",
                                0),
            0u)
      << short_key.err;
  EXPECT_EQ(short_key.err.find("SECRET"), std::string::npos) << short_key.err;
  EXPECT_EQ(short_key.out, "");
}

TEST_F(ConfigCliTest, CheckMissingEmptyAndNonYamlFiles) {
  const std::string missing = (dir_ / "absent.yaml").string();
  Result result = Run("config check '" + missing + "'");
  EXPECT_EQ(result.status, 2);
  EXPECT_EQ(result.err, missing + ": cannot read: No such file or directory\n");

  const std::string empty = Write("empty.yaml", "");
  result = Run("config check '" + empty + "'");
  EXPECT_EQ(result.status, 2);
  EXPECT_EQ(result.err.rfind(empty + ":1:1: expected a mapping", 0), 0u)
      << result.err;

  const std::string broken = Write("broken.yaml", "redis: [\n");
  result = Run("config check '" + broken + "'");
  EXPECT_EQ(result.status, 2);
  EXPECT_NE(result.err.find(": invalid YAML: "), std::string::npos)
      << result.err;
}

TEST_F(ConfigCliTest, CheckWithoutFileIsAUsageError) {
  const Result result = Run("config check");
  EXPECT_EQ(result.status, 2);
  EXPECT_NE(result.err.find("FILE"), std::string::npos) << result.err;
}

TEST_F(ConfigCliTest, ExamplePassesCheck) {
  const Result example = Run("config example");
  EXPECT_EQ(example.status, 0) << example.err;
  EXPECT_NE(example.out.find("redis:"), std::string::npos);
  const std::string path = Write("example.yaml", example.out);
  const Result check = Run("config check '" + path + "'");
  EXPECT_EQ(check.status, 0) << check.err;
  EXPECT_EQ(check.out, "ok\n");
}

TEST_F(ConfigCliTest, CheckReadsStandardInput) {
  const std::string path = Write("in.yaml", "redis: {url: 5}\n");
  const Result result = Run("config check - <'" + path + "'");
  EXPECT_EQ(result.status, 2);
  EXPECT_EQ(
      result.err.rfind("<stdin>:1:14: redis.url: expected a Redis URL", 0), 0u)
      << result.err;
}

}  // namespace
