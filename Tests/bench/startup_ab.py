#!/usr/bin/env python3
"""Paired A/B start-up runs of two speakbridge binaries (not part of `make bench`).

Usage: python3 Tests/bench/startup_ab.py OLD_BIN NEW_BIN [--pairs 15] [--oneshots 1]

Each binary gets its own daemon (its own code on both sides) and its own paired phone (bench.SpeakBridge). Per
pair, in alternating order (old first on even pairs, new first on odd ones): the first line of a streaming `send`
(spawn -> "first line" read from the FIFO, as bench.py's Tool.round measures it), then one-shot `send --text`
walls, then one one-shot under `perf stat` (page faults, task-clock, instructions of the process, user space and
kernel). Prints medians and how many pairs the new binary lowered each figure in.
"""
import argparse, os, shutil, statistics, subprocess, sys, tempfile, time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import bench  # noqa: E402


def first_line_ms(t):
    reader = bench.FifoLines(t.fifo)
    t0 = time.perf_counter()
    sender = t.start_sender()
    sender.stdin.write(b"first line\n")
    sender.stdin.flush()
    if reader.read_line() != b"first line":
        raise RuntimeError("wrong first line")
    ms = (time.perf_counter() - t0) * 1e3
    sender.stdin.close()
    sender.wait(timeout=30)
    reader.close()
    return ms


def perf_oneshot(t, base):
    out = os.path.join(base, "perf.txt")
    reader = bench.FifoLines(t.fifo)
    subprocess.run(["perf", "stat", "-x,", "-o", out, "-e", "page-faults,task-clock,instructions",
                    t.bin, "send", "--home", t.phone, "--text", "one shot"], check=True, stderr=subprocess.DEVNULL)
    reader.read_line()
    reader.close()
    r = {}
    for line in open(out):
        parts = line.strip().split(",")
        if len(parts) > 2 and parts[0] and parts[0][0].isdigit():
            r[parts[2].split(":")[0]] = float(parts[0])
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--pairs", type=int, default=15)
    ap.add_argument("--oneshots", type=int, default=1)
    args = ap.parse_args()
    base = tempfile.mkdtemp(prefix="sb-ab-")
    tools = {k: bench.SpeakBridge(os.path.join(base, k), b) for k, b in (("old", args.old), ("new", args.new))}
    for t in tools.values():
        os.makedirs(os.path.dirname(t.fifo), exist_ok=True)
    res = {k: {"first": [], "oneshot": [], "page-faults": [], "task-clock": [], "instructions": []} for k in tools}
    try:
        for k, t in tools.items():  # warm both (page cache, daemon's first connection)
            first_line_ms(t)
            t.oneshot()
        for i in range(args.pairs):
            order = ["old", "new"] if i % 2 == 0 else ["new", "old"]
            for k in order:
                t = tools[k]
                res[k]["first"].append(first_line_ms(t))
                res[k]["oneshot"].append(statistics.median(t.oneshot() for _ in range(args.oneshots)))
                p = perf_oneshot(t, base)
                for name in ("page-faults", "task-clock", "instructions"):
                    if name in p:
                        res[k][name].append(p[name])
    finally:
        for t in tools.values():
            t.close()
        shutil.rmtree(base, ignore_errors=True)   # both homes and FIFOs, the perf output
    for name in ("first", "oneshot", "page-faults", "task-clock", "instructions"):
        a, b = res["old"][name], res["new"][name]
        if not a or not b:
            continue
        lower = sum(1 for x, y in zip(a, b) if y < x)
        print(f"{name:13s} old {statistics.median(a):14,.3f}  new {statistics.median(b):14,.3f}  "
              f"new lower in {lower} of {len(a)} pairs")


if __name__ == "__main__":
    main()
