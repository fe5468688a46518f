#!/usr/bin/env python3
"""The latency distribution of socat, ssh and speakbridge measured interleaved in blocks (the same noise for all).

usage: python3 Tests/bench/tail_interleaved.py BIN [BLOCKS]      (default 5 blocks of 300 lines per tool, 2 ms pace)

bench.py measures each tool's 1,500 paced lines in one stretch per round, so a noisy few seconds of this VM can land
on one tool's stretch only; its p99 then says more about the moment than about the tool. Here the three streaming
senders stay up side by side and take turns, 300 lines each, BLOCKS times; each tool's percentiles (p50 … p99.5,
max, lines over 1 ms) are over all its blocks, and the latency goals' two ratios follow. `make bench` runs it after
bench.py (Tests/bench/run.sh); a tool that is not installed is left out, and so is a ratio that needs it. Loopback
only; stops what it started.
"""
import os, shutil, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

PER_BLOCK = 300


def main():
    binary = sys.argv[1]
    blocks = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    base = tempfile.mkdtemp(prefix="tail-")
    tools = []
    live = []
    try:
        bench.add_tools(tools, base, binary)
        for t in tools:
            reader = bench.FifoLines(t.fifo)
            sender, _ = t.first_line(reader)
            live.append((t, reader, sender, []))
            bench.measure_latency(sender.stdin, reader, 100, 0.002, warm=0)  # warm-up, not counted
        for _ in range(blocks):
            for t, reader, sender, lat in live:
                lat += bench.measure_latency(sender.stdin, reader, PER_BLOCK, 0.002, warm=0)
        print(f"latency taking turns ({blocks} blocks of {PER_BLOCK} paced lines per tool, interleaved):")
        at = {}
        for t, _, _, lat in live:
            at[t.name] = {p: bench.percentile(lat, p) for p in (50, 90, 95, 98, 99, 99.5)}
            print(f"{t.name:12s} " + " ".join(f"p{p:g} {v:6.0f}" for p, v in at[t.name].items())
                  + f" max {max(lat):7.0f} µs; over 1 ms: {sum(1 for x in lat if x > 1000)} of {len(lat)}", flush=True)
        sb = at["speakbridge"]
        if "socat" in at:
            print(f"speakbridge: p50 {sb[50] / at['socat'][50]:.2f} × socat's (goal ≤ 1.2)")
        if "ssh" in at:
            print(f"speakbridge: p99 {sb[99] / at['ssh'][99]:.2f} × ssh's (goal ≤ 1)")
    finally:
        for _, reader, sender, _ in live:
            bench.end_sender(sender, reader, 30)
        for t in tools:
            t.close()
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
