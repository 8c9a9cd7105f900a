// The deployment config: one YAML file that drives lockfleet.
//
// LoadFile reads, expands, parses and validates a file once, at the
// boundary, and returns plain structs with every default filled in; nothing
// downstream sees YAML. The structs mirror the file: `redis.pool_size` is
// Config::redis.pool_size. The config module depends on nothing else of
// lockfleet: main() maps these structs onto each module's own options
// (RedisOptions, LockClientOptions, KafkaOptions, ...).
//
// A complete, commented example is ExampleConfig() (`lockfleet config
// example`); a minimal file is
//
//   redis:
//     url: redis://127.0.0.1:6379
//
// Rules for every file:
//   * Unknown keys are errors (with the closest known key suggested), so a
//     typo never silently falls back to a default. Duplicate keys are errors.
//   * A section written with nothing under it ("metrics:") is an empty
//     section: all defaults. Any other empty value ("pool_size:") is an
//     error; write "" for an empty string.
//   * Durations use the grammar of duration.h: 500ms, 2s, 1.5m, 1h, 0.
//   * Booleans are true or false. Integers are decimal; a quoted number
//     ("4") is accepted too.
//   * Every scalar value (never a key) may use the environment:
//       ${VAR}            the value of VAR; an error if VAR is not set
//       ${VAR:-default}   the value of VAR, or `default` if VAR is unset or
//                         empty (`default` is literal text without '$'/'}')
//       $$                a literal '$'
//     Any other '$' is an error, so "$VAR" (missing braces) is caught.
//     Expansion happens before the value is checked, so
//     `threads: ${WORKER_THREADS:-4}` works. Inside a flow mapping ({...})
//     quote such a value ("${VAR}"): there '{' and '}' are YAML syntax.
//   * YAML merge keys (<<) are not supported; anchors and aliases are.
//
// Errors: LoadFile and LoadString check everything and throw one
// ConfigErrors (error.h) listing every problem found, each naming
// FILE:LINE:COLUMN, the key path, what was expected and what was found.
//
// Thread-safety: the functions may be called concurrently, except that
// reading the process environment (the default EnvLookup) races with a
// concurrent setenv(), as getenv() does.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lockfleet/config/cron.h"
#include "lockfleet/config/error.h"

namespace lockfleet::config {

// `redis.tls:` — how a rediss:// URL's TLS connection is verified and
// authenticated. Optional, and only with a rediss:// URL: the URL alone turns
// TLS on (every field below has a working default), and a tls section beside
// a redis:// or unix:// URL is an error rather than a silent plaintext
// connection. Paths are read when the file is loaded: each must exist and be
// readable (relative paths from the working directory).
struct RedisTlsConfig {
  // The CA certificates that may sign the server's certificate: a PEM file
  // (a bundle), and/or a directory in OpenSSL's hashed layout (`openssl
  // rehash DIR`). Neither (the default): the system trust store, found the
  // way OpenSSL's default verify paths find it, so $SSL_CERT_FILE and
  // $SSL_CERT_DIR work as for other OpenSSL clients.
  std::string ca_file;
  std::string ca_dir;
  // The client certificate (PEM; may hold the intermediate chain after it)
  // and its private key (PEM, not encrypted), for a server that requires one
  // (redis-server --tls-auth-clients yes: mutual TLS). Both or neither.
  std::string cert_file;
  std::string key_file;
  // The name the server's certificate must carry (a DNS name, checked
  // against its subjectAltName, or an IP address), also sent as SNI.
  // "" (the default): the URL's host.
  std::string server_name;
  // Tests only: accept any server certificate — no chain, expiry or name
  // check, so anyone on the path can read and change the traffic. Not with
  // ca_file or ca_dir. Default: false (everything is verified).
  bool insecure_skip_verify = false;

  bool operator==(const RedisTlsConfig&) const = default;
};

// AUTH [user] password. `password` is SECRET: never print it.
struct RedisAuthConfig {
  std::string user;
  std::string password;

  bool operator==(const RedisAuthConfig&) const = default;
};

// `redis:` — the Redis server holding the locks. Required (for `url`).
struct RedisConfig {
  // Required. redis://[[user]:password@]host[:port][/db] (port 6379 when
  // left out; IPv6 hosts in brackets), rediss://... for TLS (see `tls`), or
  // unix:///path/to.sock[?db=N], or a master found through Sentinel:
  // redis+sentinel://[[user]:password@]host[:port][,...]/MASTER[/db]
  // (rediss+sentinel:// for TLS), or a Redis Cluster from seed nodes:
  // redis+cluster://[[user]:password@]host[:port][,...] (rediss+cluster://
  // for TLS; pool_size is then per node). Percent-escape '@' and ':' in
  // passwords;
  // ${VAR} keeps them out of files. The one parser of these URLs is
  // lockfleet/config/redis_url.h.
  std::string url;
  int pool_size = 4;  // connections per process (per node), 1..1024
  std::chrono::milliseconds connect_timeout{2000};  // > 0
  // Bounds every command and the wait for a pooled connection. > 0.
  std::chrono::milliseconds command_timeout{2000};
  // Prefix of every Redis key lockfleet writes; processes that share locks
  // must share it. Non-empty, without '{' or '}'.
  std::string key_prefix = "lockfleet";
  // `tls:` — only with a rediss:// url (see RedisTlsConfig).
  RedisTlsConfig tls;
  // Replica acknowledgement (docs/lockcore.md): every change of a lock is
  // followed by WAIT min_replicas replica_timeout; a grant fewer replicas
  // acknowledged is given back. 0..100, 0 = off.
  int min_replicas = 0;
  std::chrono::milliseconds replica_timeout{1000};  // > 0
  // `sentinel:` — only with a redis+sentinel:// url: how lockfleet
  // authenticates to the sentinels (the url's user and password are the
  // master's). Empty: no AUTH.
  RedisAuthConfig sentinel;

  bool operator==(const RedisConfig&) const = default;
};

// Which unlock events a process fetches (notifier::FanOut): every one, or
// only those of the names it waits on.
enum class FanOut { kBroadcast, kTargeted };

// `kafka:` — optional. Absent: no Kafka; a release wakes waiters of the same
// process at once and others within locks.park_cap. A `kafka:` with nothing
// under it is present, and lacks its bootstrap.
struct KafkaConfig {
  // Required when the section is present: HOST:PORT[,HOST:PORT...] (IPv6
  // hosts in brackets; an optional SCHEME:// before each, as librdkafka
  // allows).
  std::string bootstrap;
  // Topic of the unlock events that wake waiters in other processes.
  // Kafka topic names: 1..249 of [a-zA-Z0-9._-], not "." or "..".
  std::string unlock_topic = "lockfleet.unlock";
  // Topic the worker consumes jobs from (worker.sources.kafka_jobs). Same
  // rules; must differ from unlock_topic.
  std::string jobs_topic = "lockfleet.jobs";
  // How long a fetch waits for data on an empty partition (0..5m): the
  // wake-up latency floor on a broker that does not long-poll. `auto` (or
  // absent; nullopt): chosen for the broker when it first answers — 1 ms on
  // the embedded broker (librdkafka's mock cluster), 500 ms on a real one,
  // which long-polls, so the long wait costs no latency and saves the idle
  // fetches; 100 ms there with fan_out targeted (notifier::FetchWaitFor).
  // The worker's jobs consumer uses the same wait when one is set, else
  // chooses as the unlock consumer does (1 ms embedded, 500 ms real), once,
  // at start (500 ms if the broker does not answer within 1 s then).
  std::optional<std::chrono::milliseconds> fetch_wait;
  // broadcast (every process fetches every unlock event: small fleets) or
  // targeted (a process fetches only the partitions of the names it waits
  // on: large fleets, with the unlock topic keyed over many partitions).
  FanOut fan_out = FanOut::kBroadcast;
  // Targeted: records re-read before a partition's end when it is added to
  // the fetch (0..1000000), and how long it stays fetched after the last
  // wait on it (0..1h). librdkafka's `partitioner` property is refused:
  // every process must put a lock's events on the same partition.
  int targeted_replay = 64;
  std::chrono::milliseconds targeted_linger{0};
  // A publish not delivered within this is dropped and counted. > 0.
  std::chrono::milliseconds message_timeout{5000};
  int queue_max_messages = 100000;      // producer queue bound, 1..10000000
  std::string client_id = "lockfleet";  // Kafka client.id; non-empty
  // librdkafka properties passed verbatim to producer and consumer, after
  // the settings above (security.protocol, sasl.*, ssl.*, ...). Values may
  // be strings, numbers or booleans; they are passed as written. Properties
  // that duplicate a key above (bootstrap.servers, message.timeout.ms, ...)
  // are rejected: set the key above instead. Default: none.
  std::map<std::string, std::string> properties;
  // Authentication of unlock events (HMAC-SHA256, docs/unlock-events.md):
  // where every process of the deployment reads the shared key — never the
  // key itself, which no config file holds. At most one of the two; "" (the
  // default) for neither: events are sent unsigned, and signatures on
  // received ones are ignored.
  //   event_key_env   the name of an environment variable holding the key
  //   event_key_file  the path of a file holding it (a mounted secret;
  //                   relative paths from the working directory)
  // The secret holds one key per line, each at least 16 bytes; the first
  // signs, all verify (rotation: event_keys.h). Read, and checked, when
  // the file is loaded: an unset variable or an unreadable file is an error
  // of the file at that key.
  std::string event_key_env;
  std::string event_key_file;
  // The keys read from there. SECRET: never print or log them. Empty without
  // event_key_env / event_key_file.
  std::vector<std::string> event_keys;

  bool operator==(const KafkaConfig&) const = default;
};

// `locks:` — how locks are held and waited for.
struct LocksConfig {
  // Watchdog lease: renewed every lease/3 while held, so it bounds how long
  // a lock outlives a crashed holder, not how long it may be held. >= 30ms.
  std::chrono::milliseconds lease{30000};
  // Default acquisition wait. "forever" (or the key left out) waits without
  // limit (std::nullopt here; cancellation still ends it); "0" tries once.
  std::optional<std::chrono::milliseconds> wait;
  // Longest single park of a waiter before it re-checks Redis: the safety
  // net under Kafka wake-ups. 1ms..1h.
  std::chrono::milliseconds park_cap{1000};
  // Queue waiters in arrival order (true) or let them barge (false).
  bool fair = true;
  // A queued waiter silent this long loses its place. >= 30ms.
  std::chrono::milliseconds presence_window{3000};
  // A handed-off lock not claimed within this passes on. Must exceed
  // presence_window / 3.
  std::chrono::milliseconds claim_window{2000};
  // The head of a fair queue checks for its grant itself (spinning) on locks
  // this process holds at most this long on average. 0 = never. 0..60s.
  std::chrono::milliseconds spin_max_hold{5};

  bool operator==(const LocksConfig&) const = default;
};

// A free-form scalar setting (a handler setting or a payload field), typed
// as YAML would type it. Quoted values are always strings; a plain value is
// kBool for true/false, kInteger for [-+]digits, kNumber for other decimal
// numbers (1.5, 1e3), else kString. `text` is the value as written, after
// ${VAR} expansion.
struct Scalar {
  enum class Type { kString, kInteger, kNumber, kBool };
  Type type = Type::kString;
  std::string text;

  bool operator==(const Scalar&) const = default;
};

// Settings by name. Values are scalars only (no nested maps or lists).
using Settings = std::map<std::string, Scalar>;

// A job's concurrency limit (`limit:` of a schedule, "limit" of a Kafka
// job): while it runs, the job holds `take` permits of the semaphore `name`,
// which has `permits` permits (lockcore's Semaphore: permits expire with
// their holder, so a crashed worker's come back when its lease ends).
struct LimitConfig {
  std::string name;  // the semaphore: 1..1024 bytes, not starting with '}'
  int permits = 1;   // how many such runs at once, fleet-wide: 1..1000000
  int take = 1;      // permits one run holds: 1..permits. Default: 1

  bool operator==(const LimitConfig&) const = default;
};

// A job's `lock_mode` (of a schedule; "lock_mode" of a Kafka job): which
// lock the job runs under. Absent (std::nullopt): the plain exclusive lock
// named by its `lock`, as always. kRead / kWrite: the read-write lock of that
// name (lockcore's ReadWriteLock), held in that mode — read jobs on one name
// run side by side, a write job runs alone. The plain lock and the
// read-write lock of one name are two different locks that do not exclude
// each other: all jobs on one name should agree on whether they give
// lock_mode.
enum class LockMode { kRead, kWrite };

// "read" / "write": the config and job spelling.
const char* LockModeName(LockMode mode) noexcept;
// The mode spelled `name` ("read" or "write", exactly), else std::nullopt.
std::optional<LockMode> LockModeFromName(std::string_view name) noexcept;

// One entry of `worker.sources.schedules:` — a job the worker fleet runs
// on a timetable, under a lock so that one worker runs each firing.
struct ScheduleConfig {
  // Required, unique among the schedules: 1..128 of [A-Za-z0-9._:-]. Used
  // in logs and as a metric label.
  std::string name;
  // The lock held while the job runs: 1..1024 bytes. Default: the name.
  std::string lock;
  // Exactly one of `every` and `cron` is given.
  std::optional<std::chrono::milliseconds> every;  // interval, >= 1s
  std::optional<CronSchedule> cron;                // 5-field, UTC (see cron.h)
  std::string handler;  // required, non-empty: the handler that runs it
  Settings payload;     // handed to the handler. Default: empty
  // How many occurrences a worker runs when it finds several due at once or
  // one overdue (after a suspend, SIGSTOP or a clock step): the latest
  // `catch_up` of them, oldest first; the others are skipped. 0: none, wait
  // for the next occurrence. 0..1000. Default: 1 (only the latest).
  int catch_up = 1;
  // Held while it runs, after the lock. Default: none.
  std::optional<LimitConfig> limit;
  // The read-write lock `lock` in this mode instead of the plain lock.
  // Only kWrite: an occurrence runs once, under a lock one worker holds, and
  // a read lock is shared (the config refuses `lock_mode: read` here).
  // Default: none (the plain lock).
  std::optional<LockMode> lock_mode;

  bool operator==(const ScheduleConfig&) const = default;
};

// `worker.sources.kafka_jobs:` — jobs arriving on kafka.jobs_topic.
struct KafkaJobsConfig {
  bool enabled = false;                     // true requires the kafka section
  std::string group = "lockfleet-workers";  // consumer group; non-empty

  bool operator==(const KafkaJobsConfig&) const = default;
};

// `worker.sources:` — where jobs come from.
struct SourcesConfig {
  KafkaJobsConfig kafka_jobs;
  std::vector<ScheduleConfig> schedules;  // Default: none

  bool operator==(const SourcesConfig&) const = default;
};

// `worker:` — the job-worker fleet (`lockfleet worker`).
struct WorkerConfig {
  int threads = 4;  // jobs run concurrently per process, 1..1024
  // On shutdown, running jobs get this long to finish before they are
  // cancelled. 0 cancels at once.
  std::chrono::milliseconds grace_period{20000};
  // A job whose handler throws is retried this many times in all (1..100)
  // before it is given up and recorded as failed.
  int max_attempts = 3;
  // How long a finished job's id is remembered, so that a redelivered copy
  // is skipped instead of run again. >= 1s. Default: 7 days.
  std::chrono::milliseconds dedup_ttl{std::chrono::hours(24 * 7)};
  // HOST:PORT of the health endpoint (port 0: any free port); "" (the
  // default) serves none.
  std::string health_listen;
  // A directory of this worker's own (created if missing) where it keeps the
  // locks it holds, so that after a crash the next process started on it
  // gives them back at once instead of leaving them to run out locks.lease
  // (see lockfleet/worker/hold_journal.h), and where it notices that it is
  // crash-looping. One worker per directory: a second one is refused. ""
  // (the default): none. Relative paths are from the working directory.
  std::string state_dir;
  SourcesConfig sources;
  // Settings per handler name, e.g. handlers["sleep"]["default_ms"].
  // Names and keys are checked when the worker starts (handlers are
  // registered in code), not here. Default: none.
  std::map<std::string, Settings> handlers;

  bool operator==(const WorkerConfig&) const = default;
};

// `metrics:` — the Prometheus endpoint.
struct MetricsConfig {
  // HOST:PORT to serve /metrics on (port 0: any free port); "" (the
  // default) serves none.
  std::string listen;
  // HOST:PORT of each worker's /metrics endpoint (their `metrics.listen`),
  // read by the tools that watch the fleet (`lockfleet top`, `lockfleet
  // jobs status`); the workers themselves ignore it. Default: none.
  std::vector<std::string> targets;

  bool operator==(const MetricsConfig&) const = default;
};

enum class LogLevel { kDebug, kInfo, kWarning, kError };
enum class LogFormat { kText, kJson };

// "debug", "info", "warning", "error" / "text", "json": the config spelling.
const char* LogLevelName(LogLevel level) noexcept;
const char* LogFormatName(LogFormat format) noexcept;

// `logging:`
struct LoggingConfig {
  LogLevel level = LogLevel::kInfo;     // debug | info | warning | error
  LogFormat format = LogFormat::kText;  // text | json (one object a line)

  bool operator==(const LoggingConfig&) const = default;
};

// The whole file.
struct Config {
  RedisConfig redis;
  std::optional<KafkaConfig> kafka;  // std::nullopt: no `kafka:` section
  LocksConfig locks;
  WorkerConfig worker;
  MetricsConfig metrics;
  LoggingConfig logging;

  bool operator==(const Config&) const = default;
};

// The value of environment variable `name`, or std::nullopt if it is unset.
using EnvLookup =
    std::function<std::optional<std::string>(const std::string& name)>;

struct LoadOptions {
  // Where ${VAR} looks. Default (empty): the process environment (getenv).
  // Tests pass a map.
  EnvLookup env;
};

// Reads and validates the file at `path`. Throws ConfigErrors for every
// problem found, also when the file cannot be read (no position then), is
// empty, is not YAML (the parser's position), holds more than one YAML
// document, or its top level is not a mapping.
Config LoadFile(const std::string& path, const LoadOptions& options = {});

// Same for text already in memory; `name` stands for the file in errors.
Config LoadString(std::string_view text, std::string_view name,
                  const LoadOptions& options = {});

// A complete config with every key, each commented with its meaning and
// default. It loads cleanly with no environment variables set.
std::string ExampleConfig();

}  // namespace lockfleet::config
