#include "consumer_introspection.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace lockfleet::notifier {

int64_t LagFromStatistics(std::string_view json, const std::string& topic,
                          const std::vector<int32_t>& partitions) {
  const nlohmann::json stats = nlohmann::json::parse(json, nullptr, false);
  if (!stats.is_object()) return -1;
  const auto topics = stats.find("topics");
  if (topics == stats.end() || !topics->contains(topic)) return -1;
  const auto parts = (*topics)[topic].find("partitions");
  if (parts == (*topics)[topic].end()) return -1;
  int64_t total = 0;
  for (int32_t p : partitions) {
    const auto s = parts->find(std::to_string(p));
    if (s == parts->end()) return -1;
    auto get = [&](const char* field) {
      const auto it = s->find(field);
      return it != s->end() && it->is_number_integer() ? it->get<int64_t>()
                                                       : int64_t{-1};
    };
    int64_t high = get("hi_offset");
    int64_t position = std::max(get("app_offset"), get("committed_offset"));
    if (position < 0) position = get("lo_offset");
    if (high < 0 || position < 0) return -1;
    total += std::max<int64_t>(0, high - position);
  }
  return total;
}

}  // namespace lockfleet::notifier
