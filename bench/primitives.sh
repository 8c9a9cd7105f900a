#!/usr/bin/env bash
# The primitives, measured (bench/primitives.md, issue 17): one read-write
# lock at 90% and 10% reads, a semaphore of 4 permits (1 per acquisition),
# a 4-name multi-lock, and the plain lock for comparison; hold 1 ms, fair
# mode, kafka mode on the embedded broker, at P = 2, 8 and 16 processes
# (PROCS), one thread each (so the acquire-call round trips, read from the
# process's Redis client around the call, are exact). Raw JSON lines go to
# bench/primitives-raw.jsonl, each the bench's --json object plus "label"
# and "loadavg" (/proc/loadavg before the run).
#
#   bench/primitives.sh [--seconds S]
#
# Environment: LOCKFLEET (default build/cli/lockfleet), PROCS (default
# "2 8 16"), CONFIGS (labels to run; default all but semaphore-1), REPEAT
# (runs per row, default 1: with more, the bench's --repeat, and the line
# printed gives medians), EXTRA (more bench arguments, e.g. "--kafka
# kafka-local" or "--no-fair"; also recorded as "extra" in the JSON).
# bench/primitives.md ran it as: the default; PROCS=32 CONFIGS="semaphore-4
# rwlock-90r lock"; PROCS="2 32" CONFIGS=semaphore-1.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
seconds=10
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "primitives.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
lockfleet="${LOCKFLEET:-$root/build/cli/lockfleet}"
raw="$here/primitives-raw.jsonl"
declare -A args=(
  [rwlock-90r]="--primitive rwlock --read-share 90"
  [rwlock-10r]="--primitive rwlock --read-share 10"
  [semaphore-4]="--primitive semaphore --permits 4"
  # Contended at P = 2 too (4 permits never are): for "flat in P".
  [semaphore-1]="--primitive semaphore --permits 1"
  [multilock-4]="--primitive multilock --names 4"
  # The read-heavy mix with barging readers (EXTRA=--no-fair is the same).
  [rwlock-90r-barging]="--primitive rwlock --read-share 90 --no-fair"
  [lock]="--primitive lock"
)
configs="${CONFIGS:-rwlock-90r rwlock-10r semaphore-4 multilock-4 lock}"
repeat="${REPEAT:-1}"
extra="${EXTRA:-}"
for p in ${PROCS:-2 8 16}; do
  for label in $configs; do
    load="$(cut -d' ' -f1-3 /proc/loadavg)"
    # shellcheck disable=SC2086
    out="$("$lockfleet" bench ${args[$label]} $extra --repeat "$repeat" \
      --processes "$p" --seconds "$seconds" --hold-ms 1 --json)" ||
      echo "primitives.sh: the bench exited $? ($label, P=$p)" >&2
    echo "$out" | jq -c --arg lbl "$label" --arg load "$load" \
      --arg extra "$extra" \
      '. + {"label": $lbl, "loadavg": $load, "extra": $extra}' >>"$raw"
    if [[ "$repeat" -gt 1 ]]; then
      echo "$out" | jq -r --arg lbl "$label" --arg p "$p" --arg load "$load" \
        '.summary as $s | def m($k): ($s[$k].median // null) as $v | if $v == null then "-" else ($v*100|round/100|tostring) end;
        "\($lbl) P=\($p) x\(.repeat) (medians): \(m("acquisitions_per_second")) acq/s, viol \(.violations), rt/acq \(m("redis_calls_per_acquisition")), cmd/acq \(m("redis_commands_per_acquisition")), handoff p50/p99 \(m("handoff_us/p50"))/\(m("handoff_us/p99")) us, jain \(m("jain_index")), acquire rt all/waited/joining \(m("primitive/acquire_round_trips/all/mean"))/\(m("primitive/acquire_round_trips/waited/mean"))/\(m("primitive/acquire_round_trips/read_joining_readers/mean")), load \($load)"'
    else
      echo "$out" | jq -r --arg lbl "$label" --arg load "$load" \
        '"\($lbl) P=\(.config.processes): \(.acquisitions_per_second|floor) acq/s, viol \(.violations), rt/acq \(.redis_calls_per_acquisition*100|round/100), cmd/acq \((.redis_commands_per_acquisition // 0)*10|round/10), handoff p50/p99 \(.handoff_us.p50|round)/\(.handoff_us.p99|round) us, jain \(.jain_index*1000|round/1000), acquire rt \(.primitive.acquire_round_trips // {} | tostring), load \($load)"'
    fi
  done
done
