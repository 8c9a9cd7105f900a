#include "cli/broker_process.h"

#include <csignal>
#include <stdexcept>

namespace lockfleet::testing {

BrokerProcess::BrokerProcess(int port,
                             const std::vector<std::string>& extra_args) {
  std::vector<std::string> args{"broker"};
  if (port != 0) args.insert(args.end(), {"--port", std::to_string(port)});
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  process_ = std::make_unique<CliProcess>(args);
  const std::optional<std::string> line = WaitForFirstLine(*process_);
  constexpr char kPrefix[] = "bootstrap: ";
  if (!line || !line->starts_with(kPrefix)) {
    throw std::runtime_error("lockfleet broker did not print its bootstrap: " +
                             process_->Stdout() + process_->Stderr());
  }
  bootstrap_ = line->substr(sizeof(kPrefix) - 1);
}

void BrokerProcess::Kill() {
  process_->Signal(SIGKILL);
  if (!process_->Wait()) throw std::runtime_error("broker survived SIGKILL");
}

}  // namespace lockfleet::testing
