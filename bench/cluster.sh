#!/usr/bin/env bash
# Lock throughput on a Redis Cluster of 1, 2 and 3 masters, next to one
# plain Redis (bench/cluster.md). 1,000 lock names, so contention is low
# and the figure is what the Redis side sustains; `lockfleet bench` in
# --mode local (no Kafka: the cluster is the subject), interleaved ROUNDS
# times so machine noise spreads over every set-up.
#
# Clusters of 1 and 2 masters cannot be made by `redis-cli --cluster
# create` (it wants 3): every set-up is made the same way by hand —
# cluster-enabled servers, CLUSTER ADDSLOTSRANGE in equal shares, CLUSTER
# MEET, then wait for cluster_state:ok on every node.
#
#   bench/cluster.sh [LOCKFLEET]          (default: build/cli/lockfleet)
# env: ROUNDS (3), SECONDS_PER_RUN (10), PROCESSES (4), THREADS (4: the
# pool size), PARK_CAP_MS (2: without Kafka a waiter parks this long at
# most, so the rare collision of two threads on one lock costs little)
# prints one JSON line per run, then a summary table (medians over rounds).
set -euo pipefail
lockfleet=${1:-build/cli/lockfleet}
rounds=${ROUNDS:-3}
seconds=${SECONDS_PER_RUN:-10}
processes=${PROCESSES:-4}
threads=${THREADS:-4}
park_cap=${PARK_CAP_MS:-2}
dir=$(mktemp -d /tmp/lockfleet-cluster-bench-XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

start_server() {  # NAME PORT [ARGS...]: a redis-server in $dir/NAME
  local name=$1 port=$2
  shift 2
  mkdir -p "$dir/$name"
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$dir/$name" --logfile "$dir/$name/redis.log" "$@" &
  pids+=($!)
  for _ in $(seq 100); do
    redis-cli -p "$port" ping >/dev/null 2>&1 && return
    sleep 0.1
  done
  echo "redis-server $name did not start" >&2
  exit 1
}

declare -A url
plain=$(free_port)
start_server plain "$plain"
url[plain]="redis://127.0.0.1:$plain"

for masters in 1 2 3; do
  ports=()
  for i in $(seq "$masters"); do
    port=$(free_port)
    start_server "c$masters-$i" "$port" --cluster-enabled yes \
      --cluster-config-file "$dir/c$masters-$i/nodes.conf" \
      --cluster-port "$(free_port)"
    ports+=("$port")
  done
  share=$((16384 / masters))
  for i in $(seq 0 $((masters - 1))); do
    first=$((i * share))
    last=$(((i + 1) * share - 1))
    [[ $i == $((masters - 1)) ]] && last=16383
    redis-cli -p "${ports[$i]}" cluster addslotsrange "$first" "$last" >/dev/null
    redis-cli -p "${ports[$i]}" cluster set-config-epoch $((i + 1)) >/dev/null
  done
  for port in "${ports[@]:1}"; do
    bus=$(redis-cli -p "$port" cluster nodes | awk '/myself/ {print $2}' | sed 's/.*@//')
    redis-cli -p "${ports[0]}" cluster meet 127.0.0.1 "$port" "$bus" >/dev/null
  done
  for _ in $(seq 300); do
    ok=1
    for port in "${ports[@]}"; do
      redis-cli -p "$port" cluster info | grep -q 'cluster_state:ok' || ok=0
      [[ $(redis-cli -p "$port" cluster nodes | wc -l) == "$masters" ]] || ok=0
    done
    [[ $ok == 1 ]] && break
    sleep 0.1
  done
  [[ $ok == 1 ]] || { echo "the $masters-master cluster did not form" >&2; exit 1; }
  seeds=$(printf '127.0.0.1:%s,' "${ports[@]}")
  url[cluster$masters]="redis+cluster://${seeds%,}"
done

out="$dir/runs.jsonl"
for round in $(seq "$rounds"); do
  for kind in plain cluster1 cluster2 cluster3; do
    "$lockfleet" bench --mode local --redis "${url[$kind]}" --locks 1000 \
      --processes "$processes" --threads "$threads" --hold-ms 0 \
      --park-cap-ms "$park_cap" \
      --seconds "$seconds" --json 2>/dev/null |
      python3 -c 'import json,sys; d=json.load(sys.stdin); d["kind"]=sys.argv[1]; d["round"]=int(sys.argv[2]); print(json.dumps(d))' "$kind" "$round" |
      tee -a "$out"
  done
done

python3 - "$out" <<'EOF'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
print()
print("| Redis | acq/s | round trips / acq | commands / acq | Redis CPU % (all masters) | errors | violations |")
print("|---|---|---|---|---|---|---|")
names = {"plain": "one server (redis://)", "cluster1": "cluster, 1 master",
         "cluster2": "cluster, 2 masters", "cluster3": "cluster, 3 masters"}
for kind in ("plain", "cluster1", "cluster2", "cluster3"):
    sel = [r for r in runs if r["kind"] == kind]
    if not sel:
        continue
    med = lambda f: statistics.median(f(r) for r in sel)
    errors = sum(sum(r["errors"].values()) if isinstance(r["errors"], dict) else r["errors"] for r in sel)
    print(f"| {names[kind]} | {med(lambda r: r['acquisitions_per_second']):.0f} "
          f"| {med(lambda r: r['redis_calls_per_acquisition']):.2f} "
          f"| {med(lambda r: r['redis_commands_per_acquisition']):.1f} "
          f"| {med(lambda r: r['redis_cpu_percent']):.0f} "
          f"| {errors} "
          f"| {sum(r['violations'] for r in sel)} |")
EOF
