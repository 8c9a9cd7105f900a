// deploy/docker/Dockerfile and .dockerignore. No docker here (CI has no
// daemon): the checks read the files, and compare the runtime stage's
// packages with the shared libraries of the lockfleet binary built here.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "deploy_test_util.h"

namespace lockfleet::deploy_test {
namespace {

fs::path Dockerfile() { return DeployDir() / "docker/Dockerfile"; }

// The Dockerfile's instructions, one string each (continuations joined,
// comments dropped), split into stages at each FROM.
std::vector<std::vector<std::string>> Stages() {
  std::istringstream lines(ReadText(Dockerfile()));
  std::vector<std::vector<std::string>> stages;
  std::string instruction;
  for (std::string line; std::getline(lines, line);) {
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    if (line.ends_with("\\")) {
      instruction += line.substr(0, line.size() - 1) + " ";
      continue;
    }
    instruction += line;
    if (instruction.starts_with("FROM ")) stages.emplace_back();
    if (!stages.empty()) stages.back().push_back(instruction);
    instruction.clear();
  }
  return stages;
}

bool Contains(const std::vector<std::string>& instructions,
              const std::string& text) {
  for (const std::string& instruction : instructions) {
    if (instruction.find(text) != std::string::npos) return true;
  }
  return false;
}

// Words of every `apt-get install` in the stage that name packages.
std::set<std::string> InstalledPackages(const std::vector<std::string>& stage) {
  std::set<std::string> packages;
  for (const std::string& instruction : stage) {
    const size_t install = instruction.find("apt-get install");
    if (install == std::string::npos) continue;
    std::istringstream words(instruction.substr(install));
    for (std::string word; words >> word && word != "&&";) {
      if (word != "apt-get" && word != "install" && !word.starts_with("-")) {
        packages.insert(word);
      }
    }
  }
  return packages;
}

TEST(DockerfileTest, BuildsTheCliWithTheSetupScriptsPackages) {
  const auto stages = Stages();
  ASSERT_EQ(stages.size(), 2u);
  const std::vector<std::string>& build = stages[0];
  EXPECT_TRUE(build[0].starts_with("FROM debian:12 ")) << build[0];
  // One package list for CI, developers and the image.
  EXPECT_TRUE(Contains(build, "RUN bash scripts/setup.sh"));
  EXPECT_TRUE(Contains(build, "--target lockfleet_cli"));
  EXPECT_TRUE(Contains(build, "-G Ninja"));
  // Every file the build stage copies in by name exists.
  for (const std::string& instruction : build) {
    if (!instruction.starts_with("COPY ") || instruction == "COPY . .") {
      continue;
    }
    std::istringstream words(instruction.substr(5));
    std::vector<std::string> paths;
    for (std::string word; words >> word;) paths.push_back(word);
    paths.pop_back();  // the destination
    for (const std::string& path : paths) {
      EXPECT_TRUE(fs::exists(SourceDir() / path)) << path;
    }
  }
}

TEST(DockerfileTest, RuntimeIsSlimNonRootAndRunsLockfleet) {
  const auto stages = Stages();
  ASSERT_EQ(stages.size(), 2u);
  const std::vector<std::string>& runtime = stages[1];
  EXPECT_TRUE(runtime[0].starts_with("FROM debian:12-slim")) << runtime[0];
  EXPECT_TRUE(Contains(runtime, "COPY --from=build "));
  EXPECT_TRUE(Contains(runtime, R"(ENTRYPOINT ["lockfleet"])"));
  // A numeric uid, so Kubernetes' runAsNonRoot can verify it; the same one
  // the Deployment runs as.
  std::smatch user;
  std::string all;
  for (const std::string& instruction : runtime) all += instruction + "\n";
  ASSERT_TRUE(std::regex_search(all, user, std::regex(R"(\nUSER ([0-9]+))")));
  EXPECT_NE(user[1].str(), "0");
  const YAML::Node deployment =
      LoadYaml(DeployDir() / "kubernetes/deployment.yaml");
  EXPECT_EQ(
      deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
          .as<std::string>(),
      user[1].str());
  // EXPOSE names the ports of the shipped configs.
  const config::Config config =
      LoadLockfleetConfig(DeployDir() / "compose/lockfleet.yaml");
  for (const std::string& listen :
       {config.worker.health_listen, config.metrics.listen}) {
    EXPECT_TRUE(Contains(runtime, std::to_string(ListenPort(listen))))
        << "EXPOSE lacks " << listen;
  }
}

// Every shared library the lockfleet binary links directly (ELF NEEDED) must
// come from a package the runtime stage installs or debian:12-slim has.
// Catches a new dependency that would make the image fail at start.
TEST(DockerfileTest, RuntimeStageInstallsEveryLibraryTheBinaryNeeds) {
  if (RunShell("command -v dpkg-query readelf ldd >/dev/null").status != 0) {
    GTEST_SKIP() << "needs dpkg-query, readelf and ldd (Debian)";
  }
  const auto stages = Stages();
  ASSERT_EQ(stages.size(), 2u);
  std::set<std::string> available = InstalledPackages(stages[1]);
  // In debian:12-slim already (Priority: required).
  available.insert({"libc6", "libstdc++6", "libgcc-s1", "zlib1g"});

  const std::string binary = ShellQuote(LOCKFLEET_CLI_PATH);
  const ShellResult needed = RunShell("readelf -d " + binary);
  ASSERT_EQ(needed.status, 0) << needed.output;
  const ShellResult ldd = RunShell("ldd " + binary);
  ASSERT_EQ(ldd.status, 0) << ldd.output;

  static const std::regex kNeeded(
      R"(\(NEEDED\)\s+Shared library: \[([^\]]+)\])");
  size_t libraries = 0;
  for (std::sregex_iterator
           it(needed.output.begin(), needed.output.end(), kNeeded),
       end;
       it != end; ++it) {
    const std::string library = (*it)[1].str();
    // Sanitizer builds (scripts/test.sh) link their runtimes; the image
    // is not a sanitizer build.
    if (std::regex_search(library, std::regex(R"(^lib(a|t|ub|l)san\.)"))) {
      continue;
    }
    ++libraries;
    SCOPED_TRACE(library);
    // ldd: "\tlibfoo.so.1 => /lib/x86_64-linux-gnu/libfoo.so.1 (0x...)"
    std::smatch where;
    ASSERT_TRUE(std::regex_search(
        ldd.output, where,
        std::regex(
            "\\s" +
            std::regex_replace(library, std::regex(R"([.+])"), R"(\$&)") +
            R"( => (\S+))")));
    const std::string path = where[1].str();
    // dpkg knows a file by the path its package ships: try the path ldd
    // found, its real path (usrmerge: /lib -> /usr/lib), then the name.
    const ShellResult owner =
        RunShell("dpkg-query -S " + ShellQuote(path) +
                 " || dpkg-query -S \"$(readlink -f " + ShellQuote(path) +
                 ")\" || dpkg-query -S " + ShellQuote("*/" + library));
    // "libhiredis0.14:amd64: /usr/lib/...", possibly several lines.
    std::set<std::string> packages;
    std::istringstream lines(owner.output);
    for (std::string line; std::getline(lines, line);) {
      const size_t colon = line.find(": ");
      if (colon == std::string::npos || line.starts_with("dpkg-query:") ||
          line.starts_with("diversion ")) {
        continue;
      }
      std::istringstream names(line.substr(0, colon));
      for (std::string name; std::getline(names, name, ',');) {
        name.erase(0, name.find_first_not_of(' '));
        packages.insert(name.substr(0, name.find(':')));
      }
    }
    ASSERT_FALSE(packages.empty())
        << "no package owns " << path << ": " << owner.output;
    bool installed = false;
    for (const std::string& package : packages) {
      installed = installed || available.contains(package);
    }
    EXPECT_TRUE(installed) << path << " comes from " << *packages.begin()
                           << ", which the runtime stage does not install";
  }
  EXPECT_GT(libraries, 3u) << needed.output;
}

TEST(DockerignoreTest, KeepsBuildTreesOutAndSourcesIn) {
  std::set<std::string> patterns;
  std::istringstream lines(ReadText(SourceDir() / ".dockerignore"));
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty() && line[0] != '#') patterns.insert(line);
  }
  for (const char* excluded : {".git", "build", "build-*"}) {
    EXPECT_TRUE(patterns.contains(excluded)) << excluded;
  }
  // What `cmake --build --target lockfleet_cli` and setup.sh read.
  for (const char* needed :
       {"CMakeLists.txt", "cmake", "scripts", "config", "lockcore", "notifier",
        "worker", "metrics", "cli"}) {
    EXPECT_FALSE(patterns.contains(needed)) << needed;
    EXPECT_FALSE(patterns.contains(std::string(needed) + "/")) << needed;
  }
}

}  // namespace
}  // namespace lockfleet::deploy_test
