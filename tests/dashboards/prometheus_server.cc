#include "dashboards/prometheus_server.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <stdexcept>

#include "cli/cli_process.h"
#include "lockfleet/metrics/http.h"
#include "support/promtool.h"
#include "support/spawn_server.h"
#include "support/wait_until.h"

namespace lockfleet::testing {
namespace {

using nlohmann::json;
using std::chrono::seconds;

std::string UrlEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

std::string QuotedList(const std::vector<std::string>& items) {
  std::string out = "[";
  for (const std::string& item : items) {
    out += (out.size() > 1 ? ", " : "") + json(item).dump();
  }
  return out + "]";
}

double SampleValue(const json& pair) {
  // [ <unix time>, "<value>" ]; the value may be "NaN", "+Inf", "-Inf".
  return std::strtod(pair.at(1).get<std::string>().c_str(), nullptr);
}

}  // namespace

PrometheusServer::PrometheusServer(Options options)
    : options_(std::move(options)) {
  if (!FindOnPath("prometheus")) throw std::runtime_error(kNoPrometheus);
  std::ofstream(dir_.File("prometheus.yml"))
      << "global:\n"
      << "  scrape_interval: " << options_.interval << "\n"
      << "  scrape_timeout: " << options_.interval << "\n"
      << "  evaluation_interval: " << options_.interval << "\n"
      << "rule_files: " << QuotedList(options_.rule_files) << "\n"
      << "scrape_configs:\n"
      << "  - job_name: " << json(options_.job).dump() << "\n"
      << "    static_configs:\n"
      << "      - targets: " << QuotedList(options_.targets) << "\n";
  // A free port can be taken between the check and prometheus binding it:
  // then it exits at once, and another port is tried.
  for (int attempt = 0; attempt < 3; ++attempt) {
    const StartResult result = Start();
    if (result == StartResult::kReady) return;
    if (result == StartResult::kNotReady) break;
  }
  const std::string log = Log();
  throw std::runtime_error(
      "prometheus did not get ready; its log ends:\n" +
      log.substr(log.size() > 4000 ? log.size() - 4000 : 0));
}

PrometheusServer::~PrometheusServer() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

PrometheusServer::StartResult PrometheusServer::Start() {
  port_ = static_cast<uint16_t>(UnusedTcpPort());
  std::vector<std::string> args{
      "prometheus",
      "--config.file=" + dir_.File("prometheus.yml"),
      "--storage.tsdb.path=" + dir_.File("data"),
      "--web.listen-address=127.0.0.1:" + std::to_string(port_),
      "--storage.tsdb.retention.time=1d",
      "--log.level=info"};
  pid_ = SpawnServer(std::move(args), dir_.File("prometheus.log"));
  bool exited = false;
  const bool ready = WaitUntil(
      [&] {
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
          exited = true;
          return true;
        }
        return metrics::HttpGet("127.0.0.1", port_, "/-/ready", seconds(2))
                   .status == 200;
      },
      seconds(60));
  if (exited) {
    pid_ = -1;
    return StartResult::kExited;
  }
  if (ready) return StartResult::kReady;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
  return StartResult::kNotReady;
}

std::string PrometheusServer::Log() const {
  return ReadFile(dir_.File("prometheus.log"));
}

ApiResult PrometheusServer::Api(
    std::string_view endpoint,
    const std::vector<std::pair<std::string, std::string>>& params) const {
  std::string path = "/api/v1/" + std::string(endpoint);
  for (size_t i = 0; i < params.size(); ++i) {
    path += (i == 0 ? "?" : "&") + UrlEncode(params[i].first) + "=" +
            UrlEncode(params[i].second);
  }
  ApiResult result;
  const metrics::HttpResponse response =
      metrics::HttpGet("127.0.0.1", port_, path, seconds(10));
  if (response.status == 0) {
    result.error = "GET " + path + ": " + response.error;
    return result;
  }
  const json answer = json::parse(response.body, nullptr, false);
  if (answer.is_discarded() || !answer.is_object()) {
    result.error = "GET " + path + ": HTTP " + std::to_string(response.status) +
                   ", not JSON: " + response.body.substr(0, 200);
  } else if (answer.value("status", "") != "success") {
    result.error = answer.value("errorType", "") + ": " +
                   answer.value("error", response.body.substr(0, 200));
  } else {
    result.ok = true;
    result.data = answer.value("data", json());
  }
  return result;
}

std::optional<std::vector<PromSample>> PrometheusServer::Query(
    std::string_view expr, std::string* error) const {
  const ApiResult answer = Api("query", {{"query", std::string(expr)}});
  if (!answer.ok) {
    *error = answer.error;
    return std::nullopt;
  }
  std::vector<PromSample> samples;
  const std::string type = answer.data.value("resultType", "");
  const json& result = answer.data.at("result");
  if (type == "scalar") {
    samples.push_back({.value = SampleValue(result)});
  } else if (type == "vector") {
    for (const json& series : result) {
      samples.push_back(
          {.labels = series.value("metric", json::object())
                         .get<std::map<std::string, std::string>>(),
           .value = SampleValue(series.at("value"))});
    }
  } else {
    *error = "unexpected result type '" + type + "'";
    return std::nullopt;
  }
  return samples;
}

}  // namespace lockfleet::testing
