#!/usr/bin/env bash
# Spinning, measured (bench/spin.md): one hot lock, hold 1 ms, fair mode, at
# P = 2, 8 and 32 processes, in one run: the floor (a token taken with
# BLPOP, not a lock), then lockfleet with the queue head spinning (the
# default) and with spinning off (--spin-max-hold-ms 0), on the embedded
# broker and on a real Apache Kafka broker (kafka-local, fetch wait 100 ms);
# each cell --repeat R times (medians). Raw JSON lines go to
# bench/spin-raw.jsonl; a summary table is printed.
#
#   bench/spin.sh [--seconds S] [--repeat R] [--no-real]
#
# Environment: LOCKFLEET (a lockfleet binary; default build/cli/lockfleet),
# PROCS (the process counts; default "2 8 32"),
# LOCKFLEET_KAFKA_LOCAL (default ../shared/kafka/kafka-local).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
seconds=5
repeat=3
real=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --no-real) real=0; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "spin.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
lockfleet="${LOCKFLEET:-$root/build/cli/lockfleet}"
raw="$here/spin-raw.jsonl"

source "$here/kafka-local.sh"
[[ $real == 1 ]] && start_real_broker
bootstrap="$real_bootstrap"

: >"$raw.tmp"
cell() {  # label, args...
  local label="$1"; shift
  local out
  out="$("$lockfleet" bench --json --seconds "$seconds" --repeat "$repeat" \
    --hold-ms 1 "$@" 2>/dev/null)" || true
  if [[ -z "$out" ]]; then
    echo "  $label: FAILED" >&2
    return 0
  fi
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d["label"]=sys.argv[2]; print(json.dumps(d))' \
    "$out" "$label" >>"$raw.tmp"
  echo "  $label: done" >&2
}
for p in ${PROCS:-2 8 32}; do
  cell "floor p=$p" --mode floor --processes "$p"
  cell "embedded spin p=$p" --mode kafka --fair --processes "$p"
  cell "embedded nospin p=$p" --mode kafka --fair --processes "$p" --spin-max-hold-ms 0
  if [[ -n "$bootstrap" ]]; then
    cell "real spin p=$p" --mode kafka --fair --processes "$p" \
      --kafka "$bootstrap" --fetch-wait-ms 100
    cell "real nospin p=$p" --mode kafka --fair --processes "$p" \
      --kafka "$bootstrap" --fetch-wait-ms 100 --spin-max-hold-ms 0
  fi
done
mv "$raw.tmp" "$raw"
python3 - "$raw" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def runs(d):
    return d.get("runs", [d])  # --repeat 1: the run itself
def med(d, key, sub=None):
    vals = []
    for r in runs(d):
        v = r.get(key)
        if sub is not None:
            v = (v or {}).get(sub)
        if v is not None:
            vals.append(v)
    return statistics.median(vals) if vals else float("nan")
floor = {}
print("| cell | acq/s | × floor | cross p50 µs | × floor | cross p99 µs | Redis cmds/acq | round trips/acq | spin wins | event wakes | bound wakes | violations | Jain |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for d in rows:
    label = d["label"]
    p = label.split("p=")[1]
    acq = med(d, "acquisitions_per_second")
    p50 = med(d, "cross_process_handoff_us", "p50")
    p99 = med(d, "cross_process_handoff_us", "p99")
    if label.startswith("floor"):
        floor[p] = (acq, p50)
    fa, fp = floor.get(p, (float("nan"), float("nan")))
    w = lambda c: sum(r["wakeups"].get(c, 0) for r in runs(d))
    n = sum(r["acquisitions"] for r in runs(d))
    print("| %s | %.0f | %.2f | %.0f | %.1f | %.0f | %.1f | %.2f | %s | %s | %s | %d | %.3f |" % (
        label, acq, acq / fa if fa else 0, p50, p50 / fp if fp else 0, p99,
        med(d, "redis_commands_per_acquisition"), med(d, "redis_calls_per_acquisition"),
        "%.0f%%" % (100.0 * w("spin") / n) if n else "-",
        "%.0f%%" % (100.0 * w("event") / n) if n else "-",
        w("bound"), sum(r["violations"] for r in runs(d)), med(d, "jain_index")))
PY
