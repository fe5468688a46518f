#!/usr/bin/env python3
"""Where a streaming `send`'s first line goes, over many traced start-ups (not part of `make bench`).

Usage: python3 Tests/bench/startup_trace.py BIN [BIN2 ...] [--starts 15]

Per binary a traced daemon (SPEAKBRIDGE_TRACE, its own trace file) and a paired phone (bench.SpeakBridge); the
binaries' starts alternate. Each start writes the bench's `spawn` mark, spawns a traced `send`, writes "first line",
reads it from the FIFO and lets `send` end. Prints one stages.startup_table per binary (medians and minimums per
stage), or with several binaries one table of medians side by side, with `main → sink` (everything after the
process reaches `main`: the part that spawn noise does not blur).
"""
import argparse, os, shutil, statistics, sys, tempfile, time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import bench, stages  # noqa: E402


def start(t, path, env, mark):
    reader = bench.FifoLines(t.fifo)
    if mark:
        with open(path, "a") as f:
            f.write(f"spawn {time.clock_gettime_ns(time.CLOCK_MONOTONIC)} 0\n")
    sender = t.start_sender(env)
    sender.stdin.write(b"first line\n")
    sender.stdin.flush()
    reader.read_line()
    sender.stdin.close()
    sender.wait(timeout=30)
    reader.close()
    time.sleep(0.05)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bins", nargs="+")
    ap.add_argument("--starts", type=int, default=15)
    ap.add_argument("--idle", type=float, default=0.0,
                    help="seconds of idle before each start (cold start: this VM's DAMON pages out idle page cache)")
    args = ap.parse_args()
    runs = []
    try:
        for i, b in enumerate(args.bins):
            base = tempfile.mkdtemp(prefix=f"sb-st{i}-")
            path = os.path.join(base, "trace.txt")
            t = bench.SpeakBridge(base, b)
            env = {"SPEAKBRIDGE_TRACE": path}
            bench.stop(t.desktop)
            t.start_daemon(env)
            start(t, path, env, False)  # warms the daemon and the page cache
            runs.append((b, t, path, env))
        for _ in range(args.starts):
            for _, t, path, env in runs:
                time.sleep(args.idle)
                start(t, path, env, True)
    finally:
        for _, t, _, _ in runs:
            t.close()
    traces = [stages.load(path) for _, _, path, _ in runs]
    for _, _, path, _ in runs:
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)   # each binary's homes, FIFO and trace
    if len(runs) == 1:
        print(stages.startup_table(traces[0]))
        return
    rows = [stages.startup_rows(trace) for trace in traces]
    print(f"{args.starts} alternating traced start-ups each; median µs (complete rows: {[len(r) for r in rows]})")
    print("| stage | " + " | ".join(os.path.basename(b) for b, _, _, _ in runs) + " |")
    print("| --- |" + " --- |" * len(runs))
    names = stages.STARTUP
    for a, b in list(zip(names, names[1:])) + [("main", "sink"), ("spawn", "sink")]:
        cells = []
        for r in rows:
            d = [(x[b] - x[a]) / 1e3 for x in r]
            cells.append(f"{statistics.median(d):.0f}" if d else "-")
        label = {("spawn", "sink"): "total", ("main", "sink"): "main → sink (our own start-up and the handshake)"}.get(
            (a, b), f"{a} → {b}")
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
