#include "schema.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "checks.h"
#include "lockfleet/config/event_keys.h"
#include "lockfleet/config/redis_url.h"
#include "reader.h"
#include "text.h"

namespace lockfleet::config::internal {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;

const std::string kRedisUrlExpected =
    std::string("a Redis URL: ") + kRedisUrlForms;
constexpr char kBootstrapExpected[] =
    "Kafka bootstrap servers: HOST:PORT[,HOST:PORT...]";
constexpr char kTopicExpected[] = "a Kafka topic name";

// redis.tls. `url`: redis.url as read ("" if it was wrong or absent).
RedisTlsConfig ReadRedisTls(Context& context, const Value& value,
                            const std::string& url) {
  RedisTlsConfig out;
  MapReader map(context, value, "a mapping of TLS settings");
  // A path key: where it is, and whether its value was wrong (already
  // reported, so the checks that compare two keys leave it alone).
  struct PathKey {
    std::optional<Value> value;
    bool wrong = false;
  };
  auto read = [&](std::string_view key, std::string& field,
                  const char* expected, StringCheck check) {
    PathKey got{map.Get(key)};
    if (got.value) {
      std::optional<std::string> parsed =
          ParseChecked(context, *got.value, expected, check);
      if (parsed) {
        field = *parsed;
      } else {
        got.wrong = true;
      }
    }
    return got;
  };
  read("ca_file", out.ca_file, "a readable PEM file of CA certificates",
       CheckCertificateFile);
  read("ca_dir", out.ca_dir, "a readable directory of CA certificates",
       CheckReadableDir);
  const PathKey cert_file = read(
      "cert_file", out.cert_file,
      "a readable PEM file of the client certificate", CheckCertificateFile);
  const PathKey key_file = read(
      "key_file", out.key_file,
      "a readable PEM file of the client's private key", CheckPrivateKeyFile);
  map.Read("server_name", out.server_name,
           Checked("the server's DNS name or IP address", CheckServerName));
  const std::optional<Value> insecure = map.Get("insecure_skip_verify");
  if (insecure) {
    if (auto parsed = ParseBool(context, *insecure)) {
      out.insecure_skip_verify = *parsed;
    }
  }
  map.Finish();

  if (RedisUrl parsed; ParseRedisUrl(url, &parsed).empty() && !parsed.tls) {
    context.Error(
        value.key_mark, value.path,
        "TLS settings need a rediss:// (or rediss+sentinel://, "
        "rediss+cluster://) url, and redis.url is " +
            url.substr(0, url.find("://") + 3) +
            (parsed.sentinel() ? "; write rediss+sentinel://... to use TLS, or "
                                 "remove redis.tls"
             : parsed.cluster() ? "; write rediss+cluster://... to use TLS, or "
                                  "remove redis.tls"
                                : "; write rediss://HOST:PORT to use TLS, or "
                                  "remove redis.tls"));
  }
  if (!out.cert_file.empty() && out.key_file.empty() && !key_file.wrong) {
    context.Error(*cert_file.value,
                  "a client certificate needs its private key: set "
                  "redis.tls.key_file too");
  }
  if (!out.key_file.empty() && out.cert_file.empty() && !cert_file.wrong) {
    context.Error(*key_file.value,
                  "a private key needs its client certificate: set "
                  "redis.tls.cert_file too");
  }
  if (out.insecure_skip_verify &&
      (!out.ca_file.empty() || !out.ca_dir.empty())) {
    context.Error(*insecure,
                  "insecure_skip_verify: true verifies no certificate, so "
                  "the CA in " +
                      std::string(!out.ca_file.empty() ? "ca_file" : "ca_dir") +
                      " would be ignored; remove one of the two");
  }
  return out;
}

RedisConfig ReadRedis(Context& context, const Value& value) {
  RedisConfig out;
  MapReader map(context, value, "a mapping of Redis settings");
  if (std::optional<Value> url = map.Require("url", kRedisUrlExpected)) {
    auto parse = Checked(kRedisUrlExpected, CheckRedisUrl, RedactUrl);
    if (auto parsed = parse(context, *url)) out.url = *parsed;
  }
  map.Read("pool_size", out.pool_size, Int(1, 1024));
  map.Read("connect_timeout", out.connect_timeout, Duration(milliseconds(1)));
  map.Read("command_timeout", out.command_timeout, Duration(milliseconds(1)));
  map.Read("key_prefix", out.key_prefix,
           Checked("a key prefix", CheckKeyPrefix));
  map.Read("min_replicas", out.min_replicas, Int(0, 100));
  map.Read("replica_timeout", out.replica_timeout, Duration(milliseconds(1)));
  if (std::optional<Value> tls = map.Get("tls")) {
    out.tls = ReadRedisTls(context, *tls, out.url);
  }
  if (std::optional<Value> sentinel = map.Get("sentinel")) {
    MapReader auth(context, *sentinel, "a mapping of Sentinel settings");
    auto non_empty = [](std::string_view text) {
      return std::string(text.empty() ? "empty" : "");
    };
    auto hidden = [](std::string_view) { return std::string("***"); };
    auth.Read("user", out.sentinel.user, Checked("an ACL user", non_empty));
    auth.Read("password", out.sentinel.password,
              Checked("a password", non_empty, hidden));
    auth.Finish();
    if (!out.sentinel.user.empty() && out.sentinel.password.empty()) {
      context.Error(sentinel->key_mark, sentinel->path,
                    "a Sentinel user needs its password: set "
                    "redis.sentinel.password too");
    }
    if (RedisUrl parsed;
        ParseRedisUrl(out.url, &parsed).empty() && !parsed.sentinel()) {
      context.Error(sentinel->key_mark, sentinel->path,
                    "Sentinel settings need a redis+sentinel:// url; remove "
                    "redis.sentinel or point redis.url at the sentinels");
    }
  }
  map.Finish();
  return out;
}

// librdkafka properties lockfleet sets itself, and what to do instead.
constexpr std::array<std::pair<std::string_view, std::string_view>, 9>
    kReservedProperties = {{
        {"bootstrap.servers", "set kafka.bootstrap instead"},
        {"metadata.broker.list", "set kafka.bootstrap instead"},
        {"message.timeout.ms", "set kafka.message_timeout instead"},
        {"delivery.timeout.ms", "set kafka.message_timeout instead"},
        {"fetch.wait.max.ms", "set kafka.fetch_wait instead"},
        {"queue.buffering.max.messages",
         "set kafka.queue_max_messages instead"},
        {"client.id", "set kafka.client_id instead"},
        {"partitioner",
         "unlock events go to the partition of their lock name (CRC32), "
         "which targeted fan-out relies on (docs/unlock-events.md)"},
        {"group.id",
         "lockfleet picks its consumer groups (the worker's: "
         "worker.sources.kafka_jobs.group)"},
    }};

std::map<std::string, std::string> ReadProperties(Context& context,
                                                  const Value& value) {
  std::map<std::string, std::string> out;
  MapReader map(context, value, "a mapping of librdkafka properties");
  for (const MapReader::Entry& entry : map.entries()) {
    const auto reserved = std::find_if(
        kReservedProperties.begin(), kReservedProperties.end(),
        [&](const auto& property) { return property.first == entry.key; });
    if (reserved != kReservedProperties.end()) {
      context.Error(entry.value.key_mark, entry.value.path,
                    "reserved property; " + std::string(reserved->second));
      continue;
    }
    if (std::optional<Scalar> scalar = ParseScalar(context, entry.value)) {
      out[entry.key] = scalar->text;
    }
  }
  return out;
}

// kafka.event_key_env / kafka.event_key_file, and the keys they name. No
// message repeats a key, and none repeats a value that may be one.
void ReadEventKeys(Context& context, MapReader& map, KafkaConfig& out) {
  if (std::optional<Value> inline_key = map.Get("event_key")) {
    context.Error(inline_key->key_mark, inline_key->path,
                  "the event key itself never goes in the config file; name "
                  "where to read it: event_key_env: VARIABLE or "
                  "event_key_file: PATH");
  }
  std::optional<Value> env = map.Get("event_key_env");
  std::optional<Value> file = map.Get("event_key_file");
  std::optional<std::string> env_name;
  std::optional<std::string> file_path;
  if (env) {
    env_name = context.Text(*env, "the name of an environment variable");
  }
  if (file) file_path = context.Text(*file, "the path of a file");
  const bool use_env = env_name && !env_name->empty();
  const bool use_file = file_path && !file_path->empty();
  if (use_env && use_file) {
    context.Error(*file,
                  "expected event_key_env or event_key_file, not both "
                  "(event_key_env is given)");
    return;
  }
  try {
    if (use_env) {
      out.event_keys = EventKeysFromEnv(*env_name, context.env());
      out.event_key_env = *env_name;
    } else if (use_file) {
      out.event_keys = EventKeysFromFile(*file_path);
      out.event_key_file = *file_path;
    }
  } catch (const ConfigError& e) {
    context.Error(use_env ? *env : *file, e.what());
  }
}

// `key`, if present: a duration from `low` to `high` (into `out`), or
// `word` (nullopt into `out`); anything else is an error naming `expected`.
void ReadDurationOrWord(Context& context, MapReader& map, std::string_view key,
                        std::string_view word, const std::string& expected,
                        milliseconds low, milliseconds high,
                        std::optional<milliseconds>& out) {
  const std::optional<Value> value = map.Get(key);
  if (!value) return;
  const std::optional<std::string> text = context.Text(*value, expected);
  if (!text) return;
  if (*text == word) {
    out = std::nullopt;
  } else if (text->empty() || text->front() < '0' || text->front() > '9') {
    context.Error(*value, "expected " + expected + ", found " + Quote(*text));
  } else if (auto parsed =
                 DurationFromText(context, *value, *text, low, high)) {
    out = *parsed;
  }
}

std::optional<KafkaConfig> ReadKafka(Context& context,
                                     const std::optional<Value>& value) {
  if (!value) return std::nullopt;
  KafkaConfig out;
  MapReader map(context, *value, "a mapping of Kafka settings");
  if (std::optional<Value> bootstrap =
          map.Require("bootstrap", kBootstrapExpected)) {
    auto parse = Checked(kBootstrapExpected, CheckBootstrap);
    if (auto parsed = parse(context, *bootstrap)) out.bootstrap = *parsed;
  }
  // Both topics, then that they differ (only when both are valid).
  bool topics_valid = true;
  std::optional<Value> topic_values[2] = {map.Get("unlock_topic"),
                                          map.Get("jobs_topic")};
  std::string* topics[2] = {&out.unlock_topic, &out.jobs_topic};
  for (int i = 0; i < 2; ++i) {
    if (!topic_values[i]) continue;
    auto parsed =
        Checked(kTopicExpected, CheckTopic)(context, *topic_values[i]);
    if (parsed) *topics[i] = *parsed;
    topics_valid = topics_valid && parsed.has_value();
  }
  if (topics_valid && out.unlock_topic == out.jobs_topic) {
    // One of them was given, or the defaults would differ.
    const Value& where = topic_values[1] ? *topic_values[1] : *topic_values[0];
    context.Error(where,
                  "expected a topic other than kafka.unlock_topic, "
                  "found '" +
                      out.jobs_topic + "' for both");
  }
  ReadDurationOrWord(context, map, "fetch_wait", "auto",
                     "a duration such as 500ms (0 to 5m), or auto",
                     milliseconds(0), minutes(5), out.fetch_wait);
  if (std::optional<Value> fan_out = map.Get("fan_out")) {
    if (auto index = ParseChoice(context, *fan_out, {"broadcast", "targeted"}))
      out.fan_out = static_cast<FanOut>(*index);
  }
  map.Read("targeted_replay", out.targeted_replay, Int(0, 1'000'000));
  map.Read("targeted_linger", out.targeted_linger,
           Duration(milliseconds(0), hours(1)));
  map.Read("message_timeout", out.message_timeout, Duration(milliseconds(1)));
  map.Read("queue_max_messages", out.queue_max_messages, Int(1, 10'000'000));
  map.Read("client_id", out.client_id,
           Checked("a Kafka client id", CheckNonEmpty));
  if (std::optional<Value> properties = map.Get("properties")) {
    out.properties = ReadProperties(context, *properties);
  }
  ReadEventKeys(context, map, out);
  map.Finish();
  return out;
}

LocksConfig ReadLocks(Context& context, const Value& value) {
  LocksConfig out;
  MapReader map(context, value, "a mapping of lock settings");
  map.Read("lease", out.lease, Duration(milliseconds(30)));
  ReadDurationOrWord(context, map, "wait", "forever",
                     "a duration such as 30s, 0 (try once) or forever",
                     milliseconds(0), kMaxDuration, out.wait);
  map.Read("park_cap", out.park_cap, Duration(milliseconds(1), hours(1)));
  map.Read("fair", out.fair, Bool());
  map.Read("spin_max_hold", out.spin_max_hold,
           Duration(milliseconds(0), minutes(1)));
  bool windows_valid = true;
  std::optional<Value> presence = map.Get("presence_window");
  if (presence) {
    auto parsed = ParseDurationValue(context, *presence, milliseconds(30));
    if (parsed) out.presence_window = *parsed;
    windows_valid = parsed.has_value();
  }
  std::optional<Value> claim = map.Get("claim_window");
  if (claim) {
    auto parsed = ParseDurationValue(context, *claim, milliseconds(1));
    if (parsed) out.claim_window = *parsed;
    windows_valid = windows_valid && parsed.has_value();
  }
  // lockcore's rule: a grantee parks up to presence_window / 3 between
  // checks, so a hand-off must stay claimable for longer than that.
  if (windows_valid && out.claim_window <= out.presence_window / 3) {
    const std::string bound = FormatDuration(out.presence_window / 3);
    if (claim) {
      context.Error(*claim,
                    "expected a duration greater than presence_window / 3 "
                    "= " +
                        bound + ", found '" + FormatDuration(out.claim_window) +
                        "'");
    } else {
      context.Error(*presence,
                    "expected less than 3 * claim_window (claim_window "
                    "defaults to " +
                        FormatDuration(out.claim_window) + "), found '" +
                        FormatDuration(out.presence_window) +
                        "'; raise claim_window above " + bound);
    }
  }
  // And at most presence_window, so a dead waiter costs one window at most.
  if (windows_valid && out.claim_window > out.presence_window) {
    context.Error(claim ? *claim : *presence,
                  "expected claim_window <= presence_window = " +
                      FormatDuration(out.presence_window) +
                      ", found claim_window '" +
                      FormatDuration(out.claim_window) + "'");
  }
  map.Finish();
  return out;
}

// metrics.targets: a list of HOST:PORT, each once.
std::vector<std::string> ReadTargets(Context& context, const Value& value) {
  std::vector<std::string> out;
  const YAML::Node& node = value.node;
  if (!node.IsDefined() || node.IsNull()) return out;
  if (!node.IsSequence()) {
    context.Error(value,
                  "expected a list of HOST:PORT (the workers' "
                  "metrics.listen), found " +
                      Found(node));
    return out;
  }
  for (size_t i = 0; i < node.size(); ++i) {
    const Value item_value = Item(value, i);
    std::optional<std::string> target = ParseChecked(
        context, item_value, kTargetExpected,
        [](std::string_view text) { return CheckHostPort(text, 1); });
    if (!target) continue;
    if (std::find(out.begin(), out.end(), *target) != out.end()) {
      context.Error(item_value, "'" + *target + "' is listed twice");
      continue;
    }
    out.push_back(std::move(*target));
  }
  return out;
}

MetricsConfig ReadMetrics(Context& context, const Value& value) {
  MetricsConfig out;
  MapReader map(context, value, "a mapping of metrics settings");
  map.Read("listen", out.listen, Checked(kListenExpected, CheckListen));
  if (std::optional<Value> targets = map.Get("targets")) {
    out.targets = ReadTargets(context, *targets);
  }
  map.Finish();
  return out;
}

LoggingConfig ReadLogging(Context& context, const Value& value) {
  LoggingConfig out;
  MapReader map(context, value, "a mapping of logging settings");
  if (std::optional<Value> level = map.Get("level")) {
    if (auto index = ParseChoice(context, *level,
                                 {"debug", "info", "warning", "error"})) {
      out.level = static_cast<LogLevel>(*index);
    }
  }
  if (std::optional<Value> format = map.Get("format")) {
    if (auto index = ParseChoice(context, *format, {"text", "json"})) {
      out.format = static_cast<LogFormat>(*index);
    }
  }
  map.Finish();
  return out;
}

}  // namespace

Config ReadConfig(Context& context, const Value& root) {
  Config config;
  MapReader map(context, root, "a mapping of sections");
  config.redis =
      ReadRedis(context, map.Get("redis").value_or(Absent(root, "redis")));
  config.kafka = ReadKafka(context, map.Get("kafka"));
  config.locks =
      ReadLocks(context, map.Get("locks").value_or(Absent(root, "locks")));
  config.worker =
      ReadWorker(context, map.Get("worker").value_or(Absent(root, "worker")),
                 config.kafka.has_value());
  config.metrics = ReadMetrics(
      context, map.Get("metrics").value_or(Absent(root, "metrics")));
  config.logging = ReadLogging(
      context, map.Get("logging").value_or(Absent(root, "logging")));
  map.Finish();
  return config;
}

}  // namespace lockfleet::config::internal
