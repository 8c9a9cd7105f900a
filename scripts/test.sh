#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs the tests.
#
# Usage: scripts/test.sh [--sanitizers] [--fuzz] [--no-setup]
#
#   1. scripts/setup.sh (skipped with --no-setup)
#   2. build/ (RelWithDebInfo): ctest labels unit, integration, tool and
#      chaos. The real-broker tests share one Apache Kafka broker per ctest
#      run (the ctest fixture real_kafka, tests/CMakeLists.txt).
#   3. with --sanitizers, or when CI=true:
#        build-tsan/ (ThreadSanitizer):          labels unit, integration,
#                                                tool
#          (with scripts/sanitizers/: the C11-threads shim preloaded and
#          tsan.supp, both for librdkafka)
#        build-asan/ (AddressSanitizer + UBSan): labels unit, integration
#          (not tool: the bench, top and jobs tools' end-to-end tests)
#      Each sanitizer build compiles only the tests of the labels it runs
#      (LOCKFLEET_TEST_LABELS, tests/CMakeLists.txt). Both skip the
#      real-broker tests (LOCKFLEET_NO_REAL_KAFKA=1, see
#      tests/support/real_kafka.h): those test our code against a real
#      broker's behaviour, which the default stage does; under the
#      sanitizers the same code paths run in the tests' embedded-broker
#      variants.
#   4. scripts/model-check.sh: spin checks the Promela model of the fair
#      lock protocol (model/), and that it catches the re-introduced bugs
#   5. with --fuzz, or when CI=true: scripts/fuzz.sh — build-fuzz/ (clang,
#      libFuzzer + ASan + UBSan), each fuzz target for
#      $LOCKFLEET_FUZZ_SECONDS (default 30) s
#
# Every stage runs even when an earlier one failed; the exit status is 1 if
# any build or test failed. The closing lines summarize each ctest run.
#
# Environment: LOCKFLEET_JOBS (default 2) compile and test jobs;
# TSAN_OPTIONS / ASAN_OPTIONS / UBSAN_OPTIONS are appended to the defaults
# below (later settings win); LOCKFLEET_SUMMARY_FILE collects summary lines
# for a caller (.ci/run); LOCKFLEET_NO_REAL_KAFKA=0 runs the real-broker
# tests in the sanitizer stages too (=1: in none).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

sanitizers=false
fuzz=false
setup=true
[[ "${CI:-}" == true ]] && sanitizers=true && fuzz=true
while (($#)); do
  case "$1" in
    --sanitizers) sanitizers=true ;;
    --fuzz) fuzz=true ;;
    --no-setup) setup=false ;;
    -h | --help) usage 0 ;;
    *) say "unknown argument: $1"; usage ;;
  esac
  shift
done

own_summary=false
if [[ -z "${LOCKFLEET_SUMMARY_FILE:-}" ]]; then
  LOCKFLEET_SUMMARY_FILE="$(mktemp)"
  own_summary=true
  trap 'rm -f "$LOCKFLEET_SUMMARY_FILE" "$LOCKFLEET_SUMMARY_FILE.failures"' EXIT
fi
export LOCKFLEET_SUMMARY_FILE

if [[ "$setup" == true ]]; then
  bash "$LOCKFLEET_ROOT/scripts/setup.sh"
fi

failed=()
start=$SECONDS

# suite TITLE SANITIZER LABELS: build one configuration and test it; LABELS
# (a ;-list) are the ctest labels it runs. A sanitizer build compiles only
# their tests; the default one all (build/ also serves .ci/run's install
# test).
suite() {
  local title="$1" sanitize="$2" labels="$3" dir build_labels=""
  local t0=$SECONDS
  [[ -z "$sanitize" ]] || build_labels="$labels"
  dir="$(default_build_dir "$sanitize")"
  say "==== $title: build ($dir) ===="
  if ! bash "$LOCKFLEET_ROOT/scripts/build.sh" ${sanitize:+--sanitize "$sanitize"} "$dir" \
    -- "-DLOCKFLEET_TEST_LABELS=$build_labels"; then
    echo "$title: build failed" >>"$LOCKFLEET_SUMMARY_FILE"
    failed+=("$title (build)")
    return 0
  fi
  say "==== $title: test ===="
  if ! run_ctest "$title" "$dir" -j "$LOCKFLEET_JOBS" -L "^(${labels//;/|})\$"; then
    failed+=("$title (tests)")
  fi
  say "$title took $((SECONDS - t0)) s"
}

# The real-broker tests (chaos scenario 7) need kafka-local and java.
kafka_local="${LOCKFLEET_KAFKA_LOCAL:-$LOCKFLEET_ROOT/../shared/kafka/kafka-local}"
if [[ ! -x "$kafka_local" ]] || ! command -v java >/dev/null; then
  say "warning: no real Kafka broker ($kafka_local or java missing): the real-broker tests are skipped"
  echo "warning: real-broker tests skipped (no kafka-local or java)" >>"$LOCKFLEET_SUMMARY_FILE"
fi

suite default "" 'unit;integration;tool;chaos'

say "==== model: spin (model/) ===="
t0=$SECONDS
bash "$LOCKFLEET_ROOT/scripts/model-check.sh" || failed+=("model")
say "model took $((SECONDS - t0)) s"

if [[ "$sanitizers" == true ]]; then
  # Subshells keep each sanitizer's options to its own stage.
  (
    export LOCKFLEET_NO_REAL_KAFKA="${LOCKFLEET_NO_REAL_KAFKA:-1}"
    failed=()
    # librdkafka's threads and memory, made visible to / kept away from TSan:
    # see scripts/sanitizers/.
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$LOCKFLEET_ROOT/scripts/sanitizers/tsan.supp${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
    # shellcheck disable=SC2034  # read by run_ctest (lib.sh)
    CTEST_ENV=("LD_PRELOAD=$(default_build_dir thread)/libtsan-c11-threads.so${LD_PRELOAD:+:$LD_PRELOAD}")
    suite tsan thread 'unit;integration;tool'
    [[ ${#failed[@]} -eq 0 ]]
  ) || failed+=("tsan")
  (
    export LOCKFLEET_NO_REAL_KAFKA="${LOCKFLEET_NO_REAL_KAFKA:-1}"
    failed=()
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:check_initialization_order=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
    suite asan address 'unit;integration'
    [[ ${#failed[@]} -eq 0 ]]
  ) || failed+=("asan")
fi

if [[ "$fuzz" == true ]]; then
  say "==== fuzz ===="
  t0=$SECONDS
  bash "$LOCKFLEET_ROOT/scripts/fuzz.sh" || failed+=("fuzz")
  say "fuzz took $((SECONDS - t0)) s"
fi

say "all stages took $((SECONDS - start)) s"
if [[ "$own_summary" == true ]]; then
  print_summary "$LOCKFLEET_SUMMARY_FILE"
fi
if ((${#failed[@]})); then
  say "FAILED: ${failed[*]}"
  exit 1
fi
say "all passed"
