// Helpers of the deploy/ tests: where the shipped files are, loading them
// (YAML with yaml-cpp, lockfleet configs with lockfleet::config), running
// `lockfleet config check`, and the small parsers the structural checks need.
//
// Which files are lockfleet configs: those named exactly lockfleet.yaml or
// lockfleet.yml (IsLockfleetConfigName), anywhere under deploy/; one per
// deployment directory. Other files may start with "lockfleet"
// (lockfleet-worker.service, prometheus/rules/lockfleet.rules.yaml). The
// same rule selects the files ShippedConfigsTest (tests/config) loads; a
// config embedded in another file (the Kubernetes ConfigMap) is found by the
// test that knows that file.
//
// Thread-safety: none needed; each test uses them from its own thread.
#pragma once

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "lockfleet/config/config.h"
#include "support/shell.h"

namespace lockfleet::deploy_test {

namespace fs = std::filesystem;

// The repository root and its deploy/ directory (set by CMake).
fs::path SourceDir();
fs::path DeployDir();

// Regular files under `dir`, recursively, whose names end in one of
// `extensions` (".yaml"), sorted. None if `dir` does not exist.
std::vector<fs::path> FilesUnder(const fs::path& dir,
                                 const std::vector<std::string>& extensions);

// True for lockfleet.yaml and lockfleet.yml: the naming rule above.
bool IsLockfleetConfigName(const fs::path& path);

// The whole file; throws std::runtime_error if it cannot be read.
std::string ReadText(const fs::path& path);

// Every document of a YAML file. Throws YAML::Exception when it does not
// parse.
std::vector<YAML::Node> LoadYamlDocuments(const fs::path& path);

// The file's one document; throws std::runtime_error if there is not
// exactly one.
YAML::Node LoadYaml(const fs::path& path);

// A lockfleet config as `lockfleet config check` in CI sees it: loaded with
// an empty environment, so every ${VAR} needs a default. Throws
// config::ConfigErrors.
config::Config LoadLockfleetConfig(const fs::path& path);
config::Config LoadLockfleetConfigText(std::string_view text,
                                       std::string_view name);

// Shell commands (support/shell.h).
using lockfleet::testing::RunShell;
using lockfleet::testing::ShellQuote;
using lockfleet::testing::ShellResult;

// `lockfleet config check FILE` (the built binary) with an empty
// environment (env -i).
ShellResult ConfigCheck(const fs::path& path);

// A file with `content` in the test's temporary directory, removed on
// destruction.
class TempFile {
 public:
  TempFile(const std::string& name, std::string_view content);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// HOST and PORT of a "HOST:PORT" listen address (the last ':' splits them).
// Port -1 when there is no numeric port.
std::string ListenHost(std::string_view listen);
int ListenPort(std::string_view listen);

// A time span as systemd (TimeoutStopSec=45s, "1min 30s", a bare number of
// seconds) or Compose / Go ("1m30s", "500ms") write it. Units: us, ms, s,
// sec, m, min, h, hr. Throws std::invalid_argument.
std::chrono::milliseconds ParseTimeSpan(std::string_view text);

// The names of the environment variables that the scalar values under
// `node` read (${VAR} and ${VAR:-default}). Comments are not values, so a
// commented-out property reads nothing.
std::set<std::string> ReferencedVariables(const YAML::Node& node);

// The least a stop timeout (terminationGracePeriodSeconds, TimeoutStopSec,
// stop_grace_period) must be for a worker with `config`: running jobs get
// worker.grace_period after SIGTERM, and then the worker still commits its
// offsets, leaves the consumer group, releases its locks and flushes its
// unlock events (up to 1 s), which kStopMargin covers. Shorter, and the
// SIGKILL lands mid-drain.
inline constexpr std::chrono::seconds kStopMargin{5};
std::chrono::milliseconds MinimumStopTimeout(const config::Config& config);

// Gtest expectations of what makes a config a deployment config rather
// than a local example: the worker takes Kafka jobs, serves health and
// metrics on every interface (probes and scrapers come from other hosts or
// containers) on the ports the manifests use (8080, 9464), logs JSON, shows
// a schedule, and waits for a real broker's long-poll.
void ExpectDeploymentConfig(const config::Config& config);

// The items of a YAML sequence of scalars (none for an absent node).
std::vector<std::string> Strings(const YAML::Node& sequence);

// The value following `flag` in `args` ("--config" → "/etc/..."), or "" if
// `flag` is absent or last.
std::string ArgumentOf(const std::vector<std::string>& args,
                       std::string_view flag);

// The partitions a shell script creates `topic` with: it runs
// kafka-topics.sh --create ... --topic TOPIC --partitions N (line
// continuations allowed). -1 when it does not.
int CreatedPartitions(std::string script, const std::string& topic);

}  // namespace lockfleet::deploy_test
