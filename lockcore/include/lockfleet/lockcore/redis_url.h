// Where a Redis server is, parsed from a URL.
//
// Accepted forms (the one parser is lockfleet/config/redis_url.h, which the
// config file's redis.url is checked with too):
//   redis://[[user]:password@]host[:port][/db]     port defaults to 6379
//   rediss://[[user]:password@]host[:port][/db]    TLS (RedisOptions::tls)
//   unix:///path/to/redis.sock[?db=N]
//   unix://[[user]:password@]/path?db=N
//   redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/master[/db]
//   rediss+sentinel://...                          TLS to sentinels and master
// Percent-escapes (%40 for '@', ...) are decoded in user and password. IPv6
// hosts go in brackets: redis://[::1]:6380.
#pragma once

#include <string_view>

#include "lockfleet/config/redis_url.h"

namespace lockfleet {

// host, port, unix_path, user, password (SECRET), db, tls; Redacted() gives
// the URL again with the password as "***" (safe to log).
using RedisEndpoint = config::RedisUrl;
// host and port of a sentinel (RedisEndpoint::sentinels) or of a master.
using RedisNode = config::RedisNode;

// Throws Error(kInvalidArgument) naming what is wrong with `url`. The
// message shows the URL redacted: never its password.
RedisEndpoint ParseRedisUrl(std::string_view url);

}  // namespace lockfleet
