#include "config_command.h"

#include <iostream>
#include <iterator>
#include <memory>
#include <string>

#include "lockfleet/config/config.h"

namespace lockfleet::cli {
namespace {

constexpr char kStdinName[] = "<stdin>";

constexpr char kCheckFooter[] =
    R"(Loads FILE as every lockfleet process would, ${VAR} expansion from the
current environment included, and reports every problem at once.

Output: "ok" on stdout, or one line per problem on stderr:
  FILE:LINE:COLUMN: key.path: what was expected, and what was found

Exit status:
  0  the config is valid
  2  the config has errors, or FILE is missing, empty or not YAML

Examples:
  lockfleet config check /etc/lockfleet/lockfleet.yaml
  lockfleet config example | lockfleet config check -)";

constexpr char kConfigFooter[] =
    R"(The deployment config is one YAML file: Redis, Kafka, locks, the worker,
metrics and logging. Start one from 'example'; 'check' it before a deploy.

Examples:
  lockfleet config example > lockfleet.yaml
  lockfleet config check lockfleet.yaml)";

constexpr char kExampleFooter[] =
    R"(The output passes 'lockfleet config check' as it is; its kafka section is
optional (delete it to run without Kafka). Exit status: 0.)";

struct ConfigArgs {
  std::string file;
  CLI::App* check = nullptr;
  CLI::App* example = nullptr;
};

int RunCheck(const std::string& file) {
  try {
    if (file == "-") {
      const std::string text{std::istreambuf_iterator<char>(std::cin),
                             std::istreambuf_iterator<char>()};
      config::LoadString(text, kStdinName);
    } else {
      config::LoadFile(file);
    }
  } catch (const config::ConfigErrors& e) {
    // One write, so the lines stay together.
    std::string out;
    for (const config::Diagnostic& error : e.errors()) {
      out += error.ToString();
      out += '\n';
    }
    std::cerr << out << std::flush;
    return kExitUsage;
  }
  std::cout << "ok" << std::endl;
  return kExitOk;
}

int RunExample() {
  std::cout << config::ExampleConfig() << std::flush;
  return kExitOk;
}

}  // namespace

Subcommand AddConfigCommand(CLI::App& parent, HelpFormatter& formatter) {
  CLI::App* app = parent.add_subcommand(
      "config", "Check a config file, or print a complete example.");
  app->require_subcommand(1);
  app->footer(kConfigFooter);
  auto args = std::make_shared<ConfigArgs>();

  args->check = app->add_subcommand(
      "check",
      "Validate a config file: print 'ok', or every error with its "
      "FILE:LINE:COLUMN and key.");
  formatter.SetSynopsis(args->check, "FILE");
  args->check->footer(kCheckFooter);
  args->check
      ->add_option("FILE", args->file,
                   "The YAML config file to check; '-' reads standard input")
      ->required()
      ->type_name("");

  args->example = app->add_subcommand(
      "example",
      "Print a complete config with every key, its meaning and its default "
      "(it passes 'config check').");
  args->example->footer(kExampleFooter);

  Subcommand subcommand;
  subcommand.app = app;
  subcommand.run = [args](const Context&) {
    if (args->check->parsed()) return RunCheck(args->file);
    return RunExample();
  };
  return subcommand;
}

}  // namespace lockfleet::cli
