#!/usr/bin/env bash
# Installs the Debian 12 packages that building and testing lockfleet need.
#
# Usage: scripts/setup.sh
#
# Idempotent: when every package is already installed it touches nothing (no
# apt at all). Otherwise it installs the missing ones with apt-get, running
# `apt-get update` only when the package lists are missing, lack a package,
# or turn out to be stale. Runs as root, or through sudo (non-interactively
# when there is no terminal). Never prompts.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PACKAGES=(
  # toolchain
  build-essential cmake ninja-build pkg-config git clang-format
  # libraries
  libhiredis-dev librdkafka-dev libyaml-cpp-dev prometheus-cpp-dev
  libcli11-dev nlohmann-json3-dev
  # HMAC-SHA256 of unlock events (kafka.event_key)
  libssl-dev
  # the terminal view of `lockfleet top`
  libncurses-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  # fuzzing (scripts/fuzz.sh): clang 14 and its libFuzzer/sanitizer runtimes
  clang libclang-rt-14-dev
  # servers and tools the tests and the demo run (redis-server brings redis-cli)
  redis-server redis-tools kcat openssl
  # drives `lockfleet top` in a terminal, as a person would (tests/cli)
  tmux
  # promtool (checks the metrics exposition and the alert rules)
  prometheus
  # model checking of the fair lock protocol (model/, scripts/model-check.sh)
  spin
  # the real Apache Kafka broker of the real-broker tests (../shared/kafka)
  openjdk-17-jre-headless
)

is_installed() {
  [[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null || true)" == installed ]]
}

command -v dpkg-query >/dev/null 2>&1 ||
  die "dpkg-query not found: this script supports Debian 12 only. Packages: ${PACKAGES[*]}"

missing=()
for package in "${PACKAGES[@]}"; do
  is_installed "$package" || missing+=("$package")
done
if ((${#missing[@]} == 0)); then
  say "all ${#PACKAGES[@]} packages already installed; nothing to do"
  exit 0
fi
say "missing: ${missing[*]}"

# Root runs apt directly; anyone else goes through sudo, which must not
# prompt when nobody is there to answer.
SUDO=()
if ((EUID != 0)); then
  command -v sudo >/dev/null 2>&1 || die "not root and sudo not found; run as root"
  if [[ -t 0 ]]; then SUDO=(sudo); else SUDO=(sudo -n); fi
fi

export DEBIAN_FRONTEND=noninteractive
APT_GET=("${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -y -q
  -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold
  -o Dpkg::Use-Pty=0)

has_candidate() {
  local candidate
  candidate="$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2}')"
  [[ -n "$candidate" && "$candidate" != "(none)" ]]
}

need_update=false
for package in "${missing[@]}"; do
  if ! has_candidate "$package"; then
    need_update=true
    break
  fi
done

if [[ "$need_update" == true ]]; then
  say "package lists lack some of them: apt-get update"
  "${APT_GET[@]}" update
fi

install() {
  "${APT_GET[@]}" install --no-install-recommends "${missing[@]}"
}

say "installing ${#missing[@]} package(s)"
if ! install; then
  [[ "$need_update" == false ]] || die "apt-get install failed"
  # Lists present but stale (a download 404s): refresh once and retry.
  say "install failed; refreshing package lists and retrying"
  "${APT_GET[@]}" update
  install || die "apt-get install failed"
fi

still_missing=()
for package in "${missing[@]}"; do
  is_installed "$package" || still_missing+=("$package")
done
((${#still_missing[@]} == 0)) || die "still not installed: ${still_missing[*]}"
say "done"
