#!/usr/bin/env bash
# One process taking many distinct locks and holding them (bench/hoard.md):
# starts a private redis-server on a unix socket, then runs
# lockfleet_bench_hoard once per size, each against an emptied server.
#
#   bench/hoard.sh [HOARD] [LOCKS...]   (default: build/bench/lockfleet_bench_hoard
#                                        10000 40000 100000)
# Environment: LEASE_MS (30000), HOLD_S (25), THREADS (1).
# Prints one JSON line per size.
set -euo pipefail
hoard=${1:-build/bench/lockfleet_bench_hoard}
shift || true
sizes=("${@:-10000 40000 100000}")
read -r -a sizes <<< "${sizes[*]}"
dir=$(mktemp -d /tmp/lockfleet-hoard-XXXXXX)
pid=
cleanup() {
  [[ -n $pid ]] && kill "$pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

redis-server --port 0 --unixsocket "$dir/redis.sock" --save '' \
  --appendonly no --dir "$dir" --logfile "$dir/redis.log" &
pid=$!
for _ in $(seq 100); do
  redis-cli -s "$dir/redis.sock" ping 2>/dev/null | grep -q PONG && break
  sleep 0.1
done
for n in "${sizes[@]}"; do
  redis-cli -s "$dir/redis.sock" flushall > /dev/null
  "$hoard" --redis "unix://$dir/redis.sock" --locks "$n" \
    --lease-ms "${LEASE_MS:-30000}" --hold-s "${HOLD_S:-25}" \
    --threads "${THREADS:-1}"
done
