#!/usr/bin/env bash
# Regenerates bench/REPORT.md: builds `lockfleet` if needed, runs the
# `lockfleet bench` matrix (each run against its own private redis-server
# and embedded broker), keeps the raw JSON in bench/report-raw.jsonl and
# writes bench/REPORT.md and bench/report-plot.svg (make_report.py).
#
#   bench/make-report.sh [--seconds S] [--quick]
#
# Environment: BUILD_DIR (default: <repo>/build), LOCKFLEET (a lockfleet
# binary to use instead of building one). --quick runs only the P=2 and P=8
# cells (a smoke test of the script). The full matrix takes ~7 min on
# 2 cores with the default 5 s per run.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
seconds=5
quick=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
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
  if out="$("$LOCKFLEET" bench --json --seconds "$seconds" "$@" 2>/dev/null)"; then
    :
  fi
  if [[ -z "$out" ]]; then
    echo "FAILED" >&2
    return 0
  fi
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d["label"]=sys.argv[2]; print(json.dumps(d))' \
    "$out" "$label" >>"$raw.tmp"
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print("%6d acq, %s viol, cross p50 %s us" % (d["acquisitions"], d["violations"], d["cross_process_handoff_us"]["p50"]))' "$out" >&2
}

shapes=("2 1" "8 1" "32 1" "4 8")
[[ $quick == 1 ]] && shapes=("2 1" "8 1")
echo "lockfleet bench matrix, $seconds s per run ($LOCKFLEET)" >&2
for shape in "${shapes[@]}"; do
  read -r p t <<<"$shape"
  for h in 1 0; do
    common=(--processes "$p" --threads "$t" --hold-ms "$h")
    run_cell "kafka-fair p=$p t=$t h=$h" --mode kafka --fair "${common[@]}"
    run_cell "kafka-barging p=$p t=$t h=$h" --mode kafka --no-fair "${common[@]}"
    run_cell "local p=$p t=$t h=$h" --mode local "${common[@]}"
    run_cell "poll-1ms p=$p t=$t h=$h" --mode poll --poll-interval-ms 1 "${common[@]}"
    run_cell "poll-100ms p=$p t=$t h=$h" --mode poll --poll-interval-ms 100 "${common[@]}"
  done
done
# The embedded broker's one-way event latency (a short P=2 run first).
run_cell "event-latency" --mode kafka --processes 2 --event-latency 2000
mv "$raw.tmp" "$raw"
python3 "$here/make_report.py" --raw "$raw" --machine "$machine" \
  --notes "$here/report-notes.md" --out "$here/REPORT.md" --plot "$here/report-plot.svg"
echo "wrote $here/REPORT.md and $here/report-plot.svg" >&2
