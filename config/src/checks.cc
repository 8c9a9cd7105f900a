#include "checks.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "lockfleet/config/redis_url.h"
#include "text.h"

namespace lockfleet::config::internal {
namespace {

// "" if `text` is a decimal number from `low` to `high`.
// `secret`: the text may be a secret unless it is digits (a URL's port,
// where a URL that lost its "@host" has the password).
std::string CheckNumber(std::string_view text, std::string_view what, int low,
                        int high, bool secret = false) {
  int value = 0;
  const auto [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() ||
      value < low || value > high) {
    const bool shown =
        !secret || std::all_of(text.begin(), text.end(),
                               [](char c) { return c >= '0' && c <= '9'; });
    return std::string(what) + " must be a number from " + std::to_string(low) +
           " to " + std::to_string(high) +
           (shown ? ", not " + Quote(text) : "");
  }
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
  RedisUrl ignored;
  return ParseRedisUrl(url, &ignored);
}

std::string RedactUrl(std::string_view url) { return RedactRedisUrl(url); }

namespace {

constexpr size_t kMaxPemBytes = 1 << 20;

// Reads the first kMaxPemBytes of `path` into `*content`; "" or why it
// cannot be read.
std::string ReadHead(std::string_view path, std::string* content) {
  if (path.size() > 4096) return "longer than 4096 bytes";
  const std::string name(path);
  std::error_code error;
  if (std::filesystem::is_directory(name, error)) return "it is a directory";
  // A FIFO or a device would block the read (or never end): regular files
  // only.
  const bool regular = std::filesystem::is_regular_file(name, error);
  if (error) return error.message();
  if (!regular) return "not a regular file";
  std::ifstream in(name, std::ios::binary);
  if (!in) return std::strerror(errno);
  content->assign(kMaxPemBytes, '\0');
  in.read(content->data(), static_cast<std::streamsize>(content->size()));
  if (in.bad()) return std::strerror(errno);
  content->resize(static_cast<size_t>(in.gcount()));
  return "";
}

}  // namespace

std::string CheckReadableFile(std::string_view path) {
  if (path.empty()) return "";
  std::string content;
  return ReadHead(path, &content);
}

std::string CheckCertificateFile(std::string_view path) {
  if (path.empty()) return "";
  std::string content;
  if (std::string why = ReadHead(path, &content); !why.empty()) return why;
  if (content.find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
    return content.find("PRIVATE KEY-----") != std::string::npos
               ? "it holds a private key, not a certificate"
               : "no PEM certificate (-----BEGIN CERTIFICATE-----) in it";
  }
  return "";
}

std::string CheckPrivateKeyFile(std::string_view path) {
  if (path.empty()) return "";
  std::string content;
  if (std::string why = ReadHead(path, &content); !why.empty()) return why;
  if (content.find("-----BEGIN ENCRYPTED PRIVATE KEY-----") !=
          std::string::npos ||
      content.find("Proc-Type: 4,ENCRYPTED") != std::string::npos) {
    return "the key is encrypted; lockfleet reads an unencrypted key (keep "
           "the file private instead)";
  }
  if (content.find("PRIVATE KEY-----") == std::string::npos) {
    return content.find("-----BEGIN CERTIFICATE-----") != std::string::npos
               ? "it holds a certificate, not a private key"
               : "no PEM private key (-----BEGIN PRIVATE KEY-----) in it";
  }
  return "";
}

std::string CheckReadableDir(std::string_view path) {
  if (path.empty()) return "";
  if (path.size() > 4096) return "longer than 4096 bytes";
  const std::string name(path);
  std::error_code error;
  if (!std::filesystem::is_directory(name, error)) {
    return error ? error.message() : "not a directory";
  }
  std::filesystem::directory_iterator listing(name, error);
  if (error) return error.message();
  return "";
}

std::string CheckServerName(std::string_view name) {
  if (name.empty()) return "it is empty";
  if (name.size() > 253) return "longer than 253 bytes";
  const bool legal = std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_' ||
           c == ':';
  });
  if (!legal) {
    return "a DNS name or an IP address: letters, digits, '.', '-', '_', ':'";
  }
  return "";
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

// ---- Redis URLs (lockfleet/config/redis_url.h) -----------------------------

namespace lockfleet::config {
namespace {

using internal::CheckNumber;
using internal::Quote;

constexpr std::string_view kRedisScheme = "redis://";
constexpr std::string_view kRedissScheme = "rediss://";
constexpr std::string_view kUnixScheme = "unix://";
constexpr std::string_view kSentinelScheme = "redis+sentinel://";
constexpr std::string_view kSentinelTlsScheme = "rediss+sentinel://";
constexpr std::string_view kClusterScheme = "redis+cluster://";
constexpr std::string_view kClusterTlsScheme = "rediss+cluster://";
constexpr int kSentinelPort = 26379;
constexpr int kRedisPort = 6379;
constexpr int kMaxDb = 1 << 20;

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes %XX escapes into `*out`; false for a bad or truncated escape.
bool PercentDecode(std::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      *out += in[i];
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int high = HexValue(in[i + 1]);
    const int low = HexValue(in[i + 2]);
    if (high < 0 || low < 0) return false;
    *out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return true;
}

// Takes "[user:password@]" off the front of `*rest` into `*url`; "" or why
// not. The reason never shows the user info.
std::string TakeUserInfo(std::string_view* rest, RedisUrl* url) {
  const size_t at = rest->rfind('@');
  if (at == std::string_view::npos) return "";
  const std::string_view info = rest->substr(0, at);
  *rest = rest->substr(at + 1);
  const size_t colon = info.find(':');
  // A lone token is the password, as redis-cli -u reads it.
  const std::string_view user =
      colon == std::string_view::npos ? "" : info.substr(0, colon);
  const std::string_view password =
      colon == std::string_view::npos ? info : info.substr(colon + 1);
  if (!PercentDecode(user, &url->user) ||
      !PercentDecode(password, &url->password)) {
    return "a bad %-escape in the user or password (write %40 for '@', %3A "
           "for ':', %25 for '%')";
  }
  return "";
}

// Host and port of "host[:port]" / "[v6][:port]"; "" or why not.
std::string ParseHostPort(std::string_view text, RedisUrl* url) {
  std::string_view host = text;
  std::string_view port;
  bool has_port = false;
  if (text.starts_with('[')) {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return "unclosed '[' in the host";
    host = text.substr(1, close - 1);
    const std::string_view after = text.substr(close + 1);
    if (!after.empty()) {
      if (!after.starts_with(':')) return "expected ':PORT' after ']'";
      port = after.substr(1);
      has_port = true;
    }
  } else {
    const size_t colon = text.rfind(':');
    if (colon != std::string_view::npos) {
      host = text.substr(0, colon);
      port = text.substr(colon + 1);
      has_port = true;
      if (host.find(':') != std::string_view::npos) {
        return "an IPv6 host goes in brackets: [::1]:PORT";
      }
    }
  }
  if (host.empty()) return "no host";
  if (std::any_of(host.begin(), host.end(), [](char c) {
        return c == ' ' || c == '\t' || c == '/' || c == ',' || c == '@' ||
               c == '[' || c == ']';
      })) {
    return "the host " + Quote(host) + " contains ' ', '/', ',', '@' or '['";
  }
  url->host = std::string(host);
  if (has_port) {
    if (std::string why = CheckNumber(port, "the port", 1, 65535,
                                      /*secret=*/true);
        !why.empty()) {
      return why;
    }
    url->port = std::stoi(std::string(port));
  }
  return "";
}

std::string ParseDb(std::string_view text, RedisUrl* url) {
  if (std::string why = CheckNumber(text, "the db", 0, kMaxDb); !why.empty())
    return why;
  url->db = std::stoi(std::string(text));
  return "";
}

std::string ParseTcpUrl(std::string_view rest, RedisUrl* url) {
  if (std::string why = TakeUserInfo(&rest, url); !why.empty()) return why;
  std::string_view host_port = rest;
  if (const size_t slash = rest.find('/'); slash != std::string_view::npos) {
    host_port = rest.substr(0, slash);
    const std::string_view db = rest.substr(slash + 1);
    if (!db.empty()) {
      if (std::string why = ParseDb(db, url); !why.empty()) return why;
    }
  }
  if (host_port.empty()) {
    return std::string("no host after ") +
           (url->tls ? "rediss://" : "redis://");
  }
  return ParseHostPort(host_port, url);
}

// "host[:port],host[:port]" into `*out`; "" or why not.
std::string ParseHostList(std::string_view hosts, std::string_view what,
                          int default_port, std::vector<RedisNode>* out) {
  size_t start = 0;
  while (start <= hosts.size()) {
    const size_t comma = std::min(hosts.find(',', start), hosts.size());
    const std::string_view one = hosts.substr(start, comma - start);
    if (one.empty()) {
      return "an empty " + std::string(what) + " address in the list";
    }
    RedisUrl node;
    node.port = default_port;
    if (std::string why = ParseHostPort(one, &node); !why.empty()) return why;
    out->push_back({node.host, node.port});
    start = comma + 1;
  }
  return "";
}

// "host[:port],host[:port]/master[/db]" after the scheme (and user info).
std::string ParseSentinelUrl(std::string_view rest, RedisUrl* url) {
  if (std::string why = TakeUserInfo(&rest, url); !why.empty()) return why;
  const size_t slash = rest.find('/');
  const std::string_view hosts = rest.substr(0, slash);
  if (hosts.empty()) return "no sentinel host";
  if (slash == std::string_view::npos || slash + 1 == rest.size()) {
    return "no master name: redis+sentinel://host:port[,...]/MASTER[/db]";
  }
  std::string_view name = rest.substr(slash + 1);
  if (const size_t db = name.find('/'); db != std::string_view::npos) {
    if (std::string why = ParseDb(name.substr(db + 1), url); !why.empty())
      return why;
    name = name.substr(0, db);
  }
  if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
      })) {
    return "the master name " + Quote(name) +
           " must be letters, digits, '.', '_' or '-'";
  }
  url->master_name = std::string(name);
  return ParseHostList(hosts, "sentinel", kSentinelPort, &url->sentinels);
}

// "host[:port],host[:port][/]" after the scheme (and user info).
std::string ParseClusterUrl(std::string_view rest, RedisUrl* url) {
  if (std::string why = TakeUserInfo(&rest, url); !why.empty()) return why;
  const size_t slash = rest.find('/');
  const std::string_view hosts = rest.substr(0, slash);
  if (hosts.empty()) return "no cluster node";
  if (slash != std::string_view::npos) {
    const std::string_view db = rest.substr(slash + 1);
    if (!db.empty() && db != "0") {
      return "a Redis Cluster has db 0 only: leave the /db out";
    }
  }
  return ParseHostList(hosts, "cluster node", kRedisPort, &url->seeds);
}

std::string ParseUnixUrl(std::string_view rest, RedisUrl* url) {
  if (std::string why = TakeUserInfo(&rest, url); !why.empty()) return why;
  const size_t query = rest.find('?');
  const std::string_view path = rest.substr(0, query);
  if (query != std::string_view::npos) {
    const std::string_view param = rest.substr(query + 1);
    if (!param.starts_with("db=")) return "the only query parameter is db=N";
    if (std::string why = ParseDb(param.substr(3), url); !why.empty())
      return why;
  }
  if (!path.starts_with('/')) {
    return "the socket path must be absolute: unix:///path/to.sock";
  }
  if (!PercentDecode(path, &url->unix_path)) {
    return "a bad %-escape in the socket path";
  }
  return "";
}

}  // namespace

std::string ParseRedisUrl(std::string_view text, RedisUrl* out) {
  *out = RedisUrl{};
  using Parser = std::string (*)(std::string_view, RedisUrl*);
  static constexpr struct {
    std::string_view scheme;
    bool tls;
    Parser parse;
  } kSchemes[] = {
      {kRedisScheme, false, ParseTcpUrl},
      {kRedissScheme, true, ParseTcpUrl},
      {kUnixScheme, false, ParseUnixUrl},
      {kSentinelScheme, false, ParseSentinelUrl},
      {kSentinelTlsScheme, true, ParseSentinelUrl},
      {kClusterScheme, false, ParseClusterUrl},
      {kClusterTlsScheme, true, ParseClusterUrl},
  };
  for (const auto& form : kSchemes) {
    if (text.starts_with(form.scheme)) {
      out->tls = form.tls;
      return form.parse(text.substr(form.scheme.size()), out);
    }
  }
  if (const size_t scheme = text.find("://");
      scheme != std::string_view::npos) {
    const std::string_view name = text.substr(0, scheme);
    // Quote the scheme only when it looks like one: text before "://" could
    // be anything, a password included.
    const bool plain =
        !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
          return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                 (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.';
        });
    return plain ? "unknown scheme " + Quote(text.substr(0, scheme + 3))
                 : "unknown scheme";
  }
  return "no redis://, rediss://, unix://, redis+sentinel:// or "
         "redis+cluster:// in front";
}

std::string RedactRedisUrl(std::string_view text) {
  const size_t at = text.rfind('@');
  if (at == std::string_view::npos) {
    // No "@": "scheme://user:secret" (the host forgotten) must not show the
    // secret either. What follows the first ':' after the scheme is hidden
    // unless it is a port (digits up to the path).
    const size_t scheme = text.find("://");
    const size_t start = scheme == std::string_view::npos ? 0 : scheme + 3;
    const size_t colon = text.find(':', start);
    if (colon == std::string_view::npos) return std::string(text);
    const size_t end = text.find_first_of("/?", colon + 1);
    const std::string_view after = text.substr(
        colon + 1, end == std::string_view::npos ? end : end - colon - 1);
    // A sentinel or cluster list ("26379,s2:26379") is a port, then
    // host[:port]s.
    const std::string_view scheme_part = text.substr(0, start);
    const bool list = scheme_part.find("+sentinel") != std::string_view::npos ||
                      scheme_part.find("+cluster") != std::string_view::npos;
    auto digits = [](std::string_view t) {
      return !t.empty() && std::all_of(t.begin(), t.end(), [](char c) {
        return c >= '0' && c <= '9';
      });
    };
    auto host_port = [&](std::string_view t) {
      const size_t c = t.rfind(':');
      const std::string_view host = t.substr(0, c);
      return !host.empty() &&
             std::all_of(host.begin(), host.end(),
                         [](char ch) {
                           return (ch >= 'a' && ch <= 'z') ||
                                  (ch >= 'A' && ch <= 'Z') ||
                                  (ch >= '0' && ch <= '9') || ch == '.' ||
                                  ch == '-';
                         }) &&
             (c == std::string_view::npos || digits(t.substr(c + 1)));
    };
    bool port = false;
    if (!list) {
      port = digits(after);
    } else {
      const size_t comma = after.find(',');
      port = digits(after.substr(0, comma));
      for (size_t at = comma; port && at != std::string_view::npos;) {
        const size_t next = after.find(',', at + 1);
        port = host_port(after.substr(
            at + 1, next == std::string_view::npos ? next : next - at - 1));
        at = next;
      }
    }
    if (port) return std::string(text);
    return std::string(text.substr(0, colon + 1)) + "***" +
           std::string(end == std::string_view::npos ? "" : text.substr(end));
  }
  size_t info_start = text.find("://");
  info_start = info_start == std::string_view::npos || info_start > at
                   ? 0
                   : info_start + 3;
  const std::string_view info = text.substr(info_start, at - info_start);
  const size_t colon = info.find(':');
  const std::string_view user =
      colon == std::string_view::npos ? "" : info.substr(0, colon + 1);
  return std::string(text.substr(0, info_start)) + std::string(user) + "***" +
         std::string(text.substr(at));
}

int ParsePort(std::string_view text) {
  if (text.empty() || text.size() > 5 ||
      !std::all_of(text.begin(), text.end(),
                   [](char c) { return c >= '0' && c <= '9'; })) {
    return 0;
  }
  const int port = std::stoi(std::string(text));
  return port >= 1 && port <= 65535 ? port : 0;
}

std::string RedisNode::ToString() const {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port);
}

std::string RedisUrl::Redacted() const {
  std::string auth;
  if (!password.empty()) {
    auth = user + ":***@";
  } else if (!user.empty()) {
    auth = user + "@";
  }
  if (!unix_path.empty()) {
    return "unix://" + auth + unix_path +
           (db != 0 ? "?db=" + std::to_string(db) : "");
  }
  const std::string db_part = db != 0 ? "/" + std::to_string(db) : "";
  auto list = [](const std::vector<RedisNode>& nodes) {
    std::string text;
    for (const RedisNode& node : nodes)
      text += (text.empty() ? "" : ",") + node.ToString();
    return text;
  };
  if (sentinel()) {
    return (tls ? "rediss+sentinel://" : "redis+sentinel://") + auth +
           list(sentinels) + "/" + master_name + db_part;
  }
  if (cluster()) {
    return (tls ? "rediss+cluster://" : "redis+cluster://") + auth +
           list(seeds);
  }
  return (tls ? "rediss://" : "redis://") + auth +
         RedisNode{host, port}.ToString() + db_part;
}

}  // namespace lockfleet::config
