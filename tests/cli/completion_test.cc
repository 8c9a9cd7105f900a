// `lockfleet completion bash`: the script is valid bash, and completing
// partial command lines with it offers what the CLI accepts — run in a real
// bash, as the shell would.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_process.h"
#include "support/shell.h"

namespace lockfleet::testing {
namespace {

class CompletionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const CliResult result = RunCli({"completion", "bash"});
    ASSERT_EQ(result.status, 0) << result.err;
    WriteFile(dir_.File("lockfleet.bash"), result.out);
    WriteFile(dir_.File("fleet.yaml"), "redis: {url: redis://h:1}\n");
  }

  // What the completion offers for `line` (the last word is the one being
  // completed; a trailing space means an empty word), one per element.
  std::vector<std::string> Complete(const std::string& line) {
    std::vector<std::string> words;
    std::stringstream in(line);
    for (std::string w; in >> w;) words.push_back(w);
    if (!line.empty() && line.back() == ' ') words.push_back("");
    std::string array;
    for (const std::string& w : words) array += " " + ShellQuote(w);
    const std::string script =
        "cd " + ShellQuote(dir_.path()) +
        " && source lockfleet.bash && COMP_WORDS=(" + array +
        ") && COMP_CWORD=" + std::to_string(words.size() - 1) +
        " && _lockfleet && printf '%s\\n' \"${COMPREPLY[@]}\"";
    std::vector<std::string> out;
    std::stringstream lines(RunShell("bash -c " + ShellQuote(script)).output);
    for (std::string l; std::getline(lines, l);) {
      if (!l.empty()) out.push_back(l);
    }
    return out;
  }

  TempDir dir_;
};

using Words = std::vector<std::string>;

TEST_F(CompletionTest, TheScriptIsValidBash) {
  const ShellResult check =
      RunShell("bash -n " + ShellQuote(dir_.File("lockfleet.bash")));
  EXPECT_EQ(check.status, 0) << check.output;
}

TEST_F(CompletionTest, CompletesSubcommandsAtEveryLevel) {
  EXPECT_EQ(Complete("lockfleet lo"), Words({"lock", "locks"}));
  EXPECT_EQ(Complete("lockfleet config "),
            Words({"check", "example", "--help", "-h"}));
  EXPECT_EQ(Complete("lockfleet config ch"), Words({"check"}));
  EXPECT_EQ(Complete("lockfleet jobs pro"), Words({"produce"}));
}

TEST_F(CompletionTest, CompletesEachSubcommandsOwnOptions) {
  EXPECT_EQ(Complete("lockfleet top --so"), Words({"--sort"}));
  EXPECT_EQ(Complete("lockfleet unlock --expect-"),
            Words({"--expect-owner", "--expect-fence"}));
  // An option's value is not taken for a subcommand: `--config jobs` is a
  // file called jobs, and `top`'s options still follow.
  EXPECT_EQ(Complete("lockfleet top --config jobs --on"), Words({"--once"}));
  // Flags take no value: what follows a flag is completed as usual.
  EXPECT_EQ(Complete("lockfleet locks --json --li"), Words({"--limit"}));
  EXPECT_EQ(Complete("lockfleet unlock --force --expect-o"),
            Words({"--expect-owner"}));
  // Several lock NAMEs (a multi-lock): still `lock`'s options after them.
  EXPECT_EQ(Complete("lockfleet lock a b --wa"), Words({"--wait"}));
  EXPECT_EQ(Complete("lockfleet semaphore pool --pe"), Words({"--permits"}));
  EXPECT_EQ(Complete("lockfleet semaphore pool --no-"), Words())
      << "a semaphore is always fair";
  EXPECT_EQ(Complete("lockfleet -h lo"), Words({"lock", "locks"}));
  // Internal options (hidden from --help) are not offered.
  EXPECT_EQ(Complete("lockfleet bench --child"), Words());
}

TEST_F(CompletionTest, CompletesFilesWhereAFileIsExpected) {
  EXPECT_EQ(Complete("lockfleet lock --config fl"), Words({"fleet.yaml"}));
  EXPECT_EQ(Complete("lockfleet config check fl"), Words({"fleet.yaml"}));
  // --option=value: bash hands the '=' over as a word of its own.
  EXPECT_EQ(Complete("lockfleet top --config = fl"), Words({"fleet.yaml"}));
  EXPECT_EQ(Complete("lockfleet top --config = fleet.yaml --on"),
            Words({"--once"}));
  // A quoted value being typed.
  EXPECT_EQ(Complete("lockfleet top --config 'fl"), Words({"fleet.yaml"}));
  // A value that is not a file: nothing offered, not the options.
  EXPECT_EQ(Complete("lockfleet top --sort "), Words());
}

TEST_F(CompletionTest, CompletesTheCommandAfterTheSeparator) {
  for (const char* line :
       {"lockfleet lock report -- ech", "lockfleet lock a b c -- ech"}) {
    const Words commands = Complete(line);
    EXPECT_NE(std::find(commands.begin(), commands.end(), "echo"),
              commands.end())
        << line;
  }
}

TEST_F(CompletionTest, OnlyBashIsSupported) {
  const CliResult result = RunCli({"completion", "fish"});
  EXPECT_EQ(result.status, 2) << result.err;
  EXPECT_NE(result.err.find("only bash"), std::string::npos) << result.err;
}

}  // namespace
}  // namespace lockfleet::testing
