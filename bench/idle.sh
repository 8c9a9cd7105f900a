#!/usr/bin/env bash
# Idle cost against the consumers' fetch wait (bench/idle.md, issue 16 item
# 4): 33 processes, fair mode; the first to get the lock holds it for the
# whole run, so 32 stay parked. Per run: the host's CPU over the timed window
# (the bench's host_cpu_percent: the contenders, Redis and the broker), and
# the real broker's own share of it (its JVM's CPU time, read from /proc
# inside the window). Rows: the embedded broker (fetch wait auto: 1 ms), and
# one real broker (kafka-local) with the wait at 1 ms, 100 ms and auto
# (500 ms, the default since). Raw JSON lines (the bench's --json object plus
# "label", "broker", "broker_cpu_percent" and "loadavg") go to
# bench/idle-raw.jsonl; one summary line per run is printed.
#
#   bench/idle.sh [--seconds S]     (default 30, at most 60)
#
# Environment: LOCKFLEET (default build/cli/lockfleet), REPEAT (runs per row,
# default 3).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
seconds=30
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "idle.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
((seconds >= 15 && seconds <= 60)) || { echo "idle.sh: --seconds 15..60" >&2; exit 2; }
lockfleet="${LOCKFLEET:-$root/build/cli/lockfleet}"
raw="$here/idle-raw.jsonl"
repeat="${REPEAT:-3}"
# shellcheck source=bench/kafka-local.sh
source "$here/kafka-local.sh"
start_real_broker
[[ -n "$real_bootstrap" ]] || { echo "idle.sh: needs the real broker" >&2; exit 1; }
java_pid="$(pgrep -f "kafka.Kafka $kafka_dir/data/" | head -n 1)"
ticks() { awk '{print $14 + $15}' "/proc/$java_pid/stat"; }
hz="$(getconf CLK_TCK)"
cores="$(nproc)"

# run LABEL BROKER ARGS...: one bench run; the broker's CPU is sampled from
# 8 s after the start (the processes are up and parked by then) to 4 s
# before the timed window ends.
run() {
  local label="$1" broker="$2" sample=$((seconds - 12)) out load t0 t1
  shift 2
  load="$(cut -d' ' -f1-3 /proc/loadavg)"
  "$lockfleet" bench --mode kafka --processes 33 --seconds "$seconds" \
    --hold-ms $((seconds * 1000)) "$@" --json >"$raw.run" &
  local pid=$!
  sleep 8
  t0="$(ticks)"
  sleep "$sample"
  t1="$(ticks)"
  wait "$pid" || echo "idle.sh: the bench exited $? ($label)" >&2
  out="$(jq -c --arg lbl "$label" --arg b "$broker" --arg load "$load" \
    --argjson bcpu "$(echo "scale=2; 100 * ($t1 - $t0) / ($hz * $sample * $cores)" | bc)" \
    '. + {"label": $lbl, "broker": $b, "loadavg": $load, "broker_cpu_percent": $bcpu}' "$raw.run")"
  rm -f "$raw.run"
  echo "$out" >>"$raw"
  echo "$out" | jq -r '"\(.label): host CPU \(.host_cpu_percent*10|round/10)%, broker JVM \(.broker_cpu_percent)%, Redis commands/s \((.redis_commands / .config.seconds)|round), wake-ups \(.wakeups|tostring), load \(.loadavg)"'
}

for ((i = 0; i < repeat; ++i)); do
  run "embedded, auto (1 ms)" embedded
  run "real, 1 ms" kafka-local --kafka "$real_bootstrap" --fetch-wait-ms 1
  run "real, 100 ms" kafka-local --kafka "$real_bootstrap" --fetch-wait-ms 100
  run "real, auto (500 ms)" kafka-local --kafka "$real_bootstrap"
done
