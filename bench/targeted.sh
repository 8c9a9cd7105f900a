#!/usr/bin/env bash
# Targeted against broadcast fan-out of unlock events (bench/targeted.md,
# issue 16 item 5): P processes of one thread each on K lock names (each
# acquisition picks one at random), a T-partition unlock topic, hold H ms,
# fair mode, on the embedded broker and a real one (kafka-local), broadcast
# and targeted (with each LINGER) side by side. Raw JSON lines (the bench's
# --json object plus "label", "broker" and "loadavg") go to
# bench/targeted-raw.jsonl; one summary line per row is printed.
#
#   bench/targeted.sh [--seconds S]
#
# Environment: LOCKFLEET (default build/cli/lockfleet), PROCS (default 32),
# LOCKS (256), PARTITIONS (16), HOLDS ("1 20"), LINGERS (targeted lingers in
# ms, default "0 2000"), BROKERS ("embedded kafka-local"), REPEAT (3).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
seconds=10
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "targeted.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
lockfleet="${LOCKFLEET:-$root/build/cli/lockfleet}"
raw="$here/targeted-raw.jsonl"
procs="${PROCS:-32}"
locks="${LOCKS:-256}"
partitions="${PARTITIONS:-16}"
repeat="${REPEAT:-3}"
for broker in ${BROKERS:-embedded kafka-local}; do
  kafka=()
  fetch=()
  if [[ "$broker" == kafka-local ]]; then
    kafka=(--kafka kafka-local)
    fetch=(--fetch-wait-ms 100)  # a real broker long-polls (deploy/README.md)
  fi
  for hold in ${HOLDS:-1 20}; do
    for fan in broadcast ${LINGERS:-0 2000}; do
      label="$fan"
      fan_args=(--fan-out broadcast)
      if [[ "$fan" != broadcast ]]; then
        label="targeted-linger-${fan}ms"
        fan_args=(--fan-out targeted --targeted-linger-ms "$fan")
      fi
      load="$(cut -d' ' -f1-3 /proc/loadavg)"
      out="$("$lockfleet" bench "${fan_args[@]}" "${kafka[@]}" "${fetch[@]}" \
        --processes "$procs" --locks "$locks" \
        --partitions "$partitions" --hold-ms "$hold" --seconds "$seconds" \
        --repeat "$repeat" --json)" ||
        echo "targeted.sh: the bench exited $? ($broker $label H=$hold)" >&2
      echo "$out" | jq -c --arg lbl "$label" --arg b "$broker" \
        --arg load "$load" '. + {"label": $lbl, "broker": $b, "loadavg": $load}' >>"$raw"
      echo "$out" | jq -r --arg lbl "$label" --arg b "$broker" --arg h "$hold" \
        --arg load "$load" \
        '.summary as $s | def m($k): ($s[$k].median // null) as $v | if $v == null then "-" else ($v*1000|round/1000|tostring) end;
        "\($b) \($lbl) H=\($h): \(m("acquisitions_per_second")) acq/s, viol \(.violations), cross p50/p99 \(m("cross_process_handoff_us/p50"))/\(m("cross_process_handoff_us/p99")) us, received/published \(m("events/consumed_share_mean")), wakeups \(.runs[0].wakeups // {} | tostring), load \($load)"'
    done
  done
done
