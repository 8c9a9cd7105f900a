#include "metrics_targets.h"

#include <algorithm>
#include <charconv>
#include <future>

#include "command.h"
#include "lockfleet/metrics/http.h"

namespace lockfleet::cli {

std::optional<Endpoint> ParseTarget(std::string_view text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  std::string_view host = text.substr(0, colon);
  const std::string_view port_text = text.substr(colon + 1);
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return std::nullopt;
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    return std::nullopt;  // an IPv6 address needs its brackets
  }
  int port = 0;
  const auto [end, ec] = std::from_chars(
      port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() ||
      port < 1 || port > 65535) {
    return std::nullopt;
  }
  Endpoint endpoint;
  endpoint.host = std::string(host);
  endpoint.port = static_cast<uint16_t>(port);
  endpoint.address = std::string(text);
  endpoint.url = "http://" + endpoint.address + "/metrics";
  return endpoint;
}

void AddTargetOption(CLI::App& app, TargetArgs& args) {
  args.option =
      app.add_option("--metrics", args.targets,
                     "A worker's /metrics endpoint (its metrics.listen); "
                     "repeat for each worker. Default: the config's "
                     "metrics.targets")
          ->type_name("HOST:PORT");
}

std::vector<Endpoint> ResolveTargets(
    const TargetArgs& args, const std::optional<config::Config>& config) {
  const bool given = args.option != nullptr && args.option->count() > 0;
  const std::vector<std::string> none;
  const std::vector<std::string>& targets =
      given ? args.targets : (config ? config->metrics.targets : none);
  std::vector<Endpoint> out;
  for (const std::string& target : targets) {
    std::optional<Endpoint> endpoint = ParseTarget(target);
    if (!endpoint) {
      throw UsageError("--metrics " + Quoted(target) +
                       ": expected HOST:PORT (port 1..65535)");
    }
    const bool listed =
        std::any_of(out.begin(), out.end(),
                    [&](const Endpoint& e) { return e.url == endpoint->url; });
    if (!listed) out.push_back(std::move(*endpoint));  // each once
  }
  return out;
}

std::vector<Scrape> ScrapeEach(const std::vector<Endpoint>& endpoints,
                               std::chrono::milliseconds timeout) {
  std::vector<std::future<Scrape>> pending;
  for (const Endpoint& endpoint : endpoints) {
    pending.push_back(std::async(std::launch::async, [&endpoint, timeout] {
      Scrape scrape;
      try {
        const metrics::HttpResponse response =
            metrics::HttpGet(endpoint.host, endpoint.port, "/metrics", timeout);
        if (response.status == 0) {
          scrape.error = response.error;
        } else if (response.status != 200) {
          scrape.error = "HTTP " + std::to_string(response.status);
        } else {
          scrape.samples = metrics::ParseExposition(response.body);
          scrape.ok = true;
        }
      } catch (const std::exception& e) {
        scrape.error = e.what();
      }
      return scrape;
    }));
  }
  std::vector<Scrape> out;
  for (auto& scrape : pending) out.push_back(scrape.get());
  return out;
}

std::vector<metrics::Sample> ScrapeAll(const std::vector<Endpoint>& endpoints) {
  std::vector<metrics::Sample> all;
  for (Scrape& scrape : ScrapeEach(endpoints, std::chrono::seconds(2))) {
    all.insert(all.end(), scrape.samples.begin(), scrape.samples.end());
  }
  return all;
}

}  // namespace lockfleet::cli
