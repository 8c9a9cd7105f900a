#!/usr/bin/env bash
# A short walkthrough of `lockfleet lock` against a private redis-server.
#
# Usage: scripts/lock-walkthrough.sh [--no-setup]
#
# Installs what is missing (scripts/setup.sh, unless --no-setup), builds the
# lockfleet binary in build/, starts redis-server on a unix socket in a fresh
# temporary directory (no TCP port, no persistence) and shows:
#   1. holder A takes the lock and gets a fencing token
#   2. the lock's keys in Redis while A holds it
#   3. C tries once with --wait 0 while A holds it: exit status 75
#   4. B waits, gets the lock when A is done: a larger fencing token
#   5. COMMAND's own exit status is passed through; Redis unreachable is 69
#   6. a holder whose lock is deleted behind its back: COMMAND gets SIGTERM,
#      exit status 76
# The server and the directory are removed on exit, however the demo ends.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

setup=true
case "${1:-}" in
  "") ;;
  --no-setup) setup=false ;;
  -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
  *) die "unknown argument: $1 (try --help)" ;;
esac

if [[ "$setup" == true ]]; then
  bash "$LOCKFLEET_ROOT/scripts/setup.sh"
fi
bash "$LOCKFLEET_ROOT/scripts/build.sh" --target lockfleet_cli

build_dir="$(default_build_dir "")"
lockfleet="$(find "$build_dir" -type f -name lockfleet -perm -u+x -print -quit)"
[[ -n "$lockfleet" ]] || die "no lockfleet binary under $build_dir after the build"

# ---- private redis-server --------------------------------------------------
demo_dir="$(mktemp -d "${TMPDIR:-/tmp}/lockfleet-demo.XXXXXX")"
socket="$demo_dir/redis.sock"
redis_pid=""
holder_pid=""
cleanup() {
  local status=$?
  [[ -z "$holder_pid" ]] || kill "$holder_pid" 2>/dev/null || true
  if [[ -n "$redis_pid" ]]; then
    kill "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
  fi
  rm -rf "$demo_dir"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

redis-server --port 0 --unixsocket "$socket" --unixsocketperm 700 \
  --dir "$demo_dir" --save "" --appendonly no \
  --logfile "$demo_dir/redis.log" --daemonize no &
redis_pid=$!

rcli() { redis-cli -s "$socket" "$@"; }
for _ in $(seq 100); do
  [[ "$(rcli PING 2>/dev/null || true)" == PONG ]] && break
  kill -0 "$redis_pid" 2>/dev/null || die "redis-server exited: $(tail -n 5 "$demo_dir/redis.log")"
  sleep 0.05
done
[[ "$(rcli PING 2>/dev/null || true)" == PONG ]] || die "redis-server did not answer PING"

export LOCKFLEET_REDIS="unix://$socket"
lock="report"

if [[ -t 1 ]]; then
  step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
  step() { printf '\n== %s\n' "$*"; }
fi
show() { printf '$ %s\n' "$*"; }

echo "lockfleet demo: private redis-server (pid $redis_pid) at $LOCKFLEET_REDIS"

# ---- 1. A takes the lock ------------------------------------------------------
step "1. holder A takes lock '$lock' and keeps it for 3 s"
show "lockfleet lock $lock -- sh -c '...; sleep 3' &"
"$lockfleet" lock "$lock" -- sh -c \
  'echo "   A: holding $LOCKFLEET_NAME, fencing token $LOCKFLEET_FENCE"; sleep 3; echo "   A: done, releasing"' &
holder_pid=$!
for _ in $(seq 200); do
  [[ "$(rcli EXISTS "lockfleet:{$lock}:lock")" == 1 ]] && break
  sleep 0.05
done
[[ "$(rcli EXISTS "lockfleet:{$lock}:lock")" == 1 ]] || die "A never got the lock"

# ---- 2. the keys ---------------------------------------------------------------
step "2. the lock in Redis: a hash (owner, count, fence, ...) with a TTL, and the fence counter"
show "redis-cli HGETALL 'lockfleet:{$lock}:lock'"
rcli HGETALL "lockfleet:{$lock}:lock" | paste - - | sed 's/^/   /'
show "redis-cli PTTL 'lockfleet:{$lock}:lock'"
echo "   $(rcli PTTL "lockfleet:{$lock}:lock") ms (the watchdog renews it while A runs)"

# ---- 3. --wait 0 -----------------------------------------------------------------
step "3. C tries once (--wait 0) while A holds the lock"
show "lockfleet lock --wait 0 $lock -- echo 'C: never printed'"
set +e
"$lockfleet" lock --wait 0 "$lock" -- echo "C: never printed"
status=$?
set -e
echo "   exit status $status (75: wait timed out)"
[[ $status == 75 ]] || die "expected exit status 75, got $status"

# ---- 4. B waits ------------------------------------------------------------------
step "4. B waits up to 10 s and gets the lock as soon as A releases it"
show "lockfleet lock --wait 10s $lock -- sh -c 'echo ...'"
"$lockfleet" lock --wait 10s "$lock" -- sh -c \
  'echo "   B: holding $LOCKFLEET_NAME, fencing token $LOCKFLEET_FENCE (larger than A'"'"'s)"'
wait "$holder_pid"
holder_pid=""
show "redis-cli GET 'lockfleet:{$lock}:fence'"
echo "   $(rcli GET "lockfleet:{$lock}:fence") (the counter outlives the lock, so tokens only go up)"

# ---- 5. exit statuses ----------------------------------------------------------
step "5. exit statuses: COMMAND's own, and 69 when Redis is unreachable"
show "lockfleet lock $lock -- sh -c 'exit 3'"
set +e
"$lockfleet" lock "$lock" -- sh -c 'exit 3'
status=$?
set -e
echo "   exit status $status (COMMAND's)"
[[ $status == 3 ]] || die "expected exit status 3, got $status"
show "lockfleet lock --redis unix://$demo_dir/nobody.sock $lock -- true"
set +e
"$lockfleet" lock --redis "unix://$demo_dir/nobody.sock" "$lock" -- true
status=$?
set -e
echo "   exit status $status (69: Redis unreachable)"
[[ $status == 69 ]] || die "expected exit status 69, got $status"

# ---- 6. lock lost -----------------------------------------------------------------
step "6. the lock is deleted behind the holder's back (as a force-unlock would): exit status 76"
show "lockfleet lock --lease 1s $lock -- sleep 10 &    then: redis-cli DEL 'lockfleet:{$lock}:lock'"
set +e
"$lockfleet" lock --lease 1s "$lock" -- sleep 10 &
holder_pid=$!
set -e
for _ in $(seq 200); do
  [[ "$(rcli EXISTS "lockfleet:{$lock}:lock")" == 1 ]] && break
  sleep 0.05
done
rcli DEL "lockfleet:{$lock}:lock" >/dev/null
set +e
wait "$holder_pid"
status=$?
set -e
holder_pid=""
echo "   exit status $status (76: lock lost; the watchdog noticed at its next renewal and COMMAND got SIGTERM)"
[[ $status == 76 ]] || die "expected exit status 76, got $status"

echo
echo "demo done; stopping redis-server and removing $demo_dir"
