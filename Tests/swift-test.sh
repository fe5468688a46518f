#!/usr/bin/env bash
# Runs the Swift suite (`swift test --skip-build`, its arguments passed on) and, when it fails, prints every issue
# it recorded once more at the very end: a run of 800 tests prints thousands of lines, and a CI log that keeps only
# its tail would otherwise show the summary line ("failed with 10 issues") without saying which.
set -uo pipefail
log=$(mktemp /tmp/sb-swift-test-XXXXXX.log)
trap 'rm -f "$log"' EXIT
swift_bin=${SWIFT:-swift}
"$swift_bin" test --skip-build "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
    echo
    echo "== the Swift suite failed (exit $status); what it recorded, again:"
    # Each issue's first line (test, file:line, expectation) and a crash's last words, cut to fit the tail of a CI
    # log (16 lines of 200 bytes).
    grep -a -E 'recorded an issue|Fatal error|Program crashed|unexpected signal' "$log" | cut -c1-200 | head -n 16
fi
exit "$status"
