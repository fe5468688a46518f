#!/usr/bin/env bash
# Smoke tests of the copyable examples: the Python scripts compile (and the whisper-stream filter keeps only final
# text), the editor plugins load (their behaviour is tested for real by Tests/editors/), the systemd unit verifies.
# A tool that is not installed (nvim, emacs, systemd-analyze) skips its part with one line.
# Closing line: "N passed, M failed, K skipped"; exit 1 on any failure.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
EX=$ROOT/Examples
PASSED=0
FAILED=0
SKIPPED=0
pass() { echo "ok   $1"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL $1"; FAILED=$((FAILED + 1)); }
skip() { echo "skip $1"; SKIPPED=$((SKIPPED + 1)); }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/sb-smoke.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# Python: every script compiles (into a scratch folder: no __pycache__ in the tree).
for f in "$EX"/sources/*.py "$EX"/python-client/sbclient.py "$EX"/python-client/speakbridge_client/*.py; do
    if python3 -c 'import py_compile, sys; py_compile.compile(sys.argv[1], cfile=sys.argv[2], doraise=True)' \
        "$f" "$TMP/compiled.pyc" 2>"$TMP/err"; then
        pass "python compiles: ${f#$ROOT/}"
    else
        fail "python compiles: ${f#$ROOT/}: $(cat "$TMP/err")"
    fi
done
printf '\033[2K\r### Transcription 0 START | t0 = 0 ms\n[00:00:00.000 --> 00:00:04.000]  Hello there.\n[BLANK_AUDIO]\n\033[2K\r Partial\033[2K\r Final text.\n' \
    | python3 "$EX/sources/whisper_stream_filter.py" >"$TMP/filtered"
if printf 'Hello there.\nFinal text.\n' | cmp -s - "$TMP/filtered"; then
    pass "whisper_stream_filter.py keeps only final text"
else
    fail "whisper_stream_filter.py printed: $(cat -A "$TMP/filtered")"
fi

# Vim: the plugin loads and defines its commands (what it inserts, where, is tested for real by Tests/editors/).
if command -v vim >/dev/null 2>&1 && vim --version | grep -q '+job'; then
    if timeout 30 vim -Nu NONE -i NONE -Es -c "source $EX/editors/vim/plugin/speakbridge.vim" \
        -c 'if exists(":SpeakBridgeStart") != 2 | cquit | endif' -c 'qa!' >/dev/null 2>&1; then
        pass "vim plugin loads and defines :SpeakBridgeStart"
    else
        fail "vim plugin does not load"
    fi
else
    skip "vim with +job is not installed: Vim plugin not checked"
fi

# Neovim: the Lua module loads and defines its commands.
if command -v nvim >/dev/null 2>&1; then
    if nvim --headless -u NONE -i NONE --cmd "set rtp+=$EX/editors/nvim" \
        -c 'lua require("speakbridge").setup({})' \
        -c 'if exists(":SpeakBridgeStart") != 2 | cquit | endif' -c 'qa!' >/dev/null 2>&1; then
        pass "neovim plugin loads and defines :SpeakBridgeStart"
    else
        fail "neovim plugin does not load"
    fi
elif command -v luac >/dev/null 2>&1; then
    luac -p "$EX/editors/nvim/lua/speakbridge.lua" && pass "neovim plugin: Lua syntax (luac -p)" \
        || fail "neovim plugin: Lua syntax"
else
    skip "nvim is not installed: Neovim plugin not checked"
fi

# Emacs: the snippet loads and defines its commands.
if command -v emacs >/dev/null 2>&1; then
    if emacs --batch -Q -l "$EX/editors/emacs/speakbridge.el" \
        --eval '(unless (and (commandp (quote speakbridge-start)) (commandp (quote speakbridge-stop))) (kill-emacs 1))' \
        >/dev/null 2>&1; then
        pass "emacs snippet loads"
    else
        fail "emacs snippet does not load"
    fi
else
    skip "emacs is not installed: Emacs snippet not checked"
fi

# systemd: the unit verifies (ExecStart pointed at an existing binary: the real one may not be installed).
if command -v systemd-analyze >/dev/null 2>&1; then
    sed 's|^ExecStart=[^ ]*|ExecStart=/bin/true|' "$EX/systemd/speakbridge.service" >"$TMP/speakbridge.service"
    if systemd-analyze verify "$TMP/speakbridge.service" >"$TMP/verify" 2>&1 && ! grep -qi 'unknown\|invalid' "$TMP/verify"; then
        pass "systemd unit verifies"
    else
        fail "systemd unit: $(cat "$TMP/verify")"
    fi
else
    skip "systemd-analyze is not installed: systemd unit not checked"
fi

echo "$PASSED passed, $FAILED failed, $SKIPPED skipped"
[ "$FAILED" -eq 0 ]
