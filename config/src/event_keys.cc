#include "lockfleet/config/event_keys.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "lockfleet/config/error.h"

namespace lockfleet::config {
namespace {

constexpr std::string_view kBlank = " \t\r";

std::string_view Trim(std::string_view line) {
  const size_t begin = line.find_first_not_of(kBlank);
  if (begin == std::string_view::npos) return {};
  const size_t end = line.find_last_not_of(kBlank);
  return line.substr(begin, end + 1 - begin);
}

}  // namespace

std::vector<std::string> ParseEventKeys(std::string_view secret,
                                        std::string_view where) {
  std::vector<std::string> keys;
  size_t line_number = 0;
  size_t start = 0;
  while (start <= secret.size()) {
    const size_t newline = secret.find('\n', start);
    const size_t end =
        newline == std::string_view::npos ? secret.size() : newline;
    ++line_number;
    const std::string_view key = Trim(secret.substr(start, end - start));
    if (!key.empty()) {
      if (key.size() < kMinEventKeyBytes) {
        throw ConfigError(
            "the event key on line " + std::to_string(line_number) + " of " +
            std::string(where) + " has " + std::to_string(key.size()) +
            " bytes; expected at least " + std::to_string(kMinEventKeyBytes) +
            " (e.g. the output of 'openssl rand -base64 32')");
      }
      keys.emplace_back(key);
    }
    if (newline == std::string_view::npos) break;
    start = newline + 1;
  }
  if (keys.empty()) {
    throw ConfigError(std::string(where) +
                      " holds no event key; expected one key per line, at "
                      "least " +
                      std::to_string(kMinEventKeyBytes) + " bytes each");
  }
  return keys;
}

bool IsEnvironmentVariableName(std::string_view name) {
  auto letter = [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
  };
  return !name.empty() && letter(name[0]) &&
         std::all_of(name.begin(), name.end(), [&](char c) {
           return letter(c) || (c >= '0' && c <= '9');
         });
}

std::vector<std::string> EventKeysFromEnv(const std::string& name,
                                          const EnvLookup& env) {
  if (!IsEnvironmentVariableName(name)) {
    throw ConfigError(
        "expected the name of the environment variable that holds the event "
        "key (letters, digits and '_'), found something else (not repeated "
        "here, in case it is the key itself)");
  }
  std::optional<std::string> value;
  if (env) {
    value = env(name);
  } else if (const char* set = std::getenv(name.c_str()); set != nullptr) {
    value = set;
  }
  if (!value) {
    throw ConfigError("environment variable " + name +
                      " (the event key) is not set");
  }
  return ParseEventKeys(*value, "environment variable " + name);
}

std::vector<std::string> EventKeysFromFile(const std::string& path) {
  const std::string where = "'" + path + "'";
  auto fail = [&](const std::string& why) {
    throw ConfigError("cannot read the event key file " + where + ": " + why);
  };
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) fail("it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(std::strerror(errno));
  std::string content(kMaxEventKeyFileBytes + 1, '\0');
  in.read(content.data(), static_cast<std::streamsize>(content.size()));
  if (in.bad()) fail(std::strerror(errno));
  content.resize(static_cast<size_t>(in.gcount()));
  if (content.size() > kMaxEventKeyFileBytes) {
    fail("larger than " + std::to_string(kMaxEventKeyFileBytes / 1024) +
         " KiB; expected one key per line");
  }
  return ParseEventKeys(content, "the event key file " + where);
}

}  // namespace lockfleet::config
