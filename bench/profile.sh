#!/usr/bin/env bash
# Where the CPU goes in one benchmark cell: the whole host sampled with
# `perf record -a` while `lockfleet bench` runs, then the samples' shares by
# process and thread name (perf's comm: rdk:broker1, rdk:main, lockfleet,
# redis-server, java, ...) and the hottest symbols.
#
#   bench/profile.sh [--real] [--seconds S] [-- BENCH ARGS...]
#
# Default cell: the issue 16 target cell at P = 32 (fair, one hot lock,
# hold 1 ms), on the embedded broker, or on a private real broker
# (kafka-local, as bench/make-report.sh starts it) with --real. Needs perf
# and the right to sample the whole host (root, or perf_event_paranoid
# <= 0). Writes bench/profile-<broker>.txt; the report's notes quote it.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
seconds=10
real=0
args=(--mode kafka --fair --processes 32 --threads 1 --hold-ms 1)
while [[ $# -gt 0 ]]; do
  case "$1" in
    --real) real=1; shift ;;
    --seconds) seconds="$2"; shift 2 ;;
    --) shift; args=("$@"); break ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "profile.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
command -v perf >/dev/null || { echo "profile.sh: no perf" >&2; exit 1; }

if [[ -z "${LOCKFLEET:-}" ]]; then
  build="${BUILD_DIR:-$root/build}"
  ninja -C "$build" lockfleet_cli >/dev/null
  LOCKFLEET="$build/cli/lockfleet"
fi
broker=embedded
if [[ $real == 1 ]]; then
  source "$here/kafka-local.sh"
  start_real_broker
  [[ -n "$real_bootstrap" ]] || { echo "profile.sh: no real broker" >&2; exit 1; }
  args+=(--kafka "$real_bootstrap")
  broker=real
fi

work="$(mktemp -d /tmp/lockfleet-profile-XXXXXX)"
cleanup() {
  rm -rf "$work"
  [[ $real == 1 ]] && stop_real_broker
  return 0
}
trap cleanup EXIT
out="$here/profile-$broker.txt"

# A broker (and a JVM) just started compiles its hot paths for a while:
# warm it up first, as the report's earlier cells do.
[[ $real == 1 ]] && "$LOCKFLEET" bench "${args[@]}" --seconds 20 --json \
  >/dev/null 2>&1
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
# Sample the whole host (99 Hz per CPU) for the run's duration.
perf record -a -g -F 99 -o "$work/perf.data" -- \
  "$LOCKFLEET" bench "${args[@]}" --seconds "$seconds" --json \
  >"$work/bench.json" 2>"$work/perf.err"
set +o pipefail  # head ends perf report's output early
{
  echo "# lockfleet bench ${args[*]} --seconds $seconds ($broker broker)"
  echo "# $(date -u +%F), $(nproc) CPUs, load before: $load_before"
  python3 - "$work/bench.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
c = d["cross_process_handoff_us"]
print("# %d acquisitions, %.0f/s, cross-process p50 %.2f ms p99 %.2f ms, "
      "host CPU %.1f%%, Redis CPU %.1f%%, violations %d" % (
      d["acquisitions"], d["acquisitions_per_second"], c["p50"] / 1000,
      c["p99"] / 1000, d.get("host_cpu_percent", 0),
      d.get("redis_cpu_percent", 0), d["violations"]))
EOF
  echo
  echo "## Samples by thread name (all CPUs; swapper is idle)"
  perf report -i "$work/perf.data" --no-children --sort comm --stdio -g none \
    2>/dev/null | grep -v '^#' | grep -v '^$' | head -20
  echo
  echo "## Hottest symbols (not idle)"
  perf report -i "$work/perf.data" --no-children --sort comm,dso,sym --stdio \
    -g none 2>/dev/null | grep -v '^#' | grep -v '^$' | grep -v swapper |
    head -30
} >"$out"
cat "$out"
