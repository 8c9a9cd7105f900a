#include "dashboards/grafana.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace lockfleet::testing {
namespace {

using nlohmann::json;

std::string String(const json& object, const char* key) {
  if (!object.is_object()) return "";
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string DatasourceUid(const json& object) {
  if (!object.is_object()) return "";
  const auto it = object.find("datasource");
  if (it == object.end()) return "";
  return it->is_string() ? it->get<std::string>() : String(*it, "uid");
}

GrafanaPanel ParsePanel(const json& p) {
  GrafanaPanel panel{.id = p.value("id", 0),
                     .type = String(p, "type"),
                     .title = String(p, "title"),
                     .description = String(p, "description"),
                     .datasource_uid = DatasourceUid(p)};
  for (const json& t : p.value("targets", json::array())) {
    panel.targets.push_back({.ref_id = String(t, "refId"),
                             .expr = String(t, "expr"),
                             .datasource_uid = DatasourceUid(t)});
  }
  return panel;
}

GrafanaVariable ParseVariable(const json& v) {
  GrafanaVariable variable{.name = String(v, "name"),
                           .type = String(v, "type"),
                           .datasource_uid = DatasourceUid(v),
                           .include_all = v.value("includeAll", false),
                           .all_value = String(v, "allValue")};
  const auto query = v.find("query");
  if (query != v.end()) {
    variable.query = query->is_string() ? query->get<std::string>()
                                        : String(*query, "query");
  }
  return variable;
}

bool NameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

std::string Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return std::string(s);
}

}  // namespace

std::vector<GrafanaDashboard> LoadDashboards(const std::string& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<GrafanaDashboard> dashboards;
  for (const auto& file : files) {
    json d;
    try {
      d = json::parse(std::ifstream(file));
    } catch (const json::exception& e) {
      throw std::runtime_error(file.string() + ": " + e.what());
    }
    if (!d.is_object() || !d.contains("panels")) {
      throw std::runtime_error(file.string() + ": not a Grafana dashboard");
    }
    GrafanaDashboard dashboard{.file = file.filename().string(),
                               .uid = String(d, "uid"),
                               .title = String(d, "title")};
    const json templating = d.value("templating", json::object());
    for (const json& v : templating.value("list", json::array())) {
      dashboard.variables.push_back(ParseVariable(v));
    }
    for (const json& p : d["panels"]) {
      dashboard.panels.push_back(ParsePanel(p));
      for (const json& nested : p.value("panels", json::array())) {
        dashboard.panels.push_back(ParsePanel(nested));
      }
    }
    dashboards.push_back(std::move(dashboard));
  }
  return dashboards;
}

std::string Interpolate(std::string_view text,
                        const std::map<std::string, std::string>& values,
                        std::vector<std::string>* unknown) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] != '$') {
      out += text[i++];
      continue;
    }
    size_t end = i + 1;
    std::string name;
    if (end < text.size() && text[end] == '{') {
      const size_t close = text.find('}', end);
      if (close == std::string_view::npos) {
        out += text.substr(i);
        break;
      }
      name = std::string(text.substr(end + 1, close - end - 1));
      name = name.substr(0, name.find(':'));  // ${name:format}
      end = close + 1;
    } else {
      while (end < text.size() && NameChar(text[end])) ++end;
      name = std::string(text.substr(i + 1, end - i - 1));
    }
    const auto value = values.find(name);
    if (name.empty() || value == values.end()) {
      if (!name.empty()) unknown->push_back(name);
      out += text.substr(i, end - i);
    } else {
      out += value->second;
    }
    i = end;
  }
  return out;
}

std::map<std::string, std::string> BuiltinVariables() {
  return {{"__rate_interval", "1m"}, {"__interval", "15s"}, {"__range", "5m"}};
}

std::optional<LabelValuesQuery> ParseLabelValues(std::string_view query) {
  const std::string q = Trim(query);
  constexpr std::string_view kPrefix = "label_values(";
  if (!q.starts_with(kPrefix) || !q.ends_with(")")) return std::nullopt;
  const std::string_view args =
      std::string_view(q).substr(kPrefix.size(), q.size() - kPrefix.size() - 1);
  // The label is after the last comma outside braces (a selector's matchers
  // contain commas too).
  int depth = 0;
  size_t comma = std::string_view::npos;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == '{') ++depth;
    if (args[i] == '}') --depth;
    if (args[i] == ',' && depth == 0) comma = i;
  }
  LabelValuesQuery parsed;
  if (comma == std::string_view::npos) {
    parsed.label = Trim(args);
  } else {
    parsed.selector = Trim(args.substr(0, comma));
    parsed.label = Trim(args.substr(comma + 1));
  }
  if (parsed.label.empty() ||
      !std::all_of(parsed.label.begin(), parsed.label.end(), NameChar)) {
    return std::nullopt;
  }
  return parsed;
}

}  // namespace lockfleet::testing
