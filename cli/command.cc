#include "command.h"

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

namespace lockfleet::cli {

bool Given(const CLI::Option* option) {
  return option != nullptr && option->count() > 0;
}

void PrintError(std::string_view message) {
  // One write per line: Kafka's threads report warnings concurrently.
  std::string line = "lockfleet: ";
  line.append(message);
  line += '\n';
  std::cerr << line << std::flush;
}

std::string ExitStatusFooter(std::string_view before, std::string_view zero,
                             std::string_view one) {
  std::string out(before);
  if (!out.empty()) out += "\n\n";
  out += "Exit status:\n  0   ";
  out += zero;
  out += "\n  1   ";
  out += one;
  out +=
      "\n  2   bad arguments or --config file"
      "\n  69  Redis unreachable, timed out or refused authentication";
  return out;
}

std::string Quoted(std::string_view text) {
  constexpr size_t kMaxShown = 80;
  std::string out = "'";
  for (size_t i = 0; i < text.size() && i < kMaxShown; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  if (text.size() > kMaxShown) out += "...";
  out += "'";
  return out;
}

std::string QuotedList(const std::vector<std::string>& texts,
                       size_t max_shown) {
  std::string out;
  for (size_t i = 0; i < texts.size() && i < max_shown; ++i) {
    if (i > 0) out += ", ";
    out += Quoted(texts[i]);
  }
  if (texts.size() > max_shown) {
    out += ", ... (" + std::to_string(texts.size()) + " in all)";
  }
  return out;
}

void HelpFormatter::SetSynopsis(const CLI::App* app, std::string synopsis) {
  synopses_[app] = std::move(synopsis);
}

std::string HelpFormatter::make_usage(const CLI::App* app,
                                      std::string name) const {
  const auto it = synopses_.find(app);
  if (it == synopses_.end()) return CLI::Formatter::make_usage(app, name);
  return get_label("Usage") + ": " + name + " " + it->second + "\n";
}

}  // namespace lockfleet::cli
