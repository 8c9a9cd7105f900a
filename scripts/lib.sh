# shellcheck shell=bash
# Helpers shared by the scripts in this folder. Source it; don't run it.
#
# Sets LOCKFLEET_ROOT to the repository root (from this file's own path, so
# the scripts work from any cwd) and cds there.

LOCKFLEET_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$LOCKFLEET_ROOT"

# Compile and test parallelism. The reference machine (and CI) has 2 cores.
LOCKFLEET_JOBS="${LOCKFLEET_JOBS:-2}"

# say MESSAGE...: a progress line on stderr, prefixed with the script's name.
say() {
  printf '[%s] %s\n' "$(basename "$0" .sh)" "$*" >&2
}

# usage [STATUS]: prints the calling script's header comment (from line 2 to
# `set -euo`) as its help, and exits STATUS (default 2).
usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2
  exit "${1:-2}"
}

# die MESSAGE...: say it and exit 1.
die() {
  say "error: $*"
  exit 1
}

# default_build_dir [thread|address]: the build dir a sanitizer mode uses.
default_build_dir() {
  case "${1:-}" in
    "") echo "$LOCKFLEET_ROOT/build" ;;
    thread) echo "$LOCKFLEET_ROOT/build-tsan" ;;
    address) echo "$LOCKFLEET_ROOT/build-asan" ;;
    *) die "unknown sanitizer '$1' (want thread or address)" ;;
  esac
}

# run_ctest TITLE BUILD_DIR CTEST_ARGS...: runs ctest with the output shown
# as it comes, and appends "TITLE: <ctest summary line>" to
# $LOCKFLEET_SUMMARY_FILE (when set). Returns ctest's exit status. The array
# CTEST_ENV (VAR=value words) is added to ctest's environment only.
CTEST_ENV=()
run_ctest() {
  local title="$1" dir="$2"
  shift 2
  local log status summary
  log="$(mktemp)"
  say "$title: ctest $*"
  set +e
  env "${CTEST_ENV[@]}" ctest --test-dir "$dir" --output-on-failure --no-tests=error "$@" 2>&1 |
    tee "$log"
  status="${PIPESTATUS[0]}"
  set -e
  summary="$(grep -E '^[0-9]+% tests passed' "$log" | tail -n 1 || true)"
  if [[ -z "$summary" ]]; then
    summary="no ctest summary (ctest exit status $status)"
  fi
  if [[ -n "${LOCKFLEET_SUMMARY_FILE:-}" ]]; then
    printf '%s: %s\n' "$title" "$summary" >>"$LOCKFLEET_SUMMARY_FILE"
    failed_excerpts "$log" >>"$LOCKFLEET_SUMMARY_FILE.failures"
  fi
  rm -f "$log"
  return "$status"
}

# failed_excerpts LOG: for each test ctest reported as not passed in LOG,
# its result line and the last 40 lines of the output ctest printed after it
# (--output-on-failure), so that the end of a CI log names what failed and
# why even when only its tail is kept.
failed_excerpts() {
  awk '
    /^ *[0-9]+\/[0-9]+ Test +#[0-9]+: / {
      flush()
      if ($0 !~ / Passed +[0-9.]+ sec/ && $0 !~ /Skipped/) { keep = 1; head = $0 }
      next
    }
    /^ *Start +[0-9]+: / || /^[0-9]+% tests passed/ { flush(); next }
    keep { buf[n++ % 40] = $0 }
    function flush(  i, start) {
      if (!keep) return
      print "---- " head
      start = n > 40 ? n - 40 : 0
      for (i = start; i < n; i++) print "  | " buf[i % 40]
      keep = 0; n = 0
    }
    END { flush() }
  ' "$1"
}

# print_summary FILE: the collected ctest summary lines, then one closing
# line "total: N passed, M failed" over all of them.
print_summary() {
  local file="$1" line passed=0 failed=0 f t
  [[ -s "$file" ]] || return 0
  echo "==== test summary ===="
  while IFS= read -r line; do
    echo "$line"
    if [[ "$line" =~ ([0-9]+)\ tests\ failed\ out\ of\ ([0-9]+) ]]; then
      f="${BASH_REMATCH[1]}"
      t="${BASH_REMATCH[2]}"
      passed=$((passed + t - f))
      failed=$((failed + f))
    else
      failed=$((failed + 1))  # a suite that did not even report counts as a failure
    fi
  done <"$file"
  if [[ -s "$file.failures" ]]; then
    echo "==== tests that did not pass ===="
    cat "$file.failures"
  fi
  echo "total: $passed passed, $failed failed"
}
