#include "deploy_test_util.h"

#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace lockfleet::deploy_test {

fs::path SourceDir() { return LOCKFLEET_SOURCE_DIR; }

fs::path DeployDir() { return SourceDir() / "deploy"; }

std::vector<fs::path> FilesUnder(const fs::path& dir,
                                 const std::vector<std::string>& extensions) {
  std::vector<fs::path> files;
  if (!fs::is_directory(dir)) return files;
  for (const fs::directory_entry& entry :
       fs::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    const std::string extension = entry.path().extension().string();
    for (const std::string& wanted : extensions) {
      if (extension == wanted) {
        files.push_back(entry.path());
        break;
      }
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

bool IsLockfleetConfigName(const fs::path& path) {
  const std::string name = path.filename().string();
  return name == "lockfleet.yaml" || name == "lockfleet.yml";
}

std::string ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<YAML::Node> LoadYamlDocuments(const fs::path& path) {
  return YAML::LoadAll(ReadText(path));
}

YAML::Node LoadYaml(const fs::path& path) {
  std::vector<YAML::Node> documents = LoadYamlDocuments(path);
  if (documents.size() != 1) {
    throw std::runtime_error(path.string() + ": expected one YAML document, " +
                             "found " + std::to_string(documents.size()));
  }
  return documents[0];
}

namespace {

config::LoadOptions EmptyEnvironment() {
  config::LoadOptions options;
  options.env = [](const std::string&) -> std::optional<std::string> {
    return std::nullopt;
  };
  return options;
}

}  // namespace

config::Config LoadLockfleetConfig(const fs::path& path) {
  return config::LoadFile(path.string(), EmptyEnvironment());
}

config::Config LoadLockfleetConfigText(std::string_view text,
                                       std::string_view name) {
  return config::LoadString(text, name, EmptyEnvironment());
}

ShellResult ConfigCheck(const fs::path& path) {
  return RunShell("env -i " + ShellQuote(LOCKFLEET_CLI_PATH) +
                  " config check " + ShellQuote(path.string()));
}

TempFile::TempFile(const std::string& name, std::string_view content) {
  const ::testing::TestInfo* test =
      ::testing::UnitTest::GetInstance()->current_test_info();
  path_ = fs::path(::testing::TempDir()) /
          ("lockfleet_deploy_" + std::string(test ? test->name() : "test") +
           "_" + name);
  std::ofstream(path_, std::ios::binary) << content;
}

TempFile::~TempFile() {
  std::error_code ignored;
  fs::remove(path_, ignored);
}

std::string ListenHost(std::string_view listen) {
  const size_t colon = listen.rfind(':');
  return std::string(colon == std::string_view::npos ? listen
                                                     : listen.substr(0, colon));
}

int ListenPort(std::string_view listen) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == listen.size()) return -1;
  int port = 0;
  for (char c : listen.substr(colon + 1)) {
    if (!std::isdigit(static_cast<unsigned char>(c)) || port > 65535) {
      return -1;
    }
    port = port * 10 + (c - '0');
  }
  return port;
}

std::chrono::milliseconds ParseTimeSpan(std::string_view text) {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  const auto bad = [&] {
    return std::invalid_argument("not a time span: '" + std::string(text) +
                                 "'");
  };
  // (number, unit) pairs, optionally separated by spaces.
  static const std::regex kPart(R"(\s*([0-9]+(?:\.[0-9]+)?)\s*([a-z]*))");
  const std::string input(text);
  double total_ms = 0;
  size_t parts = 0;
  auto position = input.cbegin();
  std::smatch match;
  while (position != input.cend() &&
         std::regex_search(position, input.cend(), match, kPart,
                           std::regex_constants::match_continuous)) {
    if (match.length(0) == 0) break;
    const double value = std::stod(match[1].str());
    const std::string unit = match[2].str();
    double scale = 0;
    if (unit == "us") {
      scale = 0.001;
    } else if (unit == "ms") {
      scale = 1;
    } else if (unit == "s" || unit == "sec" || unit.empty()) {
      scale = 1000;  // systemd: a bare number is seconds
    } else if (unit == "m" || unit == "min") {
      scale = 60'000;
    } else if (unit == "h" || unit == "hr") {
      scale = 3'600'000;
    } else {
      throw bad();
    }
    total_ms += value * scale;
    ++parts;
    position = match[0].second;
  }
  while (position != input.cend() &&
         std::isspace(static_cast<unsigned char>(*position))) {
    ++position;
  }
  if (parts == 0 || position != input.cend()) throw bad();
  return milliseconds(static_cast<long long>(total_ms));
}

std::set<std::string> ReferencedVariables(const YAML::Node& node) {
  std::set<std::string> names;
  if (node.IsScalar()) {
    static const std::regex kVariable(R"(\$\{([A-Za-z_][A-Za-z0-9_]*))");
    const std::string value = node.Scalar();
    for (std::sregex_iterator it(value.begin(), value.end(), kVariable), end;
         it != end; ++it) {
      names.insert((*it)[1].str());
    }
  } else if (node.IsSequence() || node.IsMap()) {
    for (const auto& item : node) {
      const YAML::Node child = node.IsMap() ? item.second : item;
      names.merge(ReferencedVariables(child));
    }
  }
  return names;
}

std::chrono::milliseconds MinimumStopTimeout(const config::Config& config) {
  return config.worker.grace_period + kStopMargin;
}

void ExpectDeploymentConfig(const config::Config& config) {
  EXPECT_FALSE(config.redis.url.empty());
  ASSERT_TRUE(config.kafka.has_value()) << "no kafka section";
  EXPECT_FALSE(config.kafka->bootstrap.empty());
  EXPECT_TRUE(config.worker.sources.kafka_jobs.enabled);
  EXPECT_EQ(config.metrics.listen, "0.0.0.0:9464");
  EXPECT_EQ(config.worker.health_listen, "0.0.0.0:8080");
  EXPECT_EQ(config.logging.format, config::LogFormat::kJson);
  EXPECT_FALSE(config.worker.sources.schedules.empty());
  // A real broker long-polls: auto (500 ms there) or a long wait given.
  if (config.kafka->fetch_wait) {
    EXPECT_GE(*config.kafka->fetch_wait, std::chrono::milliseconds(100));
  }
}

std::vector<std::string> Strings(const YAML::Node& sequence) {
  std::vector<std::string> strings;
  for (const YAML::Node& item : sequence) {
    strings.push_back(item.as<std::string>());
  }
  return strings;
}

std::string ArgumentOf(const std::vector<std::string>& args,
                       std::string_view flag) {
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == flag) return args[i + 1];
  }
  return "";
}

int CreatedPartitions(std::string script, const std::string& topic) {
  // Join continued lines, then look at each command on its own.
  for (size_t at; (at = script.find("\\\n")) != std::string::npos;) {
    script.replace(at, 2, " ");
  }
  std::istringstream lines(script);
  static const std::regex kPartitions(R"(--partitions\s+([0-9]+))");
  for (std::string raw; std::getline(lines, raw);) {
    std::string line;  // runs of blanks as one space
    for (char c : raw) {
      const bool blank = c == ' ' || c == '\t';
      if (!blank || (!line.empty() && line.back() != ' ')) {
        line += blank ? ' ' : c;
      }
    }
    if (line.find("kafka-topics") == std::string::npos &&
        line.find("$topics") == std::string::npos) {
      continue;
    }
    if (line.find("--create") == std::string::npos) continue;
    if (line.find("--topic " + topic + " ") == std::string::npos &&
        !line.ends_with("--topic " + topic)) {
      continue;
    }
    std::smatch match;
    if (std::regex_search(line, match, kPartitions)) {
      return std::stoi(match[1].str());
    }
  }
  return -1;
}

}  // namespace lockfleet::deploy_test
