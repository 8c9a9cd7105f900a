// Redis URLs: the one parser of lockfleet. The config file's redis.url is
// checked with it and lockcore's ParseRedisUrl (RedisEndpoint is this
// RedisUrl) wraps it, so a URL `lockfleet config check` accepts is one the
// client connects to, and no two parsers disagree.
//
// Accepted forms:
//   redis://[[user]:password@]host[:port][/db]    plain TCP; port 6379 when
//                                                 left out
//   rediss://[[user]:password@]host[:port][/db]   the same over TLS
//   unix:///path/to/redis.sock[?db=N]
//   unix://[[user]:password@]/path/to/redis.sock[?db=N]
//   redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/master[/db]
//                                                 Sentinel: ask these
//                                                 sentinels (port 26379 when
//                                                 left out) where the master
//                                                 named `master` is
//   rediss+sentinel://...                         the same over TLS, to the
//                                                 sentinels and the master
//   redis+cluster://[[user]:password@]host[:port][,host[:port]...][/]
//                                                 Redis Cluster: these seed
//                                                 nodes (port 6379 when left
//                                                 out) give the slot map;
//                                                 db 0 only
//   rediss+cluster://...                          the same over TLS
// IPv6 hosts go in brackets (redis://[::1]:6380). Percent-escapes (%40 for
// '@', %3A for ':', %25 for '%') are decoded in the user, the password and
// the socket path. The user and password of a Sentinel URL are the
// master's (RedisOptions::sentinel_auth has the sentinels' own, if they want
// one). Master names are letters, digits, '.', '_' and '-'. A password alone
// ("redis://:pw@h" or "redis://pw@h") authenticates the Redis < 6 way; user and
// password use an ACL user. db is 0..1048576 (SELECT when not 0).
//
// Secrets: no message of this module repeats a URL's password. Reasons name
// the part that is wrong ("the port must be ..."), never the user info, and
// RedactRedisUrl hides the password of any text, even text that is no URL.
//
// Thread-safety: plain functions of their arguments.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lockfleet::config {

// A host and port (of a sentinel, a master or a cluster node).
struct RedisNode {
  std::string host;  // IPv6 without brackets
  int port = 26379;

  // "host:port", "[::1]:port".
  std::string ToString() const;

  auto operator<=>(const RedisNode&) const = default;
};

// A parsed Redis URL. (lockcore calls it RedisEndpoint.)
struct RedisUrl {
  std::string host;       // empty for a unix socket; IPv6 without brackets
  int port = 6379;        // ignored for a unix socket
  std::string unix_path;  // non-empty selects a unix socket
  std::string user;       // empty: AUTH with the password only
  std::string password;   // empty: no AUTH. SECRET: never print it
  int db = 0;             // SELECT db when non-zero
  bool tls = false;       // rediss://: TLS (never for a unix socket)
  // redis+sentinel://: host and port are left empty; the master is found by
  // asking `sentinels` (in order) for `master_name`.
  std::vector<RedisNode> sentinels;
  std::string master_name;
  // redis+cluster://: host and port are left empty; the slot map is asked
  // of these nodes (in order) and of the nodes it names.
  std::vector<RedisNode> seeds;

  bool sentinel() const { return !master_name.empty(); }
  bool cluster() const { return !seeds.empty(); }

  // The URL again with the password replaced by "***" (safe to log):
  // "rediss://app:***@cache:6380/2", "unix:///run/redis.sock?db=1",
  // "redis+sentinel://s1:26379,s2:26379/main",
  // "redis+cluster://n1:6379,n2:6379".
  std::string Redacted() const;

  bool operator==(const RedisUrl&) const = default;
};

// The forms above, for "expected ..." in messages.
inline constexpr char kRedisUrlForms[] =
    "redis://[[user]:password@]host[:port][/db], rediss://... (TLS), "
    "unix:///path/to.sock[?db=N], "
    "redis+sentinel://host[:port][,host[:port]...]/master[/db] or "
    "redis+cluster://host[:port][,host[:port]...]";

// Parses `text` into `*out` and returns "", or returns why `text` is not a
// Redis URL ("the port must be a number from 1 to 65535, not '0'") and leaves
// `*out` unspecified. The reason never contains the user or password.
std::string ParseRedisUrl(std::string_view text, RedisUrl* out);

// The TCP port `text` names (1..65535, decimal digits only), or 0 when it
// names none. For ports read from Redis's own replies (MOVED, Sentinel).
int ParsePort(std::string_view text);

// `text` with its password (everything between the first ':' of the user
// info and the last '@') replaced by "***", for messages about text that may
// not parse. Text without '@' is returned as it is.
std::string RedactRedisUrl(std::string_view text);

}  // namespace lockfleet::config
