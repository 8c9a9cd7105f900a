#!/usr/bin/env bash
# Regenerates bench/REPORT.md: builds `lockfleet` if needed, runs the
# `lockfleet bench` matrix, keeps the raw JSON in bench/report-raw.jsonl and
# writes bench/REPORT.md and bench/report-plot.svg (make_report.py).
#
#   bench/make-report.sh [--seconds S] [--repeat R] [--no-real] [--quick]
#
# In one run: every mode on the embedded broker (each run against its own
# private redis-server and embedded broker); the floor (`--mode floor`, a
# token taken with BLPOP: the physical reference, not a lock); the product
# on a real Apache Kafka broker (one kafka-local broker for the whole
# report, from $LOCKFLEET_KAFKA_LOCAL or ../shared/kafka; --no-real, or no
# java, leaves those cells out); and the idle cost of 32 processes parked on
# a lock held for the whole run. The target cells (hold 1 ms: floor, fair on
# both brokers) run --repeat R times (default 3) and report medians.
#
# Environment: BUILD_DIR (default: <repo>/build), LOCKFLEET (a lockfleet
# binary to use instead of building one). --quick runs only the P=2 and P=8
# cells, once each (a smoke test of the script). The full report takes
# ~25 min on 2 cores with the default 5 s per run.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
seconds=5
repeat=3
real=1
quick=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --no-real) real=0; shift ;;
    --quick) quick=1; repeat=1; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "make-report.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

if [[ -z "${LOCKFLEET:-}" ]]; then
  build="${BUILD_DIR:-$root/build}"
  if [[ ! -f "$build/build.ninja" ]]; then
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  fi
  ninja -C "$build" lockfleet_cli >/dev/null
  LOCKFLEET="$build/cli/lockfleet"
fi

raw="$here/report-raw.jsonl"

# One real broker for the whole report.
source "$here/kafka-local.sh"
[[ $real == 1 ]] && start_real_broker
machine="$here/report-machine.json"
: >"$raw.tmp"

# The machine, for the report's header.
python3 - "$machine" <<'EOF'
import json, os, platform, subprocess, sys
def run(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""
cpu = ""
with open("/proc/cpuinfo") as f:
    for line in f:
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip(); break
mem_kb = 0
with open("/proc/meminfo") as f:
    for line in f:
        if line.startswith("MemTotal:"):
            mem_kb = int(line.split()[1]); break
dpkg = lambda p: run("dpkg-query", "-W", "-f=${Version}", p)
json.dump({
    "nproc": os.cpu_count(), "cpu": cpu, "mem_gib": round(mem_kb / 2**20, 1),
    "kernel": platform.release(),
    "os": run("sh", "-c", ". /etc/os-release && echo $PRETTY_NAME"),
    "redis": run("redis-server", "--version"),
    "librdkafka": dpkg("librdkafka1"),
    "compiler": run("c++", "--version").splitlines()[0] if run("c++", "--version") else "",
    "load_before": open("/proc/loadavg").read().split()[:3],
}, open(sys.argv[1], "w"), indent=1)
EOF

run_cell() {  # label, args...
  local label="$1"; shift
  local out
  printf '  %-44s ' "$label" >&2
  if out="$("$LOCKFLEET" bench --json --seconds "${CELL_SECONDS:-$seconds}" "$@" 2>/dev/null)"; then
    :
  fi
  if [[ -z "$out" ]]; then
    echo "FAILED" >&2
    return 0
  fi
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d["label"]=sys.argv[2]; print(json.dumps(d))' \
    "$out" "$label" >>"$raw.tmp"
  python3 -c '
import json, sys
d = json.loads(sys.argv[1])
if "repeat" in d:
    s = d["summary"]
    p50 = s.get("cross_process_handoff_us/p50", {}).get("median")
    print("%6.0f acq/s, %s viol, cross p50 %s us (median of %d)" % (
        s["acquisitions_per_second"]["median"], d["violations"], p50, d["repeat"]))
else:
    print("%6d acq, %s viol, cross p50 %s us" % (
        d["acquisitions"], d["violations"], d["cross_process_handoff_us"]["p50"]))
' "$out" >&2
}

shapes=("2 1" "8 1" "32 1" "4 8")
[[ $quick == 1 ]] && shapes=("2 1" "8 1")
echo "lockfleet bench matrix, $seconds s per run ($LOCKFLEET)" >&2
for shape in "${shapes[@]}"; do
  read -r p t <<<"$shape"
  for h in 1 0; do
    common=(--processes "$p" --threads "$t" --hold-ms "$h")
    # The target cells (hold 1 ms), side by side: the floor, then the
    # product on both brokers; repeated, medians reported.
    many=()
    [[ $h == 1 ]] && many=(--repeat "$repeat")
    run_cell "floor p=$p t=$t h=$h" --mode floor "${many[@]}" "${common[@]}"
    run_cell "kafka-fair p=$p t=$t h=$h" --mode kafka --fair "${many[@]}" "${common[@]}"
    if [[ -n "$real_bootstrap" && $h == 1 ]]; then
      run_cell "kafka-real-fair p=$p t=$t h=$h" --mode kafka --fair \
        --kafka "$real_bootstrap" "${many[@]}" "${common[@]}"
    fi
    run_cell "kafka-barging p=$p t=$t h=$h" --mode kafka --no-fair "${common[@]}"
    run_cell "local p=$p t=$t h=$h" --mode local "${common[@]}"
    run_cell "poll-1ms p=$p t=$t h=$h" --mode poll --poll-interval-ms 1 "${common[@]}"
    run_cell "poll-100ms p=$p t=$t h=$h" --mode poll --poll-interval-ms 100 "${common[@]}"
  done
done
# The brokers' one-way event latency (a short P=2 run first).
run_cell "event-latency" --mode kafka --processes 2 --event-latency 2000
if [[ -n "$real_bootstrap" ]]; then
  run_cell "event-latency-real" --mode kafka --processes 2 --event-latency 2000 \
    --kafka "$real_bootstrap"
fi
# Idle cost: 33 processes, the first to get the lock holds it for the whole
# run, so 32 stay parked; the host's CPU over the window.
if [[ $quick == 0 ]]; then
  idle_s=$((seconds * 4 > 60 ? 60 : seconds * 4))  # --hold-ms is at most 60 s
  idle=(--processes 33 --hold-ms $((idle_s * 1000)))
  CELL_SECONDS=$idle_s run_cell "idle-embedded" --mode kafka "${idle[@]}"
  if [[ -n "$real_bootstrap" ]]; then
    CELL_SECONDS=$idle_s run_cell "idle-real-1ms" --mode kafka \
      --kafka "$real_bootstrap" --fetch-wait-ms 1 "${idle[@]}"
    CELL_SECONDS=$idle_s run_cell "idle-real-100ms" --mode kafka \
      --kafka "$real_bootstrap" --fetch-wait-ms 100 "${idle[@]}"
    CELL_SECONDS=$idle_s run_cell "idle-real-auto" --mode kafka \
      --kafka "$real_bootstrap" "${idle[@]}"
  fi
fi
mv "$raw.tmp" "$raw"
python3 "$here/make_report.py" --raw "$raw" --machine "$machine" \
  --notes "$here/report-notes.md" --out "$here/REPORT.md" --plot "$here/report-plot.svg"
echo "wrote $here/REPORT.md and $here/report-plot.svg" >&2
