#!/usr/bin/env python3
"""Where a streaming `send`'s first line goes, over many traced start-ups (not part of `make bench`).

Usage: python3 Tests/bench/startup_trace.py BIN [--starts 15]

A traced daemon (SPEAKBRIDGE_TRACE) and a paired phone (bench.SpeakBridge); each start writes the bench's `spawn`
mark, spawns a traced `send`, writes "first line", reads it from the FIFO and lets `send` end. Prints
stages.startup_table (medians and minimums per stage).
"""
import argparse, os, sys, tempfile, time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import bench, stages  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("--starts", type=int, default=15)
    args = ap.parse_args()
    base = tempfile.mkdtemp(prefix="sb-st-")
    path = os.path.join(base, "trace.txt")
    t = bench.SpeakBridge(base, args.bin)
    env = {"SPEAKBRIDGE_TRACE": path}
    try:
        bench.stop(t.desktop)
        t.start_daemon(env)
        for i in range(args.starts + 1):
            reader = bench.FifoLines(t.fifo)
            if i > 0:  # the first start warms the daemon and the page cache
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
    finally:
        t.close()
    print(stages.startup_table(stages.load(path)))


if __name__ == "__main__":
    main()
