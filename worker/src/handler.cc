#include "lockfleet/worker/handler.h"

#include <algorithm>
#include <stdexcept>

namespace lockfleet::worker {

void HandlerRegistry::Register(std::string name, HandlerSpec spec) {
  if (name.empty()) throw std::invalid_argument("handler name is empty");
  if (!spec.run) {
    throw std::invalid_argument("handler '" + name + "' has no run function");
  }
  if (!handlers_.emplace(name, std::move(spec)).second) {
    throw std::invalid_argument("handler '" + name + "' registered twice");
  }
}

const HandlerSpec* HandlerRegistry::Find(std::string_view name) const {
  const auto it = handlers_.find(name);
  return it == handlers_.end() ? nullptr : &it->second;
}

std::vector<std::string> HandlerRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, spec] : handlers_) names.push_back(name);
  return names;
}

namespace {

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += ", ";
    out += item;
  }
  return out.empty() ? "none" : out;
}

}  // namespace

std::vector<std::string> HandlerRegistry::Validate(
    const std::map<std::string, Settings>& configured) const {
  std::vector<std::string> problems;
  for (const auto& [name, settings] : configured) {
    const HandlerSpec* spec = Find(name);
    if (spec == nullptr) {
      problems.push_back("worker.handlers." + name +
                         ": no such handler (registered: " + Join(Names()) +
                         ")");
      continue;
    }
    for (const auto& [key, value] : settings) {
      if (std::find(spec->settings.begin(), spec->settings.end(), key) ==
          spec->settings.end()) {
        problems.push_back("worker.handlers." + name + "." + key +
                           ": unknown setting (known: " + Join(spec->settings) +
                           ")");
      }
    }
  }
  return problems;
}

}  // namespace lockfleet::worker
