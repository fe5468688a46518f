#!/usr/bin/env python3
"""socat, ssh and speakbridge measured interleaved in blocks (the same noise for all): latency, CPU per line, burst.

usage: python3 Tests/bench/tail_interleaved.py BIN [BLOCKS] [BURST]
       (default 5 blocks of 300 lines per tool, 2 ms pace, and a 50,000-line burst per tool and block; BURST=0: none)

bench.py measures each tool's 1,500 paced lines and its burst in one stretch per round, so a noisy few seconds of this
VM can land on one tool's stretch only; its p99, CPU per line or burst then say more about the moment than about the
tool. Here the three streaming senders stay up side by side and take turns, BLOCKS times: 300 paced lines each (CPU
of both sides metered over them, as bench.py does), then a burst each, each burst followed by half a second for the
acks and the desktop's fsync to settle before the next tool runs. Each tool's percentiles (p50 … p99.5, max, lines
over 1 ms) are over all its blocks; CPU per line and burst are medians of its blocks. The goals' ratios follow:
latency p50 to socat's, p99 to ssh's, CPU per line on each side and burst to ssh's; the desktop's CPU also without
its group-commit thread (the durability fsync, which socat and ssh do not make). `make bench` runs it after
bench.py (Tests/bench/run.sh); a tool that is not installed is left out, and so is a ratio that needs it. Loopback
only; stops what it started.
"""
import os, shutil, statistics, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

PER_BLOCK = 300


class Live:
    """One tool's streaming sender, its FIFO reader and what its blocks measured."""

    def __init__(self, tool, reader, sender):
        self.tool, self.reader, self.sender = tool, reader, sender
        self.latency, self.desktop_cpu, self.sender_cpu, self.bursts = [], [], [], []
        self.commit_cpu = []  # the desktop's group-commit thread (speakbridge only), included in desktop_cpu

    def paced_block(self):
        desktop, sender = bench.CpuMeter(self.tool.desktop_pids()), bench.CpuMeter(self.tool.sender_pids(self.sender))
        d0, s0 = desktop.total(), sender.total()
        name = self.tool.commit_thread
        c0 = desktop.named(name) if name else 0
        self.latency += bench.measure_latency(self.sender.stdin, self.reader, PER_BLOCK, 0.002, warm=0,
                                              meters=(desktop, sender))
        self.desktop_cpu.append((desktop.total() - d0) / 1e3 / PER_BLOCK)
        self.sender_cpu.append((sender.total() - s0) / 1e3 / PER_BLOCK)
        if name:
            self.commit_cpu.append((desktop.named(name) - c0) / 1e3 / PER_BLOCK)

    def burst(self, payload, lines):
        self.bursts.append(lines / bench.burst(self.sender, self.reader, payload))
        time.sleep(0.5)


def ratio(ours, theirs, goal):
    return f"{ours / theirs:.2f} × ({goal})" if theirs > 0 else "–"


def main():
    binary = sys.argv[1]
    blocks = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    lines = int(sys.argv[3]) if len(sys.argv) > 3 else 50_000
    payload = bench.burst_payload(lines) if lines > 0 else b""
    base = tempfile.mkdtemp(prefix="tail-")
    tools = []
    live = []
    try:
        bench.add_tools(tools, base, binary)
        for t in tools:
            reader = bench.FifoLines(t.fifo)
            sender, _ = t.first_line(reader)
            live.append(Live(t, reader, sender))
            bench.measure_latency(sender.stdin, reader, 100, 0.002, warm=0)  # warm-up, not counted
        for _ in range(blocks):
            for one in live:
                one.paced_block()
            if lines > 0:
                for one in live:
                    one.burst(payload, lines)
        print(f"taking turns ({blocks} blocks of {PER_BLOCK} paced lines per tool"
              + (f", then a {lines:,}-line burst each" if lines > 0 else "") + ", interleaved):")
        at = {}
        for one in live:
            lat = one.latency
            figures = {p: bench.percentile(lat, p) for p in (50, 90, 95, 98, 99, 99.5)}
            figures["desktop"] = statistics.median(one.desktop_cpu)
            figures["sender"] = statistics.median(one.sender_cpu)
            figures["burst"] = statistics.median(one.bursts) if one.bursts else 0
            figures["desktop_no_commit"] = statistics.median(d - c for d, c in zip(one.desktop_cpu, one.commit_cpu)) \
                if one.commit_cpu else figures["desktop"]
            at[one.tool.name] = figures
            print(f"{one.tool.name:12s} " + " ".join(f"p{p:g} {figures[p]:6.0f}" for p in (50, 90, 95, 98, 99, 99.5))
                  + f" max {max(lat):7.0f} µs; over 1 ms: {sum(1 for x in lat if x > 1000)} of {len(lat)}", flush=True)
            commit = (f" (of it {statistics.median(one.commit_cpu):.0f} µs on its group-commit thread)"
                      if one.commit_cpu else "")
            print(f"{'':12s} CPU per paced line, medians of the blocks: desktop {figures['desktop']:.0f} µs{commit}, "
                  f"sender {figures['sender']:.0f} µs"
                  + (f"; burst {figures['burst']:,.0f} lines/s (blocks: "
                     + ", ".join(f"{b / 1000:,.0f}k" for b in one.bursts) + ")" if one.bursts else ""), flush=True)
        sb = at["speakbridge"]
        if "socat" in at:
            print(f"speakbridge: p50 {ratio(sb[50], at['socat'][50], 'goal ≤ 1.2')} socat's")
        if "ssh" in at:
            ssh = at["ssh"]
            print(f"speakbridge: p99 {ratio(sb[99], ssh[99], 'goal ≤ 1')} ssh's; CPU per line desktop "
                  f"{ratio(sb['desktop'], ssh['desktop'], 'goal ≤ 1')}, sender "
                  f"{ratio(sb['sender'], ssh['sender'], 'goal ≤ 1')} ssh's"
                  + f" (the desktop without its group-commit thread {ratio(sb['desktop_no_commit'], ssh['desktop'], 'no goal')})"
                  + (f"; burst {ratio(sb['burst'], ssh['burst'], 'goal ≥ 1')} ssh's" if lines > 0 else ""))
    finally:
        for one in live:
            bench.end_sender(one.sender, one.reader, 30)
        for t in tools:
            t.close()
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
