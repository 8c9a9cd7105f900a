#include "lockfleet/lockcore/redis_url.h"

#include <charconv>

#include "lockfleet/lockcore/error.h"

namespace lockfleet {
namespace {

[[noreturn]] void Bad(std::string_view url, std::string_view why) {
  throw Error(ErrorCode::kInvalidArgument,
              "invalid Redis URL '" + std::string(url) +
                  "': " + std::string(why) +
                  " (expected redis://[user:password@]host:port[/db] or "
                  "unix:///path/to/socket[?db=N])");
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string PercentDecode(std::string_view url, std::string_view in) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    if (i + 2 >= in.size()) Bad(url, "truncated %-escape");
    int hi = HexValue(in[i + 1]);
    int lo = HexValue(in[i + 2]);
    if (hi < 0 || lo < 0) Bad(url, "bad %-escape");
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

int ParseInt(std::string_view url, std::string_view text, std::string_view what,
             int lo, int hi) {
  int value = 0;
  auto [ptr, ec] =
      std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() ||
      value < lo || value > hi) {
    Bad(url, std::string(what) + " must be a number from " +
                 std::to_string(lo) + " to " + std::to_string(hi) + ", got '" +
                 std::string(text) + "'");
  }
  return value;
}

// Splits "[user:password@]rest" and fills user/password.
std::string_view TakeUserInfo(std::string_view url, std::string_view rest,
                              RedisEndpoint& ep) {
  size_t at = rest.rfind('@');
  if (at == std::string_view::npos) return rest;
  std::string_view info = rest.substr(0, at);
  size_t colon = info.find(':');
  if (colon == std::string_view::npos) {
    // "redis://password@host" is ambiguous; treat a lone token as password,
    // as redis-cli -u does.
    ep.password = PercentDecode(url, info);
  } else {
    ep.user = PercentDecode(url, info.substr(0, colon));
    ep.password = PercentDecode(url, info.substr(colon + 1));
  }
  return rest.substr(at + 1);
}

}  // namespace

RedisEndpoint ParseRedisUrl(std::string_view url) {
  RedisEndpoint ep;
  constexpr std::string_view kRedis = "redis://";
  constexpr std::string_view kUnix = "unix://";
  if (url.starts_with(kRedis)) {
    std::string_view rest = TakeUserInfo(url, url.substr(kRedis.size()), ep);
    std::string_view hostport = rest;
    size_t slash = rest.find('/');
    if (slash != std::string_view::npos) {
      hostport = rest.substr(0, slash);
      std::string_view db = rest.substr(slash + 1);
      if (!db.empty()) ep.db = ParseInt(url, db, "db", 0, 1 << 20);
    }
    if (hostport.starts_with('[')) {  // [ipv6]:port
      size_t close = hostport.find(']');
      if (close == std::string_view::npos) Bad(url, "unclosed '[' in host");
      ep.host = std::string(hostport.substr(1, close - 1));
      std::string_view after = hostport.substr(close + 1);
      if (!after.empty()) {
        if (after[0] != ':') Bad(url, "expected ':' after ']'");
        ep.port = ParseInt(url, after.substr(1), "port", 1, 65535);
      }
    } else {
      size_t colon = hostport.rfind(':');
      if (colon != std::string_view::npos) {
        ep.port = ParseInt(url, hostport.substr(colon + 1), "port", 1, 65535);
        hostport = hostport.substr(0, colon);
      }
      ep.host = std::string(hostport);
    }
    if (ep.host.empty()) Bad(url, "missing host");
    return ep;
  }
  if (url.starts_with(kUnix)) {
    std::string_view rest = TakeUserInfo(url, url.substr(kUnix.size()), ep);
    size_t q = rest.find('?');
    std::string_view path = rest.substr(0, q);
    if (q != std::string_view::npos) {
      std::string_view query = rest.substr(q + 1);
      if (!query.starts_with("db="))
        Bad(url, "the only query parameter is db=N");
      ep.db = ParseInt(url, query.substr(3), "db", 0, 1 << 20);
    }
    if (path.empty() || path[0] != '/')
      Bad(url, "socket path must be absolute");
    ep.unix_path = PercentDecode(url, path);
    return ep;
  }
  Bad(url, "unknown scheme");
}

std::string RedisEndpoint::Redacted() const {
  std::string auth;
  if (!password.empty())
    auth = user + ":***@";
  else if (!user.empty())
    auth = user + "@";
  std::string db_part;
  if (!unix_path.empty()) {
    if (db != 0) db_part = "?db=" + std::to_string(db);
    return "unix://" + auth + unix_path + db_part;
  }
  if (db != 0) db_part = "/" + std::to_string(db);
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return "redis://" + auth + h + ":" + std::to_string(port) + db_part;
}

}  // namespace lockfleet
