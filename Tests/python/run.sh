#!/usr/bin/env bash
# The independent Python client (Examples/python-client), written from Pairing/PROTOCOL.md alone:
#   1. check-vectors: every file in Pairing/vectors/ (pairing codes, handshakes byte for byte, frames); held.py and
#      client_rules.py: what the client does with a `held`, acks above what it sent, and `null` members;
#   2. against the REAL Swift daemon on loopback: join with a code from `pair --json`; send 200 lines paced,
#      kill -9 the client mid-stream, run it again with 20 more lines, and require lines 1..220 exactly once and
#      in order on the daemon's FIFO; a used code and a wrong psk are refused and write nothing;
#   3. conformance.py: what PROTOCOL.md says a desktop does where a client could otherwise only probe;
#   4. `pip install` of the client gives `speakbridge-client`; the Termux recipe, with a stand-in
#      termux-speech-to-text on PATH, delivers every recognised line once, in order.
# Closing line: "N passed, M failed" (exit 1 on any failure). Without network for pip: one line saying so and
# "0 passed, 0 failed, 1 skipped", exit 0.
#
# Environment: SPEAKBRIDGE_BIN (default .build/debug/speakbridge), SPEAKBRIDGE_PYTHON_BUILD (default .build-python).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CLIENT_DIR=$ROOT/Examples/python-client
BUILD=${SPEAKBRIDGE_PYTHON_BUILD:-$ROOT/.build-python}
VENV=$BUILD/venv
BIN=${SPEAKBRIDGE_BIN:-$ROOT/.build/debug/speakbridge}
PASSED=0
FAILED=0

pass() { echo "ok   $1"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL $1"; FAILED=$((FAILED + 1)); }
finish() {
    echo "$PASSED passed, $FAILED failed"
    [ "$FAILED" -eq 0 ] && exit 0 || exit 1
}
skip_all() {
    echo "python client: $1"
    echo "0 passed, 0 failed, 1 skipped"
    exit 0
}

# 1. The virtualenv (kept between runs under .build-python, which .gitignore's .build-* covers).
if [ ! -x "$VENV/bin/python" ]; then
    mkdir -p "$BUILD"
    python3 -m venv "$VENV" >/dev/null 2>&1 || skip_all "python3 -m venv is not available (install python3-venv); skipped"
fi
if ! "$VENV/bin/pip" install -q --disable-pip-version-check -r "$CLIENT_DIR/requirements.txt" >"$BUILD/pip.log" 2>&1; then
    skip_all "pip cannot install $CLIENT_DIR/requirements.txt (no network?), see $BUILD/pip.log; skipped"
fi
PY=$VENV/bin/python
SB="$PY $CLIENT_DIR/sbclient.py"

# 2. The vectors.
out=$($SB check-vectors "$ROOT/Pairing/vectors" 2>&1)
echo "$out" | grep -v '^check-vectors: ' | sed 's/^/  /'
counts=$(echo "$out" | sed -n 's/^check-vectors: \([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p')
if [ -n "$counts" ]; then
    set -- $counts
    PASSED=$((PASSED + $1))
    FAILED=$((FAILED + $2))
    echo "ok   check-vectors ran: $1 passed, $2 failed"
else
    fail "check-vectors did not run: $out"
fi

# 2b. `held` from the desktop: printed once, escaped, the line kept until the ack (held.py: a scripted desktop).
out=$("$PY" "$ROOT/Tests/python/held.py" "$CLIENT_DIR/sbclient.py" 2>&1)
echo "$out" | grep -v '^held: ' | sed 's/^/  /'
counts=$(echo "$out" | sed -n 's/^held: \([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p')
if [ -n "$counts" ]; then
    set -- $counts
    PASSED=$((PASSED + $1))
    FAILED=$((FAILED + $2))
    echo "ok   held.py ran: $1 passed, $2 failed"
else
    fail "held.py did not run: $out"
fi

# 2c. Client rules only a misbehaving desktop can probe: acks and `delivered` clamped to what was sent; `null`
#     members count as absent (client_rules.py: a scripted desktop).
out=$("$PY" "$ROOT/Tests/python/client_rules.py" "$CLIENT_DIR/sbclient.py" 2>&1)
echo "$out" | grep -v '^client_rules: ' | sed 's/^/  /'
counts=$(echo "$out" | sed -n 's/^client_rules: \([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p')
if [ -n "$counts" ]; then
    set -- $counts
    PASSED=$((PASSED + $1))
    FAILED=$((FAILED + $2))
    echo "ok   client_rules.py ran: $1 passed, $2 failed"
else
    fail "client_rules.py did not run: $out"
fi

# 3. Against the real daemon.
if [ ! -x "$BIN" ]; then
    fail "no daemon binary at $BIN (build it with \`swift build\`, or set SPEAKBRIDGE_BIN)"
    finish
fi
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sb-python.XXXXXX")
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT

mkfifo -m 600 "$TMP/out"
cat "$TMP/out" >"$TMP/received" &
PIDS+=($!)
"$BIN" serve --home "$TMP/desk" --listen 127.0.0.1:0 --no-mdns --sink "fifo:$TMP/out" 2>"$TMP/daemon.log" &
DAEMON=$!
PIDS+=($DAEMON)

json_field() { "$PY" -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
port=""
for _ in $(seq 100); do
    port=$("$BIN" status --json --home "$TMP/desk" 2>/dev/null | json_field port 2>/dev/null) && [ -n "$port" ] && break
    port=""
    sleep 0.1
done
if [ -z "$port" ]; then
    fail "the daemon did not start; its log:"
    sed 's/^/  /' "$TMP/daemon.log"
    finish
fi
lines() { wc -l <"$TMP/received" | tr -d ' '; }
wait_lines() {  # wait_lines N SECONDS
    for _ in $(seq $(($2 * 10))); do [ "$(lines)" -ge "$1" ] && return 0; sleep 0.1; done
    return 1
}

code=$("$BIN" pair --json --home "$TMP/desk" | json_field code)
if $SB join "$code" --name py-test --state "$TMP/phone" 2>"$TMP/join.log" \
    && "$BIN" devices --json --home "$TMP/desk" | grep -q '"py-test"'; then
    pass "join: paired with the real daemon, which lists the device"
else
    fail "join: $(cat "$TMP/join.log")"
    finish
fi

if $SB join "$code" --name second --state "$TMP/second" 2>/dev/null; then
    fail "a used pairing code was accepted a second time"
else
    pass "a used pairing code is refused"
fi

seq -f 'line %g' 1 200 >"$TMP/first"
seq -f 'line %g' 201 220 >"$TMP/second-batch"
$SB send --state "$TMP/phone" --rate 60 <"$TMP/first" 2>"$TMP/send1.log" &
CLIENT=$!
PIDS+=($CLIENT)
if wait_lines 20 20; then
    kill -9 "$CLIENT"
    wait "$CLIENT" 2>/dev/null
    at_kill=$(lines)
    if [ "$at_kill" -lt 200 ]; then
        pass "client killed with kill -9 mid-stream ($at_kill of 200 lines delivered)"
    else
        fail "the client finished before it could be killed mid-stream"
    fi
else
    fail "no delivery within 20 s: $(cat "$TMP/send1.log")"
    kill -9 "$CLIENT" 2>/dev/null
fi

# Acks are journaled without fsync: drop them, as a power cut could. `resume` must still prevent any duplicate.
grep -v '^{"a":' "$TMP/phone/journal.jsonl" >"$TMP/journal" && cat "$TMP/journal" >"$TMP/phone/journal.jsonl"
if timeout 120 $SB send --state "$TMP/phone" --timeout 60 <"$TMP/second-batch" 2>"$TMP/send2.log" \
    && grep -q 'resending' "$TMP/send2.log"; then
    pass "rerun (ack records lost): the journal was resent after resume and every chunk acknowledged"
else
    fail "rerun exited non-zero: $(cat "$TMP/send2.log")"
fi
wait_lines 220 10
sleep 0.3
if seq -f 'line %g' 1 220 | cmp -s - "$TMP/received"; then
    pass "the FIFO has lines 1..220 exactly once, in order"
else
    fail "the FIFO differs from lines 1..220: $(lines) lines; diff:"
    seq -f 'line %g' 1 220 | diff - "$TMP/received" | head -10 | sed 's/^/  /'
fi

# A client that knows the desktop but has the wrong per-pair psk gets no answer and writes nothing.
mkdir -p "$TMP/impostor"
cp "$TMP/phone/identity.key" "$TMP/impostor/"
"$PY" - "$TMP/phone/desktop.json" "$TMP/impostor/desktop.json" <<'PYEOF'
import json, secrets, sys
d = json.load(open(sys.argv[1]))
d["psk"] = secrets.token_hex(32)
json.dump(d, open(sys.argv[2], "w"))
PYEOF
before=$(lines)
echo "intruder" | timeout 30 $SB send --state "$TMP/impostor" --timeout 3 2>/dev/null
status=$?
sleep 0.3
if [ "$status" -eq 75 ] && [ "$(lines)" -eq "$before" ]; then
    pass "a wrong per-pair psk is refused (exit 75) and nothing is written"
else
    fail "wrong psk: exit $status, FIFO $before -> $(lines) lines"
fi

dups=$("$BIN" status --json --home "$TMP/desk" | json_field duplicatesDropped 2>/dev/null)
echo "  (daemon: ${dups:-?} duplicate chunks dropped)"

# 4. Spec conformance from the wire: refused upgrades, 1009, a bad session message 1, a client error, the end of
#    a pairing connection (Tests/python/conformance.py; each check names the PROTOCOL.md section it pins).
out=$("$PY" "$ROOT/Tests/python/conformance.py" "$BIN" "$TMP/desk" "$port" "$TMP/phone" "$TMP/received" 2>&1)
echo "$out" | grep -v '^conformance: ' | sed 's/^/  /'
counts=$(echo "$out" | sed -n 's/^conformance: \([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p')
if [ -n "$counts" ]; then
    set -- $counts
    PASSED=$((PASSED + $1))
    FAILED=$((FAILED + $2))
    echo "ok   conformance ran: $1 passed, $2 failed"
else
    fail "conformance did not run: $out"
fi

# 5. One `pip install` gives the `speakbridge-client` command; the Termux recipe of Examples/python-client/README.md
#    (`while termux-speech-to-text; do :; done | speakbridge-client send`) delivers every recognised line once, in
#    order, and skips the empty results of a cancelled recognition. The one stand-in: termux-speech-to-text itself
#    (Termux:API needs an Android phone's recogniser), a script on PATH that prints one line per call like the real
#    one without -p, and exits 1 when its list is used up (which ends the loop).
rm -rf "$BUILD/pkg-src"
mkdir -p "$BUILD/pkg-src"
(cd "$CLIENT_DIR" && tar --exclude=__pycache__ --exclude=build --exclude='*.egg-info' -cf - .) | tar -xf - -C "$BUILD/pkg-src"
if "$VENV/bin/pip" install -q --disable-pip-version-check "$BUILD/pkg-src" >"$BUILD/pip-package.log" 2>&1 \
    && [ -x "$VENV/bin/speakbridge-client" ]; then
    pass "pip install Examples/python-client: the speakbridge-client command is installed"
    mkdir -p "$TMP/termux-bin"
    cat >"$TMP/termux-bin/termux-speech-to-text" <<'STANDIN'
#!/bin/sh
# Stand-in for Termux:API's termux-speech-to-text: one recognised line per call (empty: nothing recognised).
n=$(cat "$STT_STATE" 2>/dev/null || echo 0)
n=$((n + 1))
[ "$n" -le "$(wc -l <"$STT_LINES")" ] || exit 1
echo "$n" >"$STT_STATE"
sed -n "${n}p" "$STT_LINES"
STANDIN
    chmod +x "$TMP/termux-bin/termux-speech-to-text"
    for i in $(seq 1 30); do
        case $((i % 7)) in
            0) echo "" ;;
            3) echo "Zeile $i: Grüße, \"quoted\" und ein Tab	hier" ;;
            *) echo "spoken line $i." ;;
        esac
    done >"$TMP/stt-lines"
    grep -v '^$' "$TMP/stt-lines" >"$TMP/stt-expected"
    export STT_LINES="$TMP/stt-lines" STT_STATE="$TMP/stt-state"
    code=$("$BIN" pair --json --home "$TMP/desk" | json_field code)
    if PATH="$VENV/bin:$PATH" SPEAKBRIDGE_CLIENT_STATE="$TMP/termux-state" \
        speakbridge-client join "$code" --name termux-phone 2>"$TMP/termux-join.log"; then
        pass "speakbridge-client join (state in \$SPEAKBRIDGE_CLIENT_STATE) pairs with the real daemon"
    else
        fail "speakbridge-client join: $(cat "$TMP/termux-join.log")"
    fi
    before=$(wc -c <"$TMP/received")
    if PATH="$TMP/termux-bin:$VENV/bin:$PATH" SPEAKBRIDGE_CLIENT_STATE="$TMP/termux-state" timeout 120 \
        sh -c 'while termux-speech-to-text; do :; done | speakbridge-client send --timeout 60' 2>"$TMP/termux-send.log"
    then
        sleep 0.3
        if tail -c +$((before + 1)) "$TMP/received" | cmp -s - "$TMP/stt-expected"; then
            pass "Termux recipe: $(wc -l <"$TMP/stt-expected") recognised lines on the FIFO once, in order; empty results skipped"
        else
            fail "Termux recipe: the FIFO got:"
            tail -c +$((before + 1)) "$TMP/received" | diff "$TMP/stt-expected" - | head -10 | sed 's/^/  /'
        fi
    else
        fail "Termux recipe: send exited non-zero: $(cat "$TMP/termux-send.log")"
    fi
else
    fail "pip install Examples/python-client failed, see $BUILD/pip-package.log"
fi
finish
