#include <string>

#include "lockfleet/config/config.h"

namespace lockfleet::config {
namespace {

// Keep in step with config.h: the tests load this and compare its values.
constexpr char kExample[] =
    R"(# lockfleet configuration (check it with: lockfleet config check FILE)
#
# Every key except redis.url is optional; the values below are the defaults
# unless a comment says otherwise. Durations: 500ms, 2s, 1.5m, 1h, 0.
# Any value may read the environment: ${VAR}, ${VAR:-default}; $$ is a '$'.

redis:
  # Required. redis://[[user]:password@]host[:port][/db], rediss://... for
  # TLS, unix:///path/to.sock[?db=N], or through Sentinel:
  # redis+sentinel://[[user]:password@]host:26379[,host:port...]/MASTER[/db]
  # (rediss+sentinel:// for TLS), or a Redis Cluster from seed nodes:
  # redis+cluster://[[user]:password@]host:6379[,host:port...]
  # (rediss+cluster:// for TLS). Keep passwords out of this file:
  #   url: redis://:${REDIS_PASSWORD}@redis.internal:6379
  url: ${LOCKFLEET_REDIS:-redis://127.0.0.1:6379}
  pool_size: 4              # connections per process (per cluster node)
  connect_timeout: 2s       # TCP connect and TLS handshake together
  command_timeout: 2s       # also bounds the wait for a pooled connection
  key_prefix: lockfleet     # all processes sharing locks must agree on it
  # Replica acknowledgement: after every change of a lock, WAIT until this
  # many replicas have it (a grant they do not confirm in replica_timeout is
  # given back and fails with redis_replicas). 0 = off. See docs/lockcore.md.
  min_replicas: 0
  replica_timeout: 1s
  # TLS: a rediss:// url turns it on and verifies the server against the
  # system's CAs ($SSL_CERT_FILE / $SSL_CERT_DIR work). Optionally (only
  # with rediss://; defaults shown):
  # tls:
  #   ca_file: ""             # PEM CAs to trust instead, e.g. /etc/redis/ca.pem
  #   ca_dir: ""              # or a hashed directory of them (openssl rehash)
  #   cert_file: ""           # client certificate (mutual TLS), with key_file
  #   key_file: ""            # its unencrypted PEM private key
  #   server_name: ""         # name the server's certificate must carry
  #                           # ("": the url's host)
  #   insecure_skip_verify: false   # tests only: verify nothing
  # Sentinel: the url's user and password are the master's. Sentinels that
  # want their own AUTH (only with redis+sentinel://):
  # sentinel:
  #   user: ""
  #   password: ${SENTINEL_PASSWORD}

# Optional: without this section there is no Kafka; a release then wakes
# waiters in the same process at once and others within locks.park_cap.
kafka:
  # Required in this section (this example's default is not).
  bootstrap: ${LOCKFLEET_KAFKA:-127.0.0.1:9092}
  unlock_topic: lockfleet.unlock   # unlock events that wake waiters
  jobs_topic: lockfleet.jobs       # jobs for worker.sources.kafka_jobs
  fetch_wait: auto          # 1ms on the embedded broker, 500ms on a real one; or 0..5m
  # broadcast: every process fetches every unlock event (small fleets);
  # targeted: only the partitions of the names it waits on (large fleets:
  # key the unlock topic over many partitions, docs/unlock-events.md).
  fan_out: broadcast
  targeted_replay: 64       # targeted: records re-read when a partition is added
  targeted_linger: 0        # targeted: kept fetched after its last wait
  message_timeout: 5s       # undelivered events are dropped after this
  queue_max_messages: 100000
  client_id: lockfleet
  # Passed to librdkafka as written (default: none), for example:
  #   properties:
  #     security.protocol: SASL_SSL
  #     sasl.mechanism: PLAIN
  #     sasl.username: ${KAFKA_USER}
  #     sasl.password: ${KAFKA_PASSWORD}
  properties: {}
  # Authenticate unlock events with HMAC-SHA256 (docs/unlock-events.md):
  # where every process of the deployment reads the same key. Never the key
  # itself. At most one of the two; "" for none (events are not signed, and
  # signatures are not checked). The secret holds one key per line, >= 16
  # bytes each (openssl rand -base64 32); the first signs, all verify.
  event_key_env: ""         # e.g. LOCKFLEET_EVENT_KEY
  event_key_file: ""        # e.g. /run/secrets/lockfleet-event-key

locks:
  lease: 30s                # watchdog lease, renewed every lease/3; >= 30ms
  wait: forever             # default wait to acquire; 0 tries once
  park_cap: 1s              # longest sleep between checks while waiting
  fair: true                # first come, first served (false: barging)
  presence_window: 3s       # a silent queued waiter loses its place after this
  claim_window: 2s          # > presence_window / 3, <= presence_window
  spin_max_hold: 5ms        # queue heads check for their grant on locks held
                            # at most this long (no event wait); 0: never

worker:
  threads: 4                # jobs at once per process, 1..1024
  grace_period: 20s         # running jobs get this long on shutdown
  max_attempts: 3           # tries of a job whose handler throws, 1..100
  dedup_ttl: 168h           # a finished job id is remembered this long
  health_listen: ""         # HOST:PORT for /livez and /readyz; "" for none
  # This worker's own directory (one worker each; created if missing): after
  # a crash the next process on it gives back the locks the crashed one held
  # at once, instead of the fleet waiting locks.lease for them. "" for none.
  state_dir: ""             # e.g. /var/lib/lockfleet
  sources:
    kafka_jobs:
      enabled: false        # true: consume jobs from kafka.jobs_topic
      group: lockfleet-workers
    # Jobs on a timetable; one worker of the fleet runs each firing, under
    # `lock` (default: the name). Give `every` (>= 1s) or `cron` (five
    # fields, UTC). `catch_up`: how many occurrences run when a worker finds
    # several due at once or one overdue (after a suspend or clock step): the
    # latest N, the rest skipped; 0 skips them all. 0..1000. Default: 1.
    # `limit`: a concurrency limit across the fleet, held after the lock
    # while the job runs: `take` (default 1) of the semaphore `name`'s
    # `permits` (1..1000000); a crashed worker's permits come back when
    # their lease ends. Kafka jobs give the same as "limit": {...}.
    # `lock_mode: write`: hold the read-write lock `lock` exclusively instead
    # of the plain lock, so that it never runs beside Kafka jobs that read
    # under that lock ("lock_mode": "read": they run side by side). A
    # schedule cannot take `read` (a shared lock cannot make one worker run
    # an occurrence). The plain lock and the read-write lock of one name do
    # not exclude each other: give all jobs on a lock lock_mode, or none.
    schedules:
      - name: nightly-report
        lock: report:nightly
        cron: "0 3 * * *"
        handler: sleep
        payload: {ms: 100}
        limit: {name: partner-api, permits: 3}
      - name: catalogue-rebuild
        lock: catalogue
        lock_mode: write
        every: 1h
        handler: sleep
        payload: {ms: 100}
      - name: heartbeat
        every: 1m
        catch_up: 1
        handler: sleep
        payload: {ms: 1}
  # Settings per handler: strings, numbers or booleans. Default: none.
  handlers:
    sleep:
      default_ms: 100       # when a job's payload has no `ms`

metrics:
  listen: ""                # HOST:PORT for /metrics, e.g. 127.0.0.1:9464; "" for none
  # The workers' /metrics endpoints, for 'lockfleet top' and 'lockfleet jobs
  # status' (the workers ignore it). Default: none.
  # targets: [10.0.0.11:9464, 10.0.0.12:9464]

logging:
  level: info               # debug | info | warning | error
  format: text              # text | json
)";

}  // namespace

std::string ExampleConfig() { return kExample; }

}  // namespace lockfleet::config
