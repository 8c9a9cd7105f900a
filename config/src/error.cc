#include "lockfleet/config/error.h"

#include <string>
#include <utility>
#include <vector>

namespace lockfleet::config {
namespace {

std::string JoinLines(const std::vector<Diagnostic>& errors) {
  std::string out;
  for (const Diagnostic& error : errors) {
    if (!out.empty()) out += '\n';
    out += error.ToString();
  }
  return out;
}

}  // namespace

std::string Diagnostic::ToString() const {
  std::string out = file;
  if (line > 0) {
    out += ':' + std::to_string(line) + ':' + std::to_string(column);
  }
  out += ": ";
  if (!path.empty()) out += path + ": ";
  out += message;
  return out;
}

ConfigErrors::ConfigErrors(std::vector<Diagnostic> errors)
    : ConfigError(JoinLines(errors)), errors_(std::move(errors)) {}

}  // namespace lockfleet::config
