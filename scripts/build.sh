#!/usr/bin/env bash
# Configures (Ninja) and builds lockfleet.
#
# Usage: scripts/build.sh [--sanitize thread|address] [--type BUILD_TYPE]
#                         [--target TARGET]... [BUILD_DIR]
#                         [-- EXTRA_CMAKE_ARGS...]
#
#   --sanitize thread    ThreadSanitizer build       (default dir: build-tsan);
#                        also builds BUILD_DIR/libtsan-c11-threads.so, which
#                        TSan test runs preload (see scripts/test.sh)
#   --sanitize address   AddressSanitizer + UBSan    (default dir: build-asan)
#   --type TYPE          CMAKE_BUILD_TYPE. Default: RelWithDebInfo; sanitizer
#                        builds default to Debug with -Og -g1 (asserts on).
#                        Under CI=true, RelWithDebInfo is -O2 -g1: line
#                        tables are all a backtrace needs, at ~2/3 of the
#                        compile time of -g.
#   --target TARGET      build only TARGET (repeatable). Default: all.
#   BUILD_DIR            Default: build (relative paths are taken from the
#                        repository root).
#
# Environment: LOCKFLEET_JOBS (default 2) compile jobs.
# An existing build dir is reconfigured with its own generator.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

sanitize=""
build_type=""
build_dir=""
targets=()
extra=()
while (($#)); do
  case "$1" in
    --sanitize) [[ $# -ge 2 ]] || usage; sanitize="$2"; shift 2 ;;
    --sanitize=*) sanitize="${1#*=}"; shift ;;
    --type) [[ $# -ge 2 ]] || usage; build_type="$2"; shift 2 ;;
    --type=*) build_type="${1#*=}"; shift ;;
    --target) [[ $# -ge 2 ]] || usage; targets+=(--target "$2"); shift 2 ;;
    --target=*) targets+=(--target "${1#*=}"); shift ;;
    -h | --help) usage 0 ;;
    --) shift; extra=("$@"); break ;;
    -*) say "unknown option: $1"; usage ;;
    *) [[ -z "$build_dir" ]] || usage; build_dir="$1"; shift ;;
  esac
done

case "$sanitize" in
  "" | thread | address) ;;
  *) say "--sanitize wants thread or address, not '$sanitize'"; usage ;;
esac
[[ -n "$build_dir" ]] || build_dir="$(default_build_dir "$sanitize")"
[[ "$build_dir" == /* ]] || build_dir="$LOCKFLEET_ROOT/$build_dir"

# Warnings are errors in the project's own builds (and so in CI), not in
# everyone's (CMakeLists.txt: LOCKFLEET_WERROR defaults to OFF).
args=(-S "$LOCKFLEET_ROOT" -B "$build_dir" "-DLOCKFLEET_SANITIZE=$sanitize"
      -DLOCKFLEET_WERROR=ON)
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  args+=(-G Ninja)
fi
if [[ -n "$sanitize" ]]; then
  # Sanitizer reports need frames and lines (-g1: line tables). -Og, not
  # -O1: with ASan+UBSan a test file compiles ~2.5x faster (UBSan's checks
  # cost most at -O1), with TSan ~2x, and the tests, waiting on Redis and
  # Kafka more than computing, run about as fast.
  build_type="${build_type:-Debug}"
  args+=("-DCMAKE_CXX_FLAGS_DEBUG=-Og -g1")
else
  build_type="${build_type:-RelWithDebInfo}"
  if [[ "${CI:-}" == true && "$build_type" == RelWithDebInfo ]]; then
    args+=("-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG")
  fi
fi
args+=("-DCMAKE_BUILD_TYPE=$build_type")

say "configuring $build_dir (${sanitize:-no} sanitizer, $build_type)"
cmake "${args[@]}" "${extra[@]}"
say "building $build_dir with $LOCKFLEET_JOBS jobs"
cmake --build "$build_dir" --parallel "$LOCKFLEET_JOBS" "${targets[@]}"

if [[ "$sanitize" == thread ]]; then
  # librdkafka's C11 threads are invisible to GCC 12's TSan: tests preload
  # this shim (see scripts/sanitizers/tsan-c11-threads.c and test.sh).
  shim_src="$LOCKFLEET_ROOT/scripts/sanitizers/tsan-c11-threads.c"
  shim="$build_dir/libtsan-c11-threads.so"
  if [[ ! -f "$shim" || "$shim_src" -nt "$shim" ]]; then
    say "building $shim"
    "${CC:-cc}" -std=c11 -O1 -g -Wall -Wextra -Werror -fPIC -shared -pthread \
      -o "$shim" "$shim_src"
  fi
fi
say "built $build_dir"
