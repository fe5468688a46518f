"""Where a PACED line's CPU goes, kernel included (perf record, cpu-clock samples of the desktop and the sender).
usage: SB_BIN=/path/to/speakbridge python3 Tests/bench/paced_perf.py [LINES] [PACE_MS]   (as root: kernel symbols)
Runs a daemon and a streaming `send` (as bench.py does), warms up with 200 lines, then samples both processes at
20 kHz over LINES paced lines (default 3,000 at 2 ms) and prints, for each side, the share of samples per
top-level kernel entry (syscall or interrupt) and user space, and the top symbols. Not part of `make bench`: an
investigation tool beside paced_callgrind.py (which counts user-space instructions only)."""
import os, sys, time, tempfile, subprocess, collections
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench

LINES = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
PACE = (float(sys.argv[2]) if len(sys.argv) > 2 else 2.0) / 1000


def profile(pid, out, seconds):
    return subprocess.Popen(["perf", "record", "-q", "-F", "20000", "-e", "cpu-clock", "-g", "-p", str(pid),
                             "-o", out, "--", "sleep", str(seconds)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def report(path, label, lines):
    script = subprocess.run(["perf", "script", "-i", path, "-F", "comm,tid,ip,sym"], capture_output=True, text=True).stdout
    samples, entries, leaves = 0, collections.Counter(), collections.Counter()
    threads = collections.Counter()
    for block in script.split("\n\n"):
        rows = [r for r in block.splitlines() if r.strip()]
        if not rows:
            continue
        samples += 1
        threads[rows[0].split()[0]] += 1
        frames = [r.split(None, 1)[1] if len(r.split(None, 1)) > 1 else "?" for r in rows[1:]]
        leaves[frames[0] if frames else "?"] += 1
        # The outermost kernel frame under the syscall entry names what the thread was doing in the kernel.
        kernel = [f for f in frames if "[kernel" in f or f.startswith("__x64_sys") or "entry_SYSCALL" in f]
        entry = "user space"
        for f in frames:
            name = f.split()[0] if f.split() else f
            if name.startswith("__x64_sys_") or name.startswith("__do_sys_"):
                entry = name.replace("__x64_sys_", "").replace("__do_sys_", "")
            elif entry == "user space" and name in ("asm_sysvec_apic_timer_interrupt", "asm_common_interrupt",
                                                     "asm_sysvec_call_function_single", "asm_sysvec_reschedule_ipi"):
                entry = name
        if entry == "user space" and frames and "[unknown]" not in frames[0] and kernel:
            entry = "kernel, other"
        entries[entry] += 1
    print(f"== {label}: {samples} samples at 20 kHz ({samples * 50 / lines:.1f} µs a line)")
    for name, n in threads.most_common(6):
        print(f"   thread {name:20s} {100 * n / samples:5.1f} %")
    for name, n in entries.most_common(14):
        print(f"   {name:40s} {100 * n / samples:5.1f} %  ({n * 50 / lines:5.1f} µs a line)")
    print("   top leaf symbols:")
    for name, n in leaves.most_common(18):
        print(f"     {100 * n / samples:5.1f} %  {name[:90]}")


def main():
    binary = os.environ["SB_BIN"]
    base = tempfile.mkdtemp(prefix="perf-")
    t = bench.SpeakBridge(base, binary)
    try:
        reader = bench.FifoLines(t.fifo)
        sender = t.start_sender()
        sender.stdin.write(b"warm\n"); sender.stdin.flush(); reader.read_line()
        bench.measure_latency(sender.stdin, reader, 200, PACE, warm=0)
        seconds = LINES * (PACE + 0.0003) + 1
        desk = profile(t.desktop.pid, os.path.join(base, "desk.data"), seconds)
        send = profile(sender.pid, os.path.join(base, "send.data"), seconds)
        time.sleep(0.5)
        bench.measure_latency(sender.stdin, reader, LINES, PACE, warm=0)
        desk.wait(); send.wait()
        sender.stdin.close(); sender.wait(timeout=60); reader.close()
    finally:
        t.close()
    report(os.path.join(base, "desk.data"), "desktop (serve)", LINES)
    report(os.path.join(base, "send.data"), "sender (send)", LINES)
    print(f"(perf data in {base})")


main()
