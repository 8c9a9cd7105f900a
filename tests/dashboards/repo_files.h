// Paths of the repository files the dashboard and rule tests check (the
// source directory is set by CMake as LOCKFLEET_SOURCE_DIR).
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

namespace lockfleet::testing {

inline std::string SourcePath(std::string_view relative) {
  return std::string(LOCKFLEET_SOURCE_DIR) + "/" + std::string(relative);
}

inline constexpr char kDashboardsDir[] = "dashboards";
inline constexpr char kRulesFile[] =
    "deploy/prometheus/rules/lockfleet.rules.yaml";
inline constexpr char kRulesTestFile[] =
    "deploy/prometheus/rules/lockfleet.rules.test.yaml";

// The file's content; "" if it cannot be read.
inline std::string ReadSource(std::string_view relative) {
  std::ifstream in(SourcePath(relative));
  std::stringstream content;
  content << in.rdbuf();
  return content.str();
}

}  // namespace lockfleet::testing
