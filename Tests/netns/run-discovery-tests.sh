#!/usr/bin/env bash
# run-discovery-tests.sh: SpeakBridgeDiscoveryTests against real avahi on a private test LAN.
#
#   1. builds the tests in the root namespace (compiling only; nothing there touches the network
#      except SwiftPM's and pip's own package fetching),
#   2. sets up python-zeroconf in a venv under .build (skipped with a reason if pip cannot),
#   3. starts Tests/netns/lan.sh trio (hosts a, b, c: namespaces, private dbus + avahi each),
#   4. runs `swift test --skip-build --filter SpeakBridgeDiscoveryTests` inside host a with
#      SPEAKBRIDGE_NETNS=1 and the LAN described in SPEAKBRIDGE_LAN_*,
#   5. stops the LAN (trap), whatever happened.
#
# Usage (root):  bash Tests/netns/run-discovery-tests.sh [extra swift test args]
# Exit status: that of swift test; 77 with a one-line reason if namespaces cannot be made here.
# Environment: SB_LAN_MODE (pair|trio, default trio); SWIFT_FLAGS (extra flags for both swift
# build and swift test, e.g. "--sanitize=thread --scratch-path .build-tsan"); SPEAKBRIDGE_TEST_FILTER (default
# SpeakBridgeDiscoveryTests; a second --filter in the arguments would widen, not narrow, the run).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LAN="$ROOT/Tests/netns/lan.sh"
MODE=${SB_LAN_MODE:-trio}
cd "$ROOT"

say() { echo "run-discovery-tests: $*" >&2; }

# Cheap checks first, so a machine that cannot run this skips before building.
[ "$(id -u)" = 0 ] || { say "skipped: needs root to create network namespaces"; exit 77; }
for tool in ip dbus-daemon avahi-daemon avahi-browse avahi-publish-service; do
    command -v "$tool" > /dev/null || { say "skipped: $tool not installed (apt-get install -y iproute2 dbus avahi-daemon avahi-utils)"; exit 77; }
done

t0=$(date +%s.%N)
# SWIFT_FLAGS go to both build and test, e.g. "--sanitize=thread --scratch-path .build-tsan".
read -r -a SWIFT_FLAGS_ARRAY <<< "${SWIFT_FLAGS:-}"
swift build --build-tests "${SWIFT_FLAGS_ARRAY[@]}"
t1=$(date +%s.%N)

# python-zeroconf in .build/netns-venv (shared with run-lan-e2e.sh).
. "$ROOT/Tests/netns/zeroconf-venv.sh"
zeroconf_venv
[ -z "$ZEROCONF_SKIP" ] || say "$ZEROCONF_SKIP; the zeroconf test will be skipped"

SB_LAN_STATE=$(mktemp -d /tmp/speakbridge-lan.XXXXXX)
export SB_LAN_STATE SB_LAN_PREFIX="sbt$$"
trap '"$LAN" stop' EXIT
set +e
"$LAN" start "$MODE"
rc=$?
set -e
if [ $rc -ne 0 ]; then
    [ $rc -eq 77 ] && say "skipped: the test LAN cannot be created here"
    exit $rc
fi
t2=$(date +%s.%N)

mapfile -t HOSTS < <("$LAN" hosts)
set +e
"$LAN" exec "${HOSTS[0]}" env \
    SPEAKBRIDGE_NETNS=1 \
    SPEAKBRIDGE_LAN_SCRIPT="$LAN" \
    SPEAKBRIDGE_LAN_ME="${HOSTS[0]}" \
    SPEAKBRIDGE_LAN_PEER="${HOSTS[1]}" \
    SPEAKBRIDGE_LAN_PEER2="${HOSTS[2]:-}" \
    SPEAKBRIDGE_ZEROCONF_PYTHON="$ZEROCONF_PYTHON" \
    SPEAKBRIDGE_ZEROCONF_SKIP="$ZEROCONF_SKIP" \
    swift test --skip-build "${SWIFT_FLAGS_ARRAY[@]}" --filter "${SPEAKBRIDGE_TEST_FILTER:-SpeakBridgeDiscoveryTests}" "$@"
rc=$?
set -e
t3=$(date +%s.%N)
say "$(awk -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" 'BEGIN { printf "build %.1fs, LAN start %.1fs, tests %.1fs", b - a, c - b, d - c }')"
exit $rc
