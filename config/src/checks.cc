#include "checks.h"

#include <algorithm>
#include <charconv>
#include <string>
#include <string_view>

#include "text.h"

namespace lockfleet::config::internal {
namespace {

constexpr std::string_view kRedis = "redis://";
constexpr std::string_view kUnix = "unix://";

// "" if `text` is a decimal number from `low` to `high`.
std::string CheckNumber(std::string_view text, std::string_view what, int low,
                        int high) {
  int value = 0;
  const auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() ||
      value < low || value > high) {
    return std::string(what) + " must be a number from " + std::to_string(low) +
           " to " + std::to_string(high) + ", not " + Quote(text);
  }
  return "";
}

bool IsHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
         (c >= 'A' && c <= 'F');
}

// Strips "[user:password@]" off `rest`; "" or why the escapes are bad.
std::string TakeUserInfo(std::string_view& rest) {
  const size_t at = rest.rfind('@');
  if (at == std::string_view::npos) return "";
  const std::string_view info = rest.substr(0, at);
  for (size_t i = 0; i < info.size(); ++i) {
    if (info[i] != '%') continue;
    if (i + 2 >= info.size() || !IsHex(info[i + 1]) || !IsHex(info[i + 2])) {
      return "a bad %-escape in the user or password (write %40 for '@', "
             "%25 for '%')";
    }
  }
  rest = rest.substr(at + 1);
  return "";
}

}  // namespace

std::string CheckNonEmpty(std::string_view text) {
  return text.empty() ? "it is empty" : "";
}

std::string CheckOptionalPath(std::string_view text) {
  return text.size() > 4096 ? "longer than 4096 bytes" : "";
}

std::string CheckListen(std::string_view text) {
  return text.empty() ? "" : CheckHostPort(text, 0);
}

std::string CheckKeyPrefix(std::string_view text) {
  if (text.empty()) return "it is empty";
  if (text.find_first_of("{}") != std::string_view::npos) {
    return "'{' and '}' are reserved for Redis Cluster hash tags";
  }
  return "";
}

std::string CheckHostPort(std::string_view text, int min_port) {
  std::string_view host;
  std::string_view port;
  if (text.starts_with('[')) {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return "unclosed '[' in the host";
    host = text.substr(1, close - 1);
    const std::string_view after = text.substr(close + 1);
    if (!after.starts_with(':')) return "no ':PORT' after the host";
    port = after.substr(1);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return "no ':PORT' after the host";
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      return "an IPv6 host goes in brackets: [::1]:PORT";
    }
  }
  if (host.empty()) return "no host before ':PORT'";
  if (std::any_of(host.begin(), host.end(), [](char c) {
        return c == ' ' || c == '\t' || c == '/' || c == ',' || c == '@';
      })) {
    return "the host " + Quote(host) + " contains ' ', '/', ',' or '@'";
  }
  return CheckNumber(port, "the port", min_port, 65535);
}

std::string CheckBootstrap(std::string_view text) {
  if (text.empty()) return "no servers";
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    std::string_view server = text.substr(
        start, comma == std::string_view::npos ? comma : comma - start);
    if (server.empty()) return "an empty server in the list";
    const size_t scheme = server.find("://");
    if (scheme != std::string_view::npos) server.remove_prefix(scheme + 3);
    if (std::string why = CheckHostPort(server, 1); !why.empty()) {
      return Quote(server) + ": " + why;
    }
    if (comma == std::string_view::npos) return "";
    start = comma + 1;
  }
}

std::string CheckRedisUrl(std::string_view url) {
  if (url.starts_with(kRedis)) {
    std::string_view rest = url.substr(kRedis.size());
    if (std::string why = TakeUserInfo(rest); !why.empty()) return why;
    std::string_view host_port = rest;
    const size_t slash = rest.find('/');
    if (slash != std::string_view::npos) {
      host_port = rest.substr(0, slash);
      const std::string_view db = rest.substr(slash + 1);
      if (!db.empty()) {
        if (std::string why = CheckNumber(db, "the db", 0, 1 << 20);
            !why.empty()) {
          return why;
        }
      }
    }
    const bool has_port = host_port.starts_with('[')
                              ? host_port.find("]:") != std::string_view::npos
                              : host_port.find(':') != std::string_view::npos;
    if (host_port.empty()) return "no host after redis://";
    return CheckHostPort(
        has_port ? std::string(host_port) : std::string(host_port) + ":6379",
        1);
  }
  if (url.starts_with(kUnix)) {
    std::string_view rest = url.substr(kUnix.size());
    if (std::string why = TakeUserInfo(rest); !why.empty()) return why;
    const size_t query = rest.find('?');
    const std::string_view path = rest.substr(0, query);
    if (query != std::string_view::npos) {
      const std::string_view param = rest.substr(query + 1);
      if (!param.starts_with("db=")) return "the only query parameter is db=N";
      if (std::string why = CheckNumber(param.substr(3), "the db", 0, 1 << 20);
          !why.empty()) {
        return why;
      }
    }
    if (!path.starts_with('/')) {
      return "the socket path must be absolute: unix:///path/to.sock";
    }
    return "";
  }
  if (url.starts_with("rediss://")) return "TLS (rediss://) is not supported";
  if (const size_t scheme = url.find("://"); scheme != std::string_view::npos) {
    return "unknown scheme " + Quote(url.substr(0, scheme + 3));
  }
  return "no redis:// or unix:// in front";
}

std::string RedactUrl(std::string_view url) {
  const size_t scheme = url.find("://");
  const size_t at = url.rfind('@');
  if (scheme == std::string_view::npos || at == std::string_view::npos ||
      at < scheme) {
    return std::string(url);
  }
  const size_t info_start = scheme + 3;
  const std::string_view info = url.substr(info_start, at - info_start);
  const size_t colon = info.find(':');
  const std::string user(
      colon == std::string_view::npos ? "" : info.substr(0, colon + 1));
  return std::string(url.substr(0, info_start)) + user + "***" +
         std::string(url.substr(at));
}

std::string CheckTopic(std::string_view topic) {
  if (topic.empty()) return "an empty topic name";
  if (topic.size() > 249) return "longer than 249 characters";
  if (topic == "." || topic == "..") return "'.' and '..' are not topics";
  const bool legal = std::all_of(topic.begin(), topic.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
  });
  if (!legal) return "only letters, digits, '.', '_' and '-' are allowed";
  return "";
}

}  // namespace lockfleet::config::internal
