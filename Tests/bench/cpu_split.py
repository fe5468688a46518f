#!/usr/bin/env python3
"""CPU per PACED line split into user and system time, for each tool of bench.py (socat, ssh, speakbridge).

usage: python3 Tests/bench/cpu_split.py BIN LINES socat,ssh,speakbridge
       (PERF_DIR=DIR also records `perf record -e cpu-clock -g` of both sides into DIR/<tool>-<side>.data;
        PACE=SECONDS paces the lines otherwise than 2 ms apart, e.g. 0.1 for a human pace;
        THREADS=1 also prints each thread's CPU a line, by its name)

Per tool: the sender is started, warmed with one line, then LINES lines are written 2 ms apart (bench.py's
measure_latency); schedstat gives the exact CPU time (bench.CpuMeter), /proc/<pid>/task/*/stat the user/system split
(clock ticks, so use a few thousand lines). Used to find that a paced line's cost on this VM is user-space work per
wake-up, not syscalls (README → Experiments). Noisy like every wall/CPU figure here: compare in alternating pairs.
"""
import os, shutil, signal, statistics, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402


def ticks(pids):
    user = system = 0
    for pid in pids:
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                user += int(fields[11])
                system += int(fields[12])
            except (OSError, IndexError, ValueError):
                pass
    return user, system


def main():
    binary, n, which = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
    perf_dir = os.environ.get("PERF_DIR")
    base = tempfile.mkdtemp(prefix="cpu-split-")
    tools = []
    pace = float(os.environ.get("PACE", "0.002"))
    hz = os.sysconf("SC_CLK_TCK")
    per_line = lambda t: t * 1e6 / hz / n  # noqa: E731
    try:
        bench.add_tools(tools, base, binary, which)
        for t in tools:
            reader = bench.FifoLines(t.fifo)
            sender = t.start_sender()
            sender.stdin.write(b"warm\n")
            sender.stdin.flush()
            reader.read_line()
            time.sleep(0.5)
            desk, send = t.desktop_pids(), t.sender_pids(sender)
            perfs = []
            if perf_dir:
                for side, pids in (("desk", desk), ("send", send)):
                    out = os.path.join(perf_dir, f"{t.name}-{side}.data")
                    perfs.append(subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", "10000", "-g", "-o",
                                                   out, "-p", ",".join(map(str, pids))], stderr=subprocess.DEVNULL))
                time.sleep(0.5)
            d0, s0 = ticks(desk), ticks(send)
            dm, sm = bench.CpuMeter(desk), bench.CpuMeter(send)
            a0, b0 = dm.total(), sm.total()
            before = {**dm.seen, **sm.seen}
            lat = bench.measure_latency(sender.stdin, reader, n, pace, warm=0, meters=(dm, sm))
            a1, b1 = dm.total(), sm.total()
            d1, s1 = ticks(desk), ticks(send)
            for p in perfs:
                p.send_signal(signal.SIGINT)
                p.wait()
            print(f"{t.name}: p50 {statistics.median(lat):.0f} µs; desktop {(a1 - a0) / 1e3 / n:.0f} µs a line "
                  f"(user {per_line(d1[0] - d0[0]):.0f}, system {per_line(d1[1] - d0[1]):.0f}); sender "
                  f"{(b1 - b0) / 1e3 / n:.0f} µs (user {per_line(s1[0] - s0[0]):.0f}, system {per_line(s1[1] - s0[1]):.0f})",
                  flush=True)
            if os.environ.get("THREADS"):
                for meter, side in ((dm, "desktop"), (sm, "sender")):
                    for path, ns in sorted(meter.seen.items()):
                        used = (ns - before.get(path, 0)) / 1e3 / n
                        if used >= 0.05:
                            name = bench.thread_name(path) or "(exited)"
                            print(f"  {side} thread {name} ({path.split('/')[4]}): {used:.1f} µs a line", flush=True)
            sender.stdin.close()
            sender.wait(timeout=30)
            reader.close()
    finally:
        for t in tools:
            t.close()
        shutil.rmtree(base, ignore_errors=True)   # the homes and FIFOs of the three tools
    return 0


if __name__ == "__main__":
    sys.exit(main())
