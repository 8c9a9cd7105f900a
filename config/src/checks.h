// Checks of the string forms a config holds: Redis URLs, HOST:PORT
// addresses, Kafka topic names. Private to the config module.
//
// Each returns "" when `text` is fine, else why not ("unknown scheme
// 'http://'"), for the caller to put after "expected ..., found ...".
// Secrets: the reasons never repeat a URL's password.
#pragma once

#include <string>
#include <string_view>

namespace lockfleet::config::internal {

// Not empty.
std::string CheckNonEmpty(std::string_view text);

// The Redis URL forms of config.h (those lockcore's ParseRedisUrl accepts).
std::string CheckRedisUrl(std::string_view url);

// `url` with the password of its user info replaced by "***", for messages.
std::string RedactUrl(std::string_view url);

// HOST:PORT with PORT from `min_port` to 65535; IPv6 hosts in brackets.
std::string CheckHostPort(std::string_view text, int min_port);

// A listen address: HOST:PORT with PORT 0..65535 (0: any free port), or ""
// (listen nowhere).
// "" (none) or a path of at most 4096 bytes.
std::string CheckOptionalPath(std::string_view text);
std::string CheckListen(std::string_view text);

// HOST:PORT[,HOST:PORT...], each optionally preceded by SCHEME://.
std::string CheckBootstrap(std::string_view text);

// 1..249 of [a-zA-Z0-9._-], not "." or "..".
std::string CheckTopic(std::string_view topic);

// Non-empty, without '{' or '}' (Redis Cluster hash tags).
std::string CheckKeyPrefix(std::string_view text);

}  // namespace lockfleet::config::internal
