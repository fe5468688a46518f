#!/usr/bin/env bash
# Packaging tests: make install / uninstall / deb, as a user and a distribution would use them.
#
# Flow: release build (reused: the Makefile's release build dir) -> install into a fresh DESTDIR (binary runs, a
# man page per subcommand, completions that complete sinks and device names, the unit, the editor plugins) ->
# install into a real PREFIX and `systemd-analyze verify` the unit there (ExecStart must exist) -> uninstall
# leaves nothing (and keeps what was there before) -> make deb, inspect it, install it with dpkg into a fresh root,
# run the binary from there, verify its unit, remove it.
# Prints `N passed, M failed`; exits non-zero on a failure. Run from the repository root (make test does).
set -uo pipefail
cd "$(dirname "$0")/../.."
SCRATCH=${SCRATCH:-.build}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PASSED=0
FAILED=0
pass() { echo "ok   $1"; PASSED=$((PASSED + 1)); }
fail() { echo "FAIL $1"; FAILED=$((FAILED + 1)); }
check() { local name=$1; shift; if "$@" >"$TMP/out" 2>&1; then pass "$name"; else fail "$name: $(head -c 2000 "$TMP/out")"; fi; }
finish() { echo "$PASSED passed, $FAILED failed"; [ "$FAILED" -eq 0 ]; exit; }

start=$(date +%s)
if ! make --no-print-directory release generate-manual SCRATCH="$SCRATCH" >"$TMP/build.log" 2>&1; then
    fail "release build: $(tail -20 "$TMP/build.log")"
    finish
fi
echo "     release build and generate-manual: $(($(date +%s) - start)) s"
BIN="$SCRATCH/release/speakbridge"
version=$("$BIN" --version)
check "the release binary links no Foundation, CoreFoundation or ICU" bash Tests/packaging/no-foundation.sh "$BIN"
# A daemon that parses what the network sends: the executable is position-independent (ASLR), its relocated data
# and GOT read-only once the loader is done (full RELRO: GNU_RELRO + BIND_NOW, so no lazily bound GOT slot stays
# writable) and its stack not executable.
dyn=$(readelf -d "$BIN"); segs=$(readelf -lW "$BIN")
check "the release binary is PIE" grep -q 'FLAGS_1.*PIE' <<<"$dyn"
check "the release binary has full RELRO (GNU_RELRO and BIND_NOW)" \
    bash -c "grep -q GNU_RELRO <<<\"\$1\" && grep -qE '\(FLAGS\).*BIND_NOW|FLAGS_1.*NOW' <<<\"\$2\"" _ "$segs" "$dyn"
check "the release binary's stack is not executable" bash -c "grep GNU_STACK <<<\"\$1\" | grep -qv RWE" _ "$segs"

# ---- libraries opened on first use (dlopen), not linked ------------------------------------------------------------
# libsecret and avahi-client (and the ~20 libraries under them) and libqrencode are loaded only by what uses them
# (SharedLibrary in SpeakBridgeSupport). The release binary must not link them, and a missing one must be a clear error, never a crash.
needed=$(readelf -d "$BIN" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
echo "     NEEDED: $needed"
for lib in libsecret-1 libavahi-client libavahi-common libglib-2.0 libgio-2.0 libgobject-2.0 libqrencode; do
    check "the release binary does not link $lib" bash -c "! grep -q '$lib\\.so' <<<'$needed'"
done
# libstdc++ is linked statically (Makefile, RELEASE_FLAGS: a start no longer binds its ~4,300 symbols).
check "the release binary does not link libstdc++.so" bash -c "! grep -q 'libstdc++\\.so' <<<'$needed'"
# No RUNPATH/RPATH ($ORIGIN): libraries are never looked for beside the binary (a directory others may write to).
check "the release binary has no RUNPATH or RPATH" bash -c "! readelf -d '$BIN' | grep -qE '\\((RUNPATH|RPATH)\\)'"
mkdir -p "$TMP/beside" && cp "$BIN" "$TMP/beside/speakbridge" && : >"$TMP/beside/libsodium.so.23"
check "a libsodium.so.23 planted beside the binary is not loaded" \
    bash -c "'$TMP/beside/speakbridge' --version 2>&1 | grep -qx '$version'"
check "--version loads neither libsecret, avahi, glib nor qrencode" \
    bash -c "LD_DEBUG=files '$BIN' --version 2>'$TMP/ld-files' >/dev/null && grep -q 'file=libc.so.6' '$TMP/ld-files' &&
             ! grep -qE 'file=lib(secret|avahi|glib|gio|dbus|qrencode)' '$TMP/ld-files'"
# Each loader's soname is shipped by the Debian package it names (the one its error tells users to install).
for loader in Sources/SpeakBridgeKeyring/LibSecret.swift Sources/SpeakBridgeDiscovery/LibAvahi.swift \
              Sources/SpeakBridgeQR/LibQREncode.swift; do
    so=$(sed -n 's/.*static let soname = "\(.*\)"/\1/p' "$loader")
    pkg=$(sed -n 's/.*static let package = "\(.*\)"/\1/p' "$loader")
    check "$loader: $so is shipped by $pkg" bash -c "[ -n '$so' ] && dpkg -S '*/$so' | grep -q '^$pkg[:,]'"
done
# A library that is missing (here: hidden under an empty file in a private mount namespace; needs root).
# Call it in a subshell, `(hide …)`: it execs, so the subshell's PID becomes CMD's (a backgrounded daemon can then be
# stopped by `kill $!`; before, $! was a shell whose daemon outlived the test).
hide() {   # hide SONAME CMD...: CMD runs with SONAME's file unloadable
    local path
    path=$(ldconfig -p | awk -v so="$1" '$1 == so { print $NF; exit }')
    shift
    exec unshare -m bash -c 'mount --bind /dev/null "$0" && exec "$@"' "$path" "$@"
}
if unshare -m true 2>/dev/null; then
    H="$TMP/nolib"
    (hide libavahi-client.so.3 "$BIN" discover --timeout 0.2 --home "$H/a") >"$TMP/noavahi" 2>&1
    rc=$?
    check "discover without libavahi-client: exit 1, error and hint name libavahi-client3" bash -c \
        "[ $rc -eq 1 ] && grep -q '^speakbridge: error: mDNS is unavailable: cannot load libavahi-client.so.3' '$TMP/noavahi' &&
         grep -q '^speakbridge: hint: install the Debian package libavahi-client3' '$TMP/noavahi'"
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    (hide libavahi-client.so.3 "$BIN" serve --home "$H/d" --listen "127.0.0.1:$port" --sink stdout) >/dev/null \
        2>"$TMP/serve-noavahi" &
    serve_pid=$!
    for _ in $(seq 100); do "$BIN" status --home "$H/d" >/dev/null 2>&1 && break; sleep 0.05; done
    check "serve without libavahi-client runs (status answers)" "$BIN" status --home "$H/d"
    kill "$serve_pid"; wait "$serve_pid" 2>/dev/null
    check "the daemon started without libavahi-client stopped on SIGTERM (no process left behind)" \
        bash -c "! '$BIN' status --home '$H/d' >/dev/null 2>&1"
    check "serve without libavahi-client warns once, naming libavahi-client3" \
        bash -c "grep 'mDNS publishing failed: cannot load libavahi-client.so.3' '$TMP/serve-noavahi' | grep -q 'libavahi-client3'"
    (hide libsecret-1.so.0 env SPEAKBRIDGE_SECRETS=secret-service DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent \
        "$BIN" config list --home "$H/c") >"$TMP/nosecret" 2>&1
    rc=$?
    check "config with SPEAKBRIDGE_SECRETS=secret-service without libsecret: exit 1, hint names libsecret-1-0" bash -c \
        "[ $rc -eq 1 ] && grep -q '^speakbridge: error: no Secret Service: cannot load libsecret-1.so.0' '$TMP/nosecret' &&
         grep -q '^speakbridge: hint: install the Debian package libsecret-1-0' '$TMP/nosecret'"
    (hide libsecret-1.so.0 env DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent \
        "$BIN" config list --home "$H/c") >"$TMP/nosecret-auto" 2>&1
    rc=$?
    check "config without libsecret (auto): works with the file, warns naming libsecret-1-0" bash -c \
        "[ $rc -eq 0 ] && grep -q '^# secrets: file' '$TMP/nosecret-auto' && grep -q 'warning: .*libsecret-1-0' '$TMP/nosecret-auto'"
else
    echo "skip unshare -m is not permitted (not root): missing-library behaviour not checked"
fi

# ---- make install into a fresh DESTDIR -----------------------------------------------------------------------
DEST="$TMP/dest"
mkdir -p "$DEST"
check "make install DESTDIR=… PREFIX=/usr/local" \
    make --no-print-directory install SCRATCH="$SCRATCH" DESTDIR="$DEST" PREFIX=/usr/local
P="$DEST/usr/local"
check "installed binary prints the version ($version)" test "$("$P/bin/speakbridge" --version)" = "$version"

# One man page per command and subcommand, named as the manual plugin names them (speakbridge.devices.revoke.1).
"$BIN" --experimental-dump-help | python3 -c '
import json, sys
def walk(cmd, path):
    path = path + [cmd["commandName"]]
    print(".".join(path))
    for sub in cmd.get("subcommands", []):
        walk(sub, path)
walk(json.load(sys.stdin)["command"], [])' >"$TMP/commands"
missing=""
while IFS= read -r page; do [ -f "$P/share/man/man1/$page.1.gz" ] || missing="$missing $page"; done <"$TMP/commands"
check "a man page for each of the $(wc -l <"$TMP/commands") commands${missing:+ (missing:$missing)}" test -z "$missing"
if command -v man >/dev/null; then
    check "man renders speakbridge.serve(1) with its options" \
        bash -c "man -l '$P/share/man/man1/speakbridge.serve.1.gz' 2>&1 | grep -q -- '--sink'"
else
    echo "skip man is not installed (apt-get install man-db): man pages not rendered"
fi

for f in share/bash-completion/completions/speakbridge share/zsh/site-functions/_speakbridge \
         share/fish/vendor_completions.d/speakbridge.fish lib/systemd/user/speakbridge.service \
         share/vim/vimfiles/plugin/speakbridge.vim share/nvim/site/lua/speakbridge.lua \
         share/emacs/site-lisp/speakbridge.el; do
    check "installed $f" test -s "$P/$f"
done
check "the unit starts the installed binary" grep -qx 'ExecStart=/usr/local/bin/speakbridge serve --sink jsonl:%t/speakbridge/dictation.fifo' \
    "$P/lib/systemd/user/speakbridge.service"
check "the unit is Type=notify" grep -qx 'Type=notify' "$P/lib/systemd/user/speakbridge.service"

# Bash completion, as bash-completion runs it: sink values, then device names read from the home.
bash_complete() {   # bash_complete WORD... (the last word is the one being completed)
    bash -c '
        source "$1"; shift
        COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
        COMP_LINE="${COMP_WORDS[*]}"; COMP_POINT=${#COMP_LINE}
        _speakbridge "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
        printf "%s\n" "${COMPREPLY[@]}"' _ "$P/share/bash-completion/completions/speakbridge" "$@"
}
bash_complete "$P/bin/speakbridge" serve --sink "" >"$TMP/sinks" 2>&1
check "bash completes every sink value" bash -c "for s in stdout fifo: clipboard clipboard:primary type type:enter; do grep -qx \"\$s\" '$TMP/sinks' || exit 1; done"
bash_complete "$P/bin/speakbridge" serve --sink clip >"$TMP/sinks-clip" 2>&1
check "bash completes sink values by prefix" test "$(sort "$TMP/sinks-clip" | tr '\n' ' ')" = "clipboard clipboard:primary "

# A home with two paired devices (one named by a hostile peer: an escape sequence must never reach the shell).
HOME_DIR="$TMP/home"
mkdir -p -m 0700 "$HOME_DIR" "$HOME_DIR/state" "$HOME_DIR/config" "$HOME_DIR/run"
python3 - "$HOME_DIR/state/peers.json" <<'EOF'
import json, os, sys
peers = [{"name": name, "role": "client", "publicKey": os.urandom(32).hex(), "psk": os.urandom(32).hex(),
          "pairedAt": 1700000000} for name in ["office laptop", "vm", "evil\u001b[31mred"]]
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
os.write(fd, json.dumps({"version": 1, "peers": peers}).encode() + b"\n")
EOF
"$P/bin/speakbridge" devices --home "$HOME_DIR" >"$TMP/devices" 2>&1
first_id=$(awk 'NR == 1 { print $1 }' "$TMP/devices")
bash_complete "$P/bin/speakbridge" devices revoke --home "$HOME_DIR" "" >"$TMP/names" 2>&1
check "bash completes device names and IDs for devices revoke" \
    bash -c "grep -qx 'office laptop' '$TMP/names' && grep -qx vm '$TMP/names' && grep -qx -- '$first_id' '$TMP/names'"
check "a peer's name with an escape sequence is not offered" bash -c "! grep -q \$'\\e' '$TMP/names'"
bash_complete "$P/bin/speakbridge" devices revoke --home "$HOME_DIR" o >"$TMP/names-o" 2>&1
check "device completion filters by the typed prefix" test "$(cat "$TMP/names-o")" = "office laptop"
if command -v zsh >/dev/null; then
    check "zsh completion script parses" zsh -n "$P/share/zsh/site-functions/_speakbridge"
else
    echo "skip zsh is not installed: zsh completion script not parsed"
fi
if command -v fish >/dev/null; then
    check "fish completion script parses" fish --no-execute "$P/share/fish/vendor_completions.d/speakbridge.fish"
else
    echo "skip fish is not installed: fish completion script not parsed"
fi

# ---- uninstall: nothing left; what was there before stays ------------------------------------------------------
check "make uninstall" make --no-print-directory uninstall DESTDIR="$DEST" PREFIX=/usr/local
check "DESTDIR is empty again" test -z "$(find "$DEST" -mindepth 1 -print -quit)"

mkdir -p "$DEST/usr/local/share/man/man1" && echo keep >"$DEST/usr/local/share/man/man1/other.1"
make --no-print-directory install SCRATCH="$SCRATCH" DESTDIR="$DEST" PREFIX=/usr/local >/dev/null 2>&1
make --no-print-directory install SCRATCH="$SCRATCH" DESTDIR="$DEST" PREFIX=/usr/local >/dev/null 2>&1   # twice
make --no-print-directory uninstall DESTDIR="$DEST" PREFIX=/usr/local >/dev/null 2>&1
check "reinstall + uninstall keeps only the file that was there before" \
    test "$(cd "$DEST" && find . -mindepth 1 | sort | tr '\n' ' ')" = \
         "./usr ./usr/local ./usr/local/share ./usr/local/share/man ./usr/local/share/man/man1 ./usr/local/share/man/man1/other.1 "

# ---- a real PREFIX (no DESTDIR): the unit verifies, since its ExecStart exists ---------------------------------
PREFIX_DIR="$TMP/prefix"
check "make install PREFIX=$PREFIX_DIR" make --no-print-directory install SCRATCH="$SCRATCH" PREFIX="$PREFIX_DIR"
verify() {   # systemd-analyze verify, as the user manager loads it; any message is a failure
    mkdir -p -m 0700 "$TMP/xdg"
    XDG_RUNTIME_DIR="$TMP/xdg" systemd-analyze --user verify "$1" >"$TMP/verify" 2>&1 && [ ! -s "$TMP/verify" ] ||
        { cat "$TMP/verify"; return 1; }
}
if command -v systemd-analyze >/dev/null; then
    check "systemd-analyze --user verify (installed unit)" verify "$PREFIX_DIR/lib/systemd/user/speakbridge.service"
else
    echo "skip systemd-analyze is not installed (apt-get install systemd): unit not verified"
fi
check "make uninstall PREFIX=$PREFIX_DIR removes the prefix it created" \
    bash -c "make --no-print-directory uninstall PREFIX='$PREFIX_DIR' >/dev/null && test ! -e '$PREFIX_DIR'"

# ---- make deb ---------------------------------------------------------------------------------------------------
rm -f "$SCRATCH"/deb/*.deb
check "make deb" make --no-print-directory deb SCRATCH="$SCRATCH" DEB_COMPRESS=gzip
DEB=$(ls "$SCRATCH"/deb/speakbridge_"$version"_*.deb 2>/dev/null | head -1)
if [ -z "$DEB" ]; then fail "no .deb built"; finish; fi
dpkg-deb -I "$DEB" >"$TMP/info"
depends=$(dpkg-deb -f "$DEB" Depends)
for lib in libsodium23 libwebsockets17 libqrencode4 libavahi-client3 libsecret-1-0 libc6; do
    check "Depends names $lib" grep -q "\\b$lib\\b" <<<"$depends"
done
# The libraries opened with dlopen (LibSecret, LibAvahi): dpkg-shlibdeps cannot see them, so deb.sh names them.
check "Depends names the dlopened libraries with minimum versions" \
    bash -c "grep -q 'libavahi-client3 (>= 0.6.16)' <<<'$depends' && grep -q 'libsecret-1-0 (>= 0.19.1)' <<<'$depends' &&
             grep -q 'libqrencode4 (>= 3.2.0)' <<<'$depends'"
check "a binary with packed relocations (DT_RELR) depends on libc6 (>= 2.36)" bash -c \
    "! readelf -V '$BIN' | grep -q GLIBC_ABI_DT_RELR || grep -q 'libc6 (>= 2.36)' <<<'$depends'"
check "Depends names only installed Debian packages" bash -c \
    "for p in \$(tr ',' '\n' <<<'$depends' | sed 's/(.*//'); do dpkg -s \"\$p\" >/dev/null 2>&1 || { echo \"\$p\"; exit 1; }; done"
check "Recommends the sink tools" bash -c "dpkg-deb -f '$DEB' Recommends | grep -q xclip && dpkg-deb -f '$DEB' Recommends | grep -q wtype"
check "Version is speakbridge --version" test "$(dpkg-deb -f "$DEB" Version)" = "$version"
dpkg-deb -c "$DEB" >"$TMP/contents"
for f in ./usr/bin/speakbridge ./usr/lib/systemd/user/speakbridge.service ./usr/share/man/man1/speakbridge.serve.1.gz \
         ./usr/share/zsh/vendor-completions/_speakbridge ./usr/share/bash-completion/completions/speakbridge; do
    check "package contains $f" grep -q " $f\$" "$TMP/contents"
done
check "package files are owned by root" bash -c "! awk '{ print \$2 }' '$TMP/contents' | grep -qv '^root/root\$'"

# Installed with dpkg into a fresh root (its libraries come from this system: --force-depends).
ROOT="$TMP/root"
mkdir -p "$ROOT/var/lib/dpkg/info" "$ROOT/var/lib/dpkg/updates" && touch "$ROOT/var/lib/dpkg/status"
check "dpkg --root installs the package" dpkg --root="$ROOT" --force-depends --force-not-root -i "$DEB"
check "the packaged binary runs (--version)" test "$("$ROOT/usr/bin/speakbridge" --version)" = "$version"
check "the packaged unit starts /usr/bin/speakbridge" \
    grep -q '^ExecStart=/usr/bin/speakbridge serve' "$ROOT/usr/lib/systemd/user/speakbridge.service"
if command -v systemd-analyze >/dev/null; then
    # verify has no working --root here: the same unit, its ExecStart pointed at the file the package installed.
    sed "s|^ExecStart=/usr/bin/|ExecStart=$ROOT/usr/bin/|" "$ROOT/usr/lib/systemd/user/speakbridge.service" \
        >"$TMP/speakbridge.service"
    check "systemd-analyze --user verify (packaged unit)" verify "$TMP/speakbridge.service"
fi
check "dpkg --root removes the package" dpkg --root="$ROOT" --force-not-root -r speakbridge
check "nothing of the package is left in the root" test -z "$(find "$ROOT/usr" -type f -print -quit 2>/dev/null)"

echo "     total: $(($(date +%s) - start)) s"
finish
