#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang and runs each for a bounded
# time. Exits 1 if a build fails or a fuzzer finds a crash, a leak, undefined
# behaviour, a timeout or an out-of-memory; the input that did it is kept.
#
# Usage: scripts/fuzz.sh [--seconds N] [--build-only] [TARGET...]
#
#   TARGET        unlock_codec, job, config, resource_key (default: all)
#   --seconds N   fuzzing time per target (default: $LOCKFLEET_FUZZ_SECONDS,
#                 else 30)
#   --build-only  build, run nothing
#
# Build dir: build-fuzz/ (-DLOCKFLEET_FUZZ=ON, CXX=clang++, only the fuzz
# targets and the libraries they link). Seeds: fuzz/corpus/TARGET/ (read
# only); the corpus a run grows: build-fuzz/corpus/TARGET/; what a fuzzer
# found: build-fuzz/artifacts/TARGET/ (crash-*, leak-*, timeout-*, oom-*;
# replay one with `build-fuzz/fuzz/lockfleet_fuzz_TARGET FILE`).
#
# Environment: LOCKFLEET_JOBS (default 2) compile jobs and parallel fuzzers;
# LOCKFLEET_FUZZ_SECONDS; LOCKFLEET_FUZZ_ARGS extra libFuzzer flags;
# LOCKFLEET_SUMMARY_FILE gets one line in ctest's summary format.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ALL_TARGETS=(unlock_codec job config resource_key)
seconds="${LOCKFLEET_FUZZ_SECONDS:-30}"
build_only=false
targets=()
while (($#)); do
  case "$1" in
    --seconds) [[ $# -ge 2 ]] || usage; seconds="$2"; shift 2 ;;
    --seconds=*) seconds="${1#*=}"; shift ;;
    --build-only) build_only=true; shift ;;
    -h | --help) usage 0 ;;
    -*) say "unknown option: $1"; usage ;;
    *)
      [[ " ${ALL_TARGETS[*]} " == *" $1 "* ]] || { say "unknown target: $1"; usage; }
      targets+=("$1"); shift ;;
  esac
done
((${#targets[@]})) || targets=("${ALL_TARGETS[@]}")
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { say "--seconds wants a positive integer"; usage; }

dir="$LOCKFLEET_ROOT/build-fuzz"
summary() {
  if [[ -n "${LOCKFLEET_SUMMARY_FILE:-}" ]]; then
    printf 'fuzz: %s\n' "$1" >>"$LOCKFLEET_SUMMARY_FILE"
  fi
}

command -v clang++ >/dev/null 2>&1 ||
  { summary "no ctest summary (clang++ not found; run scripts/setup.sh)"; die "clang++ not found"; }
t0=$SECONDS
mkdir -p "$dir"
say "configuring $dir (clang, libFuzzer + ASan + UBSan)"
args=(-S "$LOCKFLEET_ROOT" -B "$dir" -DLOCKFLEET_FUZZ=ON
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLOCKFLEET_BUILD_TESTS=OFF)
[[ -f "$dir/CMakeCache.txt" ]] || args+=(-G Ninja)
build_targets=()
for target in "${targets[@]}"; do build_targets+=(--target "lockfleet_fuzz_$target"); done
if ! CC=clang CXX=clang++ cmake "${args[@]}" >"$dir/configure.log" 2>&1 ||
  ! cmake --build "$dir" --parallel "$LOCKFLEET_JOBS" "${build_targets[@]}"; then
  cat "$dir/configure.log" >&2 || true
  summary "no ctest summary (fuzz build failed)"
  die "fuzz build failed"
fi
rm -f "$dir/configure.log"
say "built in $((SECONDS - t0)) s"
$build_only && exit 0

# run_one TARGET: fuzz it for $seconds; its log goes to build-fuzz/TARGET.log.
run_one() {
  local target="$1" bin="$dir/fuzz/lockfleet_fuzz_$1"
  local corpus="$dir/corpus/$target" artifacts="$dir/artifacts/$target"
  mkdir -p "$corpus" "$artifacts"
  local dict=()
  case "$target" in
    config) ;;
    resource_key) dict=(-dict="$LOCKFLEET_ROOT/fuzz/resource_key.dict") ;;
    *) dict=(-dict="$LOCKFLEET_ROOT/fuzz/json.dict") ;;
  esac
  # -rss_limit_mb: the decoders must not need much; -timeout: one input
  # taking 10 s is a hang; -max_len: room for oversized records (the unlock
  # decoder's 16 KiB limit) without making every input huge.
  # shellcheck disable=SC2086  # LOCKFLEET_FUZZ_ARGS is a list of flags
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}" \
    "$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
    -max_len=20000 -print_final_stats=1 -artifact_prefix="$artifacts/" \
    "${dict[@]}" ${LOCKFLEET_FUZZ_ARGS:-} \
    "$corpus" "$LOCKFLEET_ROOT/fuzz/corpus/$target" >"$dir/$target.log" 2>&1
}

say "fuzzing ${targets[*]} for $seconds s each, $LOCKFLEET_JOBS at a time"
pids=()
statuses=()
for target in "${targets[@]}"; do
  # Bounded parallelism: wait for the oldest when all slots are busy.
  while (($(jobs -rp | wc -l) >= LOCKFLEET_JOBS)); do sleep 1; done
  run_one "$target" &
  pids+=($!)
done
for pid in "${pids[@]}"; do
  if wait "$pid"; then statuses+=(0); else statuses+=($?); fi
done

failed=0
total_runs=0
for i in "${!targets[@]}"; do
  target="${targets[$i]}"
  log="$dir/$target.log"
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
  speed="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)"
  cov="$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -n 1 || true)"
  total_runs=$((total_runs + ${runs:-0}))
  if [[ "${statuses[$i]}" == 0 ]]; then
    say "$target: ok, ${runs:-?} runs, ${speed:-?} exec/s, ${cov:-no coverage line}"
  else
    failed=$((failed + 1))
    say "$target: FAILED (exit ${statuses[$i]}); last lines of $log:"
    tail -n 60 "$log" >&2
    say "$target: inputs kept in $dir/artifacts/$target/:"
    ls -1 "$dir/artifacts/$target" >&2 || true
  fi
done
passed=$((${#targets[@]} - failed))
summary "$((100 * passed / ${#targets[@]}))% tests passed, $failed tests failed out of ${#targets[@]} (fuzz targets, $total_runs runs, $seconds s each)"
say "fuzzing took $((SECONDS - t0)) s"
((failed == 0))
