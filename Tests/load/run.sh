#!/usr/bin/env bash
# make load: 100 paired devices × 10,000 lines against one release daemon (Tests/load/load.py says how).
# The ack probe uses the independent Python client's virtualenv (.build-python/venv, made by Tests/python/run.sh);
# without it the load test still runs and says the probe was skipped.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
BIN=${BIN:-$root/.build/release/speakbridge}
VENV=${SPEAKBRIDGE_PYTHON_BUILD:-$root/.build-python}/venv
PY_ARGS=()
if [ ! -x "$VENV/bin/python" ]; then
    mkdir -p "$(dirname "$VENV")"
    python3 -m venv "$VENV" >/dev/null 2>&1 || true
fi
if [ -x "$VENV/bin/pip" ] && "$VENV/bin/pip" install -q --disable-pip-version-check \
        -r "$root/Examples/python-client/requirements.txt" >/dev/null 2>&1; then
    PY_ARGS=(--python "$VENV/bin/python")
else
    echo "load: the Python client's packages cannot be installed (no network?): ack probe skipped" >&2
fi
# Many processes and pipes: 100 `send`s, each with a journal.
ulimit -n 4096 2>/dev/null || true
exec python3 "$here/load.py" --bin "$BIN" "${PY_ARGS[@]}" "$@"
