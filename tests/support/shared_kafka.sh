#!/usr/bin/env bash
# The ctest fixture real_kafka (tests/CMakeLists.txt): one Apache Kafka
# broker (kafka-local) for every real-broker test of a ctest run, instead of
# one per test (support/real_kafka.h: RealKafka::Shared).
#
# Usage: shared_kafka.sh start|stop DATA_DIR KAFKA_LOCAL
#
#   start  stops what an interrupted earlier run left in DATA_DIR, then
#          starts a broker there with RealKafka::SharedSettings()'s
#          settings. Exits 0 even when there is no kafka-local or java, or
#          the broker does not start: the tests then skip, or each starts a
#          private broker (which reports its own failure). A failing setup
#          test would instead mark every test requiring the fixture as
#          failed without running it.
#   stop   stops the broker and removes DATA_DIR; fails only when a JVM of
#          DATA_DIR outlives SIGKILL.
#
# $LOCKFLEET_KAFKA_LOCAL, when set, wins over KAFKA_LOCAL (as in the tests);
# with $LOCKFLEET_NO_REAL_KAFKA=1 (the tests skip) both do nothing.
set -uo pipefail

[[ $# -eq 3 ]] || { echo "usage: $0 start|stop DATA_DIR KAFKA_LOCAL" >&2; exit 2; }
action="$1" data="$2" kafka_local="${LOCKFLEET_KAFKA_LOCAL:-$3}"

if [[ "${LOCKFLEET_NO_REAL_KAFKA:-}" == 1 ]]; then
  echo "LOCKFLEET_NO_REAL_KAFKA=1: the real-broker tests skip, no broker"
  exit 0
fi
if [[ ! -x "$kafka_local" ]] || ! command -v java >/dev/null; then
  echo "no kafka-local ($kafka_local) or no java: the real-broker tests skip" \
    "(or fail, with LOCKFLEET_REQUIRE_REAL_KAFKA=1)"
  exit 0
fi

case "$action" in
  start)
    "$kafka_local" stop --data "$data" >/dev/null 2>&1 || true
    rm -rf "$data"
    # Keep in step with RealKafka::SharedSettings().
    if ! "$kafka_local" start --data "$data" \
      --set offsets.topic.num.partitions=1; then
      rm -f "$data/run/bootstrap"
      echo "warning: the shared broker did not start: each real-broker test" \
        "starts a private one"
    fi
    exit 0
    ;;
  stop)
    "$kafka_local" stop --data "$data" || exit 1
    rm -rf "$data"
    ;;
  *)
    echo "usage: $0 start|stop DATA_DIR KAFKA_LOCAL" >&2
    exit 2
    ;;
esac
