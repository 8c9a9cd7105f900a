// Where a Redis server is, parsed from a URL.
//
// Accepted forms:
//   redis://[[user]:password@]host[:port][/db]     port defaults to 6379
//   unix:///path/to/redis.sock[?db=N]
//   unix://[[user]:password@]/path?db=N
// Percent-escapes (%40 for '@', ...) are decoded in user and password. IPv6
// hosts go in brackets: redis://[::1]:6380.
#pragma once

#include <string>
#include <string_view>

namespace lockfleet {

struct RedisEndpoint {
  std::string host;       // empty for a unix socket
  int port = 6379;        // ignored for a unix socket
  std::string unix_path;  // non-empty selects a unix socket
  std::string user;       // empty: AUTH with password only (Redis < 6 style)
  std::string password;   // empty: no AUTH
  int db = 0;             // SELECT db when non-zero

  // The URL again, with the password replaced by "***" (safe to log).
  std::string Redacted() const;
};

// Throws Error(kInvalidArgument) naming what is wrong with `url`.
RedisEndpoint ParseRedisUrl(std::string_view url);

}  // namespace lockfleet
