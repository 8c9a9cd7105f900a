// kafka.event_key_env / kafka.event_key_file: the keys are read from the
// environment or a file when the config is loaded; every mistake is an error
// at its FILE:LINE:COLUMN, and no message ever shows a key.
#include "lockfleet/config/event_keys.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config_test_util.h"
#include "lockfleet/config/config.h"

namespace lockfleet::config {
namespace {

using testing::Env;
using testing::Errors;
using testing::Load;
using testing::OnlyError;

const std::string kKey = "k3y-0123456789abcdef-SECRET";
const std::string kOldKey = "old-0123456789abcdef-SECRET";
const std::string kShort = "short-SECRET";  // 12 bytes

std::string Kafka(const std::string& lines) {
  return "redis: {url: redis://h:1}\nkafka:\n  bootstrap: k:9092\n" + lines;
}

// `error` names no key (nor the short one).
void ExpectNoKeyIn(const std::string& text) {
  for (const std::string& key : {kKey, kOldKey, kShort}) {
    EXPECT_EQ(text.find(key), std::string::npos) << text;
  }
}

TEST(EventKeysTest, NoneByDefault) {
  const Config config = Load(Kafka(""));
  EXPECT_TRUE(config.kafka->event_keys.empty());
  EXPECT_EQ(config.kafka->event_key_env, "");
  EXPECT_EQ(config.kafka->event_key_file, "");
  // "" is none too, so a deployment can make it optional with ${VAR:-}.
  EXPECT_TRUE(Load(Kafka("  event_key_env: \"\"\n  event_key_file: "
                         "\"${KEY_FILE:-}\"\n"))
                  .kafka->event_keys.empty());
}

TEST(EventKeysTest, FromTheEnvironment) {
  const Config config = Load(Kafka("  event_key_env: LOCKFLEET_EVENT_KEY\n"),
                             {{"LOCKFLEET_EVENT_KEY", kKey}});
  EXPECT_EQ(config.kafka->event_keys, std::vector<std::string>{kKey});
  EXPECT_EQ(config.kafka->event_key_env, "LOCKFLEET_EVENT_KEY");
}

TEST(EventKeysTest, OneKeyPerLineFirstSigns) {
  const Config config =
      Load(Kafka("  event_key_env: K\n"),
           {{"K", "\n  " + kKey + " \r\n\t" + kOldKey + "\n\n"}});
  EXPECT_EQ(config.kafka->event_keys,
            (std::vector<std::string>{kKey, kOldKey}));
}

TEST(EventKeysTest, TooShortKey) {
  const Diagnostic error =
      OnlyError(Kafka("  event_key_env: K\n"), {{"K", kKey + "\n" + kShort}});
  EXPECT_EQ(error.ToString(),
            "c.yaml:4:18: kafka.event_key_env: the event key on line 2 of "
            "environment variable K has 12 bytes; expected at least 16 (e.g. "
            "the output of 'openssl rand -base64 32')");
  ExpectNoKeyIn(error.ToString());
}

TEST(EventKeysTest, EmptySecret) {
  const Diagnostic error =
      OnlyError(Kafka("  event_key_env: K\n"), {{"K", " \n"}});
  EXPECT_EQ(error.ToString(),
            "c.yaml:4:18: kafka.event_key_env: environment variable K holds "
            "no event key; expected one key per line, at least 16 bytes each");
}

TEST(EventKeysTest, MissingVariable) {
  const Diagnostic error =
      OnlyError(Kafka("  event_key_env: LOCKFLEET_EVENT_KEY\n"));
  EXPECT_EQ(error.ToString(),
            "c.yaml:4:18: kafka.event_key_env: environment variable "
            "LOCKFLEET_EVENT_KEY (the event key) is not set");
}

TEST(EventKeysTest, AValueThatIsNoVariableNameIsNotRepeated) {
  // Someone pasted the key where its variable's name goes.
  const std::string pasted = "k3y/0123456789+abcdef=SECRET";
  const Diagnostic error =
      OnlyError(Kafka("  event_key_env: " + pasted + "\n"));
  EXPECT_EQ(error.line, 4);
  EXPECT_EQ(error.path, "kafka.event_key_env");
  EXPECT_NE(error.message.find("expected the name of the environment"),
            std::string::npos)
      << error.message;
  EXPECT_EQ(error.ToString().find("SECRET"), std::string::npos)
      << error.ToString();
}

TEST(EventKeysTest, TheKeyItselfIsRefusedAndNotRepeated) {
  const Diagnostic error = OnlyError(Kafka("  event_key: " + kKey + "\n"));
  EXPECT_EQ(error.ToString(),
            "c.yaml:4:3: kafka.event_key: the event key itself never goes in "
            "the config file; name where to read it: event_key_env: VARIABLE "
            "or event_key_file: PATH");
}

TEST(EventKeysTest, NotBoth) {
  const Diagnostic error =
      OnlyError(Kafka("  event_key_env: K\n  event_key_file: /run/secrets/k\n"),
                {{"K", kKey}});
  EXPECT_EQ(error.ToString(),
            "c.yaml:5:19: kafka.event_key_file: expected event_key_env or "
            "event_key_file, not both (event_key_env is given)");
}

TEST(EventKeysTest, EveryErrorIsFreeOfKeys) {
  const std::vector<std::pair<std::string, Env>> cases{
      {"  event_key_env: K\n", {{"K", kShort}}},
      {"  event_key_env: K\n", {{"K", kKey + "\n" + kShort}}},
      {"  event_key: " + kKey + "\n", {}},
      {"  event_key: \"${K}\"\n", {{"K", kKey}}},
      {"  event_key_env: K\n  event_key_file: /x\n", {{"K", kKey}}},
      {"  event_key_env: [" + kKey + "]\n", {}},
  };
  for (const auto& [yaml, env] : cases) {
    try {
      LoadString(Kafka(yaml), "c.yaml", testing::WithEnv(env));
      ADD_FAILURE() << "loaded: " << yaml;
    } catch (const ConfigErrors& e) {
      SCOPED_TRACE(yaml);
      ExpectNoKeyIn(e.what());
    }
  }
}

class EventKeyFileTest : public testing::TempDirTest {};

TEST_F(EventKeyFileTest, FromAFile) {
  const std::string path = Write("key", kKey + "\n" + kOldKey + "\n");
  const Config config = Load(Kafka("  event_key_file: " + path + "\n"));
  EXPECT_EQ(config.kafka->event_keys,
            (std::vector<std::string>{kKey, kOldKey}));
  EXPECT_EQ(config.kafka->event_key_file, path);
}

TEST_F(EventKeyFileTest, MissingFile) {
  const std::string path = (dir_ / "absent").string();
  const Diagnostic error = OnlyError(Kafka("  event_key_file: " + path + "\n"));
  EXPECT_EQ(error.ToString(),
            "c.yaml:4:19: kafka.event_key_file: cannot read the event key "
            "file '" +
                path + "': No such file or directory");
}

TEST_F(EventKeyFileTest, Directory) {
  const Diagnostic error =
      OnlyError(Kafka("  event_key_file: " + dir_.string() + "\n"));
  EXPECT_EQ(error.message, "cannot read the event key file '" + dir_.string() +
                               "': it is a directory");
}

TEST_F(EventKeyFileTest, ShortKeyInAFile) {
  const std::string path = Write("key", kShort + "\n");
  const Diagnostic error = OnlyError(Kafka("  event_key_file: " + path + "\n"));
  EXPECT_EQ(error.ToString(),
            "c.yaml:4:19: kafka.event_key_file: the event key on line 1 of the "
            "event key file '" +
                path +
                "' has 12 bytes; expected at least 16 (e.g. the output of "
                "'openssl rand -base64 32')");
  ExpectNoKeyIn(error.ToString());
}

TEST_F(EventKeyFileTest, OversizedFile) {
  const std::string path =
      Write("big", std::string(kMaxEventKeyFileBytes + 1, 'k'));
  const Diagnostic error = OnlyError(Kafka("  event_key_file: " + path + "\n"));
  EXPECT_EQ(error.message, "cannot read the event key file '" + path +
                               "': larger than 64 KiB; expected one key per "
                               "line");
}

TEST_F(EventKeyFileTest, ErrorsOfLoadFileAreFreeOfKeys) {
  const std::string key_path = Write("key", kShort);
  const std::string config_path =
      Write("c.yaml", Kafka("  event_key_file: " + key_path + "\n"));
  try {
    LoadFile(config_path, testing::WithEnv({}));
    FAIL() << "loaded a short key";
  } catch (const ConfigErrors& e) {
    ExpectNoKeyIn(e.what());
    EXPECT_EQ(e.errors().at(0).line, 4);
  }
}

TEST(EventKeysFunctionsTest, ParseEventKeys) {
  EXPECT_EQ(ParseEventKeys(kKey, "x"), std::vector<std::string>{kKey});
  EXPECT_EQ(ParseEventKeys(std::string(kMinEventKeyBytes, 'k'), "x").size(),
            1u);
  EXPECT_THROW(ParseEventKeys(std::string(kMinEventKeyBytes - 1, 'k'), "x"),
               ConfigError);
  EXPECT_THROW(ParseEventKeys("", "x"), ConfigError);
}

TEST(EventKeysFunctionsTest, VariableNames) {
  EXPECT_TRUE(IsEnvironmentVariableName("LOCKFLEET_EVENT_KEY"));
  EXPECT_TRUE(IsEnvironmentVariableName("_k1"));
  EXPECT_FALSE(IsEnvironmentVariableName(""));
  EXPECT_FALSE(IsEnvironmentVariableName("1K"));
  EXPECT_FALSE(IsEnvironmentVariableName("A-B"));
  EXPECT_FALSE(IsEnvironmentVariableName("$A"));
}

}  // namespace
}  // namespace lockfleet::config
