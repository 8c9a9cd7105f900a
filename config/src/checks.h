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

// A Redis URL (lockfleet/config/redis_url.h: the one parser, which lockcore
// uses too).
std::string CheckRedisUrl(std::string_view url);

// `url` with the password of its user info replaced by "***", for messages
// (RedactRedisUrl).
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

// redis.tls paths: "" (not set), or a file that exists and can be read —
// for the certificate checks one holding a PEM certificate
// ("-----BEGIN CERTIFICATE-----"), for the key check one holding an
// unencrypted PEM private key. Reads the file (at most 1 MiB is looked at).
std::string CheckReadableFile(std::string_view path);
std::string CheckCertificateFile(std::string_view path);
std::string CheckPrivateKeyFile(std::string_view path);
// "" (not set), or a directory that exists and can be listed.
std::string CheckReadableDir(std::string_view path);
// A TLS server name: a DNS name or an IP address (1..253 bytes of letters,
// digits, '.', '-', '_' and ':').
std::string CheckServerName(std::string_view name);

// Non-empty, without '{' or '}' (Redis Cluster hash tags).
std::string CheckKeyPrefix(std::string_view text);

}  // namespace lockfleet::config::internal
