#!/usr/bin/env bash
# Regenerates packaging/speakbridge.order: the linkage names of the functions a paced line runs (the daemon's, then
# those only `send` runs), then the rest of what `speakbridge serve` runs, then the rest of what only `send` runs,
# which `make release` passes to lld (--symbol-ordering-file) so that this code sits together at the front of the
# text segment in that order. Why the per-line functions first: after a 2 ms sleep code is cold on this VM and its
# pages cost more than its lines (a C probe: 1,000 calls cost 13 µs packed on 16 pages, 41 µs spread over 140);
# sorted among the whole daemon's code, a paced line ran our code on 113 pages, now on 46 (desktop) and 57 (send).
# That did not measurably lower CPU per line (20 pairs, README -> Experiments, thirteenth session); it costs
# nothing and start-up got a little cheaper. Why the rest clustered: the kernel maps 64 KiB around each
# page fault in a file mapping (fault-around), so code scattered over the 11 MB text keeps most of it resident;
# clustered, the daemon's code spans few 64 KiB windows. A `send` starts faster with its own code clustered after
# it: fewer page faults, and after the page cache let the binary go, fewer distinct places read from disk.
#
# Flow: release build (BIN, default .build/release/speakbridge, built by the caller: `make release`) -> a daemon
# with a fifo sink on loopback started under `valgrind --tool=callgrind` -> `pair --json` + `join` a phone home ->
# a `send` (under callgrind too) connects, 400 lines paced 10 ms (the last 300 counted on their own: the per-line
# set), 1,000 lines, a 20,000-line burst, 1 s idle, status -> a one-shot `send --text` under callgrind -> SIGTERM
# -> every function callgrind saw executed in the binary itself (not in libc and the other shared libraries) in
# either of two such runs, by its mangled name, each group sorted (a stable order: the sets are what matter for
# fault-around and TLB reach, and sorting keeps diffs readable).
#
# Needs valgrind (apt-get install valgrind), objcopy (binutils) and python3; `make release` does not: it only reads
# the committed file, and stale names (code that changed since) are ignored by lld (--no-warn-symbol-ordering).
# Regenerate when the daemon's code changed a lot: `make release && bash packaging/order-symbols.sh`, then relink
# (SwiftPM does not know the file is an input): `rm .build/release/speakbridge && make release`.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.build/release/speakbridge}
OUT=${OUT:-packaging/speakbridge.order}
command -v valgrind >/dev/null || { echo "order-symbols: valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
[ -x "$BIN" ] || { echo "order-symbols: no binary at $BIN (run make release first)" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# valgrind 3.19 cannot read the DWARF 5 the toolchain writes ("Possibly corrupted debuginfo file"): callgrind runs a
# copy without the debug sections (the function names are in the symbol table).
objcopy --strip-debug "$BIN" "$TMP/speakbridge"

# Two runs, their union: which rare paths run (a retry, an accept loop's last turn) depends on timing.
for run in 1 2; do
mkdir "$TMP/run$run"
python3 - "$TMP/speakbridge" "$TMP/run$run" <<'EOF'
import json, os, signal, socket, subprocess, sys, time
binary, tmp = os.path.abspath(sys.argv[1]), sys.argv[2]
desk, phone, fifo = (os.path.join(tmp, n) for n in ("desk", "phone", "sb.fifo"))
os.mkfifo(fifo, 0o600)
keep = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)   # the FIFO always has a reader
def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
daemon = subprocess.Popen(["valgrind", "--tool=callgrind", "--demangle=no", "--dump-instr=no",
                           f"--callgrind-out-file={tmp}/callgrind.out", binary, "serve", "--home", desk,
                           "--listen", f"127.0.0.1:{free_port()}", "--web-port", str(free_port()), "--no-mdns",
                           "--sink", "fifo:" + fifo], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(1200):
    if subprocess.run([binary, "status", "--json", "--home", desk], capture_output=True).returncode == 0:
        break
    time.sleep(0.05)
else:
    sys.exit("order-symbols: the daemon did not start")
code = json.loads(subprocess.run([binary, "pair", "--json", "--home", desk], capture_output=True, text=True,
                                 check=True).stdout)["code"]
subprocess.run([binary, "join", code, "--name", "order", "--home", phone], check=True, capture_output=True)
sender = subprocess.Popen(["valgrind", "--tool=callgrind", "--demangle=no", "--dump-instr=no",
                           f"--callgrind-out-file={tmp}/send.callgrind", binary, "send", "--home", phone],
                          stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
got, before = b"", 0   # drain(n): until n lines arrived after the first `before`
def drain(n, timeout=120.0):
    global got
    n += before
    end = time.time() + timeout
    while got.count(b"\n") < n and time.time() < end:
        try:
            got += os.read(keep, 1 << 16)
        except BlockingIOError:
            time.sleep(0.01)
    if got.count(b"\n") < n:
        sys.exit("order-symbols: %d of %d lines arrived" % (got.count(b"\n") - before, n - before))
sender.stdin.write(b"first line\n"); sender.stdin.flush()
drain(1)
# The per-line path alone: lines paced 10 ms apart (each its own frame, as at a human pace), counted on their own
# (dumped as callgrind.out.2 and send.callgrind.2, after a dump of everything before) so that they can go first.
def paced(start, count):
    for i in range(start, start + count):
        sender.stdin.write(f"paced {i} with some dictated words in it\n".encode()); sender.stdin.flush()
        drain(i + 2)
        time.sleep(0.01)
WARM, COUNTED = 100, 300
paced(0, WARM)
for pid in (daemon.pid, sender.pid):
    subprocess.run(["callgrind_control", "-d", "start", str(pid)], check=True, capture_output=True)   # .1; zeroes
paced(WARM, COUNTED)
for pid in (daemon.pid, sender.pid):
    subprocess.run(["callgrind_control", "-d", "paced", str(pid)], check=True, capture_output=True)
before = WARM + COUNTED
for i in range(1000):
    sender.stdin.write(f"line {i} with some dictated words in it\n".encode()); sender.stdin.flush()
    if i % 50 == 49:
        drain(i + 2)
drain(1001)
# A burst too: its code (batched frames, the inline write's fallback, the heap trim when it falls quiet) is what an
# idle daemon keeps resident after one, so it belongs in the cluster.
sender.stdin.write(b"".join(f"burst {i} with some dictated words in it\n".encode() for i in range(20000)))
sender.stdin.flush()
drain(21001, timeout=600.0)
time.sleep(1.0)
subprocess.run([binary, "status", "--home", desk], capture_output=True)
sender.stdin.close(); sender.wait(timeout=120)
subprocess.run(["valgrind", "--tool=callgrind", "--demangle=no", "--dump-instr=no",
                f"--callgrind-out-file={tmp}/oneshot.callgrind", binary, "send", "--home", phone, "--text", "one shot",
                "--timeout", "60"], check=True, capture_output=True)
drain(21002)
daemon.send_signal(signal.SIGTERM); daemon.wait(timeout=60)
EOF
done

# callgrind.out: "ob=(N) path" sets the object of the following "fn=(M) name" lines (names are given once, then
# referred to by number). Keep functions of the binary itself; drop unnamed code (0x...).
bin_real=$(readlink -f "$TMP/speakbridge")
# The functions lld can move one by one: those of the objects SwiftPM compiled (ours and the packages', with
# -function-sections, one section each). The static Swift runtime, standard library and libdispatch come as
# archives whose objects hold many functions in one .text: naming one of them moves its whole section (hundreds of
# KiB), so among the per-line functions such a name pushed the rest of the set far apart (the 23rd session's file:
# the daemon's first 164 functions on 0x270-0x287, then a stdlib section, the sender's per-line functions 2.6 MB
# later). They go after the movable ones of their group.
{ find "$(dirname "$(readlink -f "$BIN")")" -path '*.build/*.o' -print0 | xargs -0 -r nm --defined-only --format=posix 2>/dev/null \
    || true; } | awk '$2 ~ /^[tTwW]$/ { print $1 }' | sort -u >"$TMP/movable"
[ -s "$TMP/movable" ] || { echo "order-symbols: no object files beside $BIN (a SwiftPM build directory is needed)" >&2; exit 1; }
python3 - "$TMP" "$bin_real" "$TMP/movable" >"$TMP/order" <<'EOF'
import glob, os, re, sys
tmp, binary = sys.argv[1], sys.argv[2]
movable = set(open(sys.argv[3]).read().split())
def functions(paths):
  names = set()
  for path in paths:
    objs, fns, ob = {}, {}, None
    for line in open(path, errors="replace"):
        m = re.match(r"^(c?ob|c?fn|c?fi|c?fe|fl)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
        if not m:
            continue
        kind, num, name = m.groups()
        table = objs if kind.endswith("ob") else fns if kind.endswith("fn") else None
        if table is None:
            continue
        if name is not None:
            table[num] = name
        if kind == "ob":
            ob = objs.get(num)
        elif kind == "fn" and ob is not None and os.path.realpath(ob) == binary:
            fn = fns.get(num)
            fn = re.sub(r"'\d+$", "", fn or "")   # recursion levels: name'2
            if fn and not fn.startswith("0x") and " " not in fn:   # (below main): callgrind's own
                names.add(fn)
  return names
daemon = functions(glob.glob(os.path.join(tmp, "run*", "callgrind.out*")))
send = functions(glob.glob(os.path.join(tmp, "run*", "*.callgrind*")))
hot_daemon = functions(glob.glob(os.path.join(tmp, "run*", "callgrind.out.2")))
hot_send = functions(glob.glob(os.path.join(tmp, "run*", "send.callgrind.2")))
def movable_first(names):
    names = sorted(names)
    return [n for n in names if n in movable] + [n for n in names if n not in movable]
hot_both = sorted(hot_daemon) + sorted(hot_send - hot_daemon)
hot = [n for n in hot_both if n in movable] + [n for n in hot_both if n not in movable]
print(f"order-symbols: {len(hot)} functions run by a paced line go first "
      f"({sum(n in movable for n in hot)} of them movable one by one)", file=sys.stderr)
for n in hot + movable_first(daemon - set(hot)) + movable_first(send - daemon - set(hot)):
    print(n)
EOF
[ -s "$TMP/order" ] || { echo "order-symbols: no function of $BIN was recorded" >&2; exit 1; }
{
    echo "# Functions a paced line runs (the daemon's, then the client's), then the rest of what \`speakbridge serve\` runs (start-up,"
    echo "# pairing, a client sending 1,000 lines and a 20,000-line burst, idle), then the rest of what \`send\` ran (that client, and a"
    echo "# one-shot \`send --text\`): lld puts them first in the text segment, in this order (--symbol-ordering-file). In each"
    echo "# group the functions lld can move one by one come first, then those of the static runtime's archives (whole sections)."
    echo "# Generated by packaging/order-symbols.sh; do not edit."
    cat "$TMP/order"
} >"$OUT"
echo "order-symbols: $(wc -l <"$TMP/order") functions -> $OUT"
