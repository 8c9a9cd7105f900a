// PrometheusServer: a private Prometheus server (Debian package
// `prometheus`) for one test, and a small client for its HTTP API.
//
// Starts the `prometheus` found on PATH on a free loopback port, with its
// TSDB in a fresh temporary directory and a config written from Options:
// one scrape job over static targets and the given rule files, scraped and
// evaluated at `interval`. Waits until /-/ready answers. The destructor kills
// it and removes the directory. Like RedisServer it dies with the thread that
// started it (PR_SET_PDEATHSIG), so an aborted test leaves no orphan.
//
// Thread-safety: none; one test thread uses it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/cli_process.h"

namespace lockfleet::testing {

inline constexpr char kNoPrometheus[] =
    "prometheus is not on PATH: install the Debian package 'prometheus' "
    "(apt-get install prometheus; scripts/setup.sh does)";

// One series of an instant query's result (a scalar has no labels).
struct PromSample {
  std::map<std::string, std::string> labels;
  double value = 0;  // may be NaN or +-Inf
};

struct ApiResult {
  bool ok = false;
  nlohmann::json data;  // the answer's "data" when ok
  std::string error;    // why not: HTTP failure or Prometheus's error
};

class PrometheusServer {
 public:
  struct Options {
    std::string job = "lockfleet";
    std::vector<std::string> targets;  // "HOST:PORT", scraped at /metrics
    std::vector<std::string> rule_files;
    std::string interval = "1s";  // scrape and rule evaluation interval
  };

  // Throws std::runtime_error when prometheus is missing (kNoPrometheus) or
  // does not get ready within 60 s (with the end of its log).
  explicit PrometheusServer(Options options);
  ~PrometheusServer();
  PrometheusServer(const PrometheusServer&) = delete;
  PrometheusServer& operator=(const PrometheusServer&) = delete;

  uint16_t port() const { return port_; }
  std::string Log() const;

  // GET /api/v1/<endpoint> with URL-encoded `params` (a key may repeat).
  ApiResult Api(std::string_view endpoint,
                const std::vector<std::pair<std::string, std::string>>& params =
                    {}) const;

  // An instant query at the server's now. Vectors give one sample per
  // series, scalars one sample; nullopt (and *error) when it fails.
  std::optional<std::vector<PromSample>> Query(std::string_view expr,
                                               std::string* error) const;

 private:
  enum class StartResult { kReady, kExited, kNotReady };
  // kExited: it exited at start (e.g. its port was taken); kNotReady: it
  // runs but did not get ready within 60 s (it is killed).
  StartResult Start();

  Options options_;
  TempDir dir_;  // config, TSDB and log
  uint16_t port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace lockfleet::testing
