// BrokerProcess: `lockfleet broker` as a child process, for tests that need
// Kafka in a separate process (the way a user runs it).
//
// Thread-safety: none; one test thread uses a BrokerProcess.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cli/cli_process.h"

namespace lockfleet::testing {

class BrokerProcess {
 public:
  // Starts `lockfleet broker [--port port] extra_args...` and waits for its
  // "bootstrap: ..." line. Throws std::runtime_error if it exits or prints
  // something else first.
  explicit BrokerProcess(int port = 0,
                         const std::vector<std::string>& extra_args = {});
  // SIGKILLs it if it still runs.
  ~BrokerProcess() = default;

  // "127.0.0.1:PORT", from its first line.
  const std::string& bootstrap() const { return bootstrap_; }
  CliProcess& process() { return *process_; }

  // SIGKILL, as in a crash; waits until it is gone.
  void Kill();

 private:
  std::unique_ptr<CliProcess> process_;
  std::string bootstrap_;
};

}  // namespace lockfleet::testing
