#!/usr/bin/env bash
# What TLS and replica acknowledgement (WAIT 1) cost on hand-off latency and
# round trips per acquisition, next to plain TCP in the same run
# (bench/redis-costs.md). Starts one redis-server master serving plaintext
# and TLS (a private CA made with openssl) and one replica, then runs
# `lockfleet bench` (embedded broker, fair mode) against three configs,
# interleaved ROUNDS times so that machine noise spreads over all three:
#   tcp   redis://127.0.0.1:PORT
#   tls   rediss://127.0.0.1:TLS_PORT (verified against the CA)
#   wait  redis://127.0.0.1:PORT with redis.min_replicas 1
#
#   bench/redis-costs.sh [LOCKFLEET] [PROCESSES...]   (default: build/cli/lockfleet 2 8)
# prints one JSON line per run, then a summary table (medians over rounds).
set -euo pipefail
lockfleet=${1:-build/cli/lockfleet}
shift || true
processes=("${@:-2 8}")
read -r -a processes <<< "${processes[*]}"
rounds=${ROUNDS:-3}
seconds=${SECONDS_PER_RUN:-10}
dir=$(mktemp -d /tmp/lockfleet-costs-XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

# A CA and a server certificate for 127.0.0.1.
openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
  -keyout "$dir/ca.key" -out "$dir/ca.crt" -days 2 -subj "/CN=bench CA" 2>/dev/null
openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
  -keyout "$dir/server.key" -out "$dir/server.csr" -subj "/CN=127.0.0.1" 2>/dev/null
printf 'subjectAltName = IP:127.0.0.1\n' > "$dir/ext"
openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
  -CAcreateserial -out "$dir/server.crt" -days 2 -extfile "$dir/ext" 2>/dev/null

port=$(free_port); tls_port=$(free_port); replica_port=$(free_port)
redis-server --port "$port" --tls-port "$tls_port" --bind 127.0.0.1 \
  --tls-cert-file "$dir/server.crt" --tls-key-file "$dir/server.key" \
  --tls-ca-cert-file "$dir/ca.crt" --tls-auth-clients no \
  --save '' --appendonly no --dir "$dir" --logfile "$dir/master.log" &
pids+=($!)
redis-server --port "$replica_port" --bind 127.0.0.1 --replicaof 127.0.0.1 "$port" \
  --save '' --appendonly no --dir "$dir" --logfile "$dir/replica.log" &
pids+=($!)
for _ in $(seq 100); do
  redis-cli -p "$port" info replication 2>/dev/null | grep -q 'state=online' && break
  sleep 0.1
done

cat > "$dir/tcp.yaml" <<EOF
redis: {url: "redis://127.0.0.1:$port"}
EOF
cat > "$dir/tls.yaml" <<EOF
redis:
  url: "rediss://127.0.0.1:$tls_port"
  tls: {ca_file: "$dir/ca.crt"}
EOF
cat > "$dir/wait.yaml" <<EOF
redis: {url: "redis://127.0.0.1:$port", min_replicas: 1, replica_timeout: 1s}
EOF

out="$dir/runs.jsonl"
for round in $(seq "$rounds"); do
  for p in "${processes[@]}"; do
    for kind in tcp tls wait; do
      "$lockfleet" bench --config "$dir/$kind.yaml" --processes "$p" \
        --seconds "$seconds" --json 2>/dev/null |
        python3 -c 'import json,sys; d=json.load(sys.stdin); d["kind"]=sys.argv[1]; d["round"]=int(sys.argv[2]); print(json.dumps(d))' "$kind" "$round" |
        tee -a "$out"
    done
  done
done

python3 - "$out" <<'EOF'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
print()
print("| processes | connection | acq/s | cross-process hand-off p50 | p99 | round trips / acq | commands / acq | violations |")
print("|---|---|---|---|---|---|---|---|")
for p in sorted({r["config"]["processes"] for r in runs}):
    for kind in ("tcp", "tls", "wait"):
        sel = [r for r in runs if r["config"]["processes"] == p and r["kind"] == kind]
        if not sel:
            continue
        med = lambda f: statistics.median(f(r) for r in sel)
        print(f"| {p} | {kind} | {med(lambda r: r['acquisitions_per_second']):.0f} "
              f"| {med(lambda r: r['cross_process_handoff_us']['p50'])/1000:.2f} ms "
              f"| {med(lambda r: r['cross_process_handoff_us']['p99'])/1000:.2f} ms "
              f"| {med(lambda r: r['redis_calls_per_acquisition']):.2f} "
              f"| {med(lambda r: r['redis_commands_per_acquisition']):.1f} "
              f"| {sum(r['violations'] for r in sel)} |")
EOF
