# Sourced by the bench scripts: one private real Apache Kafka broker
# (kafka-local, from $LOCKFLEET_KAFKA_LOCAL or ../shared/kafka) for a whole
# script, with the unlock topic created as an operator does
# (deploy/README.md), stopped and removed when the script exits.
#
#   start_real_broker   sets real_bootstrap (HOST:PORT), or leaves it empty
#                       with a note on stderr when there is no kafka-local,
#                       no java, or the broker did not start.
real_bootstrap=""
kafka_dir=""
kafka_local="${LOCKFLEET_KAFKA_LOCAL:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/shared/kafka/kafka-local}"

stop_real_broker() {
  if [[ -n "$kafka_dir" ]]; then
    "$kafka_local" stop --data "$kafka_dir/data" >/dev/null 2>&1 || true
    rm -rf "$kafka_dir"
    kafka_dir=""
  fi
}

start_real_broker() {
  trap stop_real_broker EXIT
  if [[ ! -x "$kafka_local" ]] || ! command -v java >/dev/null; then
    echo "no kafka-local or java: real-broker cells left out" >&2
    return 0
  fi
  kafka_dir="$(mktemp -d /tmp/lockfleet-bench-kafka-XXXXXX)"
  if real_bootstrap="$("$kafka_local" start --data "$kafka_dir/data" 2>"$kafka_dir/start.err" |
    sed -n 's/^bootstrap: //p')" && [[ -n "$real_bootstrap" ]]; then
    echo "real broker (kafka-local): $real_bootstrap" >&2
    local zk_port
    zk_port="$(sed -n 's/^clientPort=//p' "$kafka_dir/data/conf/zookeeper.properties")"
    "$(dirname "$(readlink -f "$kafka_local")")/bin/kafka-topics.sh" --zookeeper "127.0.0.1:$zk_port" \
      --create --if-not-exists --topic lockfleet.unlock --partitions 3 \
      --replication-factor 1 >/dev/null
  else
    echo "kafka-local did not start; real-broker cells left out:" >&2
    tail -5 "$kafka_dir/start.err" >&2
    real_bootstrap=""
  fi
}
