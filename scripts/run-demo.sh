#!/usr/bin/env bash
# The main job: the flash-sale demo of the worker fleet (`lockfleet demo`).
#
# Usage: scripts/run-demo.sh [--no-setup] [DEMO OPTIONS...]
#
# Installs what is missing (scripts/setup.sh, unless --no-setup), builds the
# lockfleet binary in build/ and runs `lockfleet demo`: an embedded Kafka
# broker, a private redis-server and 4 worker processes sell 10 products of
# 100 units to 2,000 purchase jobs. It prints each worker's /metrics URL, the
# progress and a summary, and exits 0 only if nothing was oversold and every
# job ran exactly once. Ctrl-C stops everything it started.
# DEMO OPTIONS go to `lockfleet demo` (e.g. --workers 8 --jobs 10000; see
# `lockfleet demo --help`).
#
# For a walkthrough of the `lockfleet lock` command instead, run
# scripts/lock-walkthrough.sh.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

setup=true
if [[ "${1:-}" == --no-setup ]]; then
  setup=false
  shift
elif [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"
  exit 0
fi

if [[ "$setup" == true ]]; then
  bash "$LOCKFLEET_ROOT/scripts/setup.sh"
fi
bash "$LOCKFLEET_ROOT/scripts/build.sh" --target lockfleet_cli

build_dir="$(default_build_dir "")"
lockfleet="$build_dir/cli/lockfleet"
[[ -x "$lockfleet" ]] || die "no lockfleet binary at $lockfleet after the build"
exec "$lockfleet" demo "$@"
