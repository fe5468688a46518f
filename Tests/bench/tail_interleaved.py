#!/usr/bin/env python3
"""The latency distribution of socat, ssh and speakbridge measured interleaved in blocks (the same noise for all).

usage: python3 Tests/bench/tail_interleaved.py BIN [BLOCKS]      (default 5 blocks of 300 lines per tool, 2 ms pace)

bench.py measures each tool's 1,500 paced lines in one stretch per round, so a noisy few seconds of this VM can land
on one tool's stretch only; its p99 then says more about the moment than about the tool. Here the three streaming
senders stay up side by side and take turns, 300 lines each, BLOCKS times; each tool's percentiles (p50 … p99.5,
max, lines over 1 ms) are over all its blocks. Investigation only, not part of `make bench` (README → Experiments).
Loopback only; stops what it started.
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
        tools = [bench.Socat(base), bench.SSH(base), bench.SpeakBridge(base, binary)]
        for t in tools:
            reader = bench.FifoLines(t.fifo)
            sender, _ = t.first_line(reader)
            live.append((t, reader, sender, []))
            bench.measure_latency(sender.stdin, reader, 100, 0.002, warm=0)  # warm-up, not counted
        for _ in range(blocks):
            for t, reader, sender, lat in live:
                lat += bench.measure_latency(sender.stdin, reader, PER_BLOCK, 0.002, warm=0)
        for t, reader, sender, lat in live:
            lat.sort()
            q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]  # noqa: E731
            print(f"{t.name:12s} p50 {q(.5):6.0f} p90 {q(.9):6.0f} p95 {q(.95):6.0f} p98 {q(.98):6.0f} "
                  f"p99 {q(.99):6.0f} p99.5 {q(.995):6.0f} max {lat[-1]:7.0f} µs; over 1 ms: "
                  f"{sum(1 for x in lat if x > 1000)} of {len(lat)}", flush=True)
    finally:
        for _, reader, sender, _ in live:
            bench.end_sender(sender, reader, 30)
        for t in tools:
            t.close()
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
