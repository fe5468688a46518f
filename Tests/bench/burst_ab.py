#!/usr/bin/env python3
"""Paired burst runs of two (or more) speakbridge binaries (not part of `make bench`).

usage: python3 Tests/bench/burst_ab.py BIN1,BIN2[,...] [BURSTS] [LINES] [PAIRS]   (defaults 5, 50,000, 4)

Per pair, each binary in turn gets a daemon and a paired streaming `send` (bench.SpeakBridge), 100 paced lines to
warm up, then BURSTS bursts of LINES lines (bench.burst, as bench.py's burst), each after 0.3 s of quiet, with the CPU
of the daemon, of `send` and of this script (the FIFO reader and the feeder) metered over the burst. Prints per binary
the median lines/s and every burst's figures. A burst is CPU-bound on this VM's two cores, so what one side saves
shows up in the other's throughput; the VM moves ±20 % between bursts, so compare medians of alternating pairs.
"""
import os, resource, shutil, statistics, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402


def own_cpu_ms():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return (usage.ru_utime + usage.ru_stime) * 1e3


def run_binary(binary, bursts, payload, lines):
    base = tempfile.mkdtemp(prefix="burst-ab-")
    t = bench.SpeakBridge(base, binary)
    rates, cpu = [], []
    try:
        reader = bench.FifoLines(t.fifo)
        sender = t.start_sender()
        sender.stdin.write(b"warm\n")
        sender.stdin.flush()
        reader.read_line()
        bench.measure_latency(sender.stdin, reader, 100, 0.002, warm=0)
        for _ in range(bursts):
            time.sleep(0.3)
            desktop, send = bench.CpuMeter(t.desktop_pids()), bench.CpuMeter(t.sender_pids(sender))
            d0, s0, p0 = desktop.total(), send.total(), own_cpu_ms()
            seconds = bench.burst(sender, reader, payload)
            rates.append(lines / seconds)
            cpu.append(((desktop.total() - d0) / 1e6, (send.total() - s0) / 1e6, own_cpu_ms() - p0, seconds * 1e3))
        bench.end_sender(sender, reader, 60)
    finally:
        t.close()
        shutil.rmtree(base, ignore_errors=True)
    return rates, cpu


def main():
    binaries = sys.argv[1].split(",")
    bursts = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    lines = int(sys.argv[3]) if len(sys.argv) > 3 else 50_000
    pairs = int(sys.argv[4]) if len(sys.argv) > 4 else 4
    payload = bench.burst_payload(lines)
    rates = {b: [] for b in binaries}
    cpu = {b: [] for b in binaries}
    for _ in range(pairs):
        for b in binaries:
            r, c = run_binary(b, bursts, payload, lines)
            rates[b] += r
            cpu[b] += c
    for b in binaries:
        print(f"{b}: median {statistics.median(rates[b]):,.0f} lines/s; bursts: "
              + " ".join(f"{x / 1000:,.0f}k" for x in rates[b]))
        print("   CPU ms daemon / send / this script, and wall ms, per burst: "
              + " ".join(f"{d:.0f}/{s:.0f}/{p:.0f}/{w:.0f}" for d, s, p, w in cpu[b]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
