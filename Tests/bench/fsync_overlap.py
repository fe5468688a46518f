"""Do the desktop's group-commit fsyncs make the slow lines? (A question of this VM, where an fdatasync's flush holds
its vCPU for 0.2-0.9 ms: a line whose threads wake on that CPU meanwhile waits.)
usage: SB_BIN=/path/to/speakbridge python3 Tests/bench/fsync_overlap.py [LINES] [PACE_MS]
Runs a traced daemon and streaming `send` (SPEAKBRIDGE_TRACE, as bench.py's traced run), LINES paced lines (default
3,000 at 2 ms), then joins each line's `read` (stdin read) and `sink` (FIFO write returned) marks with the desktop's
fsync intervals (`commit` → `fsync` marks) and prints: the share of time an fsync was under way, the share of lines
that overlapped one, the latency p50/p99 of lines that did and did not, and how many of the slowest 1 % and 5 %
overlapped one; then, stage by stage (stages.py's), the median of all lines beside that of the slowest 1 %: where the
tail's time goes. Not part of `make bench`."""
import os, sys, time, tempfile
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench, stages

LINES = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
PACE = (float(sys.argv[2]) if len(sys.argv) > 2 else 2.0) / 1000


def pct(values, p):
    return bench.percentile(values, p) if values else float("nan")


def main():
    base = tempfile.mkdtemp(prefix="fsyncov-")
    trace = os.path.join(base, "trace.txt")
    t = bench.SpeakBridge(base, os.environ["SB_BIN"])
    try:
        bench.stop(t.desktop)
        t.start_daemon({"SPEAKBRIDGE_TRACE": trace})
        reader = bench.FifoLines(t.fifo)
        sender = t.start_sender({"SPEAKBRIDGE_TRACE": trace})
        sender.stdin.write(b"warm\n"); sender.stdin.flush(); reader.read_line()
        bench.measure_latency(sender.stdin, reader, LINES, PACE, warm=0)
        sender.stdin.close(); sender.wait(timeout=60); reader.close()
    finally:
        t.close()
    marks = stages.load(trace)
    starts = [x[0] for x in marks.get("commit", [])]
    ends = [x[0] for x in marks.get("fsync", [])]
    if not starts:
        sys.exit("no `commit` marks: a binary from before the mark was added")
    intervals = []
    for s in starts:  # each commit's end: the first fsync mark at or after it
        e = next((x for x in ends if x >= s), None)
        if e is not None:
            intervals.append((s, e))
    journal = {seq: ns for ns, seq in marks.get("journal", [])}
    sink = {seq: ns for ns, seq in marks.get("sink", [])}
    reads = marks.get("read", [])
    lines = []
    for seq, jns in journal.items():
        if seq not in sink:
            continue
        r = stages.last_before(reads, jns) or jns
        lines.append((r, sink[seq]))
    lines.sort()
    span = lines[-1][1] - lines[0][0]
    busy = sum(e - s for s, e in intervals if s >= lines[0][0] and e <= lines[-1][1])
    overlapping, clear = [], []
    for r, k in lines:
        hit = any(s < k and e > r for s, e in intervals)
        (overlapping if hit else clear).append((k - r) / 1000)
    everything = sorted(overlapping + clear)
    p99, p95 = pct(everything, 99), pct(everything, 95)
    slow1 = sum(1 for v in overlapping if v >= p99), sum(1 for v in everything if v >= p99)
    slow5 = sum(1 for v in overlapping if v >= p95), sum(1 for v in everything if v >= p95)
    durations = sorted((e - s) / 1000 for s, e in intervals)
    print(f"{len(lines)} traced lines, {len(intervals)} fsyncs (median {pct(durations, 50):.0f} µs, p99 "
          f"{pct(durations, 99):.0f} µs); an fsync under way {100 * busy / span:.1f} % of the time")
    print(f"lines overlapping an fsync: {len(overlapping)} ({100 * len(overlapping) / len(lines):.1f} %): "
          f"stdin read → FIFO p50 {pct(overlapping, 50):.0f} µs, p99 {pct(overlapping, 99):.0f} µs")
    print(f"lines clear of fsyncs: {len(clear)}: p50 {pct(clear, 50):.0f} µs, p99 {pct(clear, 99):.0f} µs")
    print(f"slowest 1 % (≥ {p99:.0f} µs): {slow1[0]} of {slow1[1]} overlapped an fsync; "
          f"slowest 5 % (≥ {p95:.0f} µs): {slow5[0]} of {slow5[1]}")
    rows = stages.lines(marks)
    if rows:
        total = [(r["sink"] - r["read"]) / 1e3 for r in rows]
        cut = pct(total, 99)
        tail = [r for r, v in zip(rows, total) if v >= cut]
        print(f"stage by stage, µs: median of all {len(rows)} lines | median of the slowest {len(tail)} (≥ {cut:.0f} µs)")
        for label, a, b in stages.STEPS[:6]:
            every = [(r[b] - r[a]) / 1e3 for r in rows]
            slow = [(r[b] - r[a]) / 1e3 for r in tail]
            print(f"  {label:45s} {pct(every, 50):8.1f} | {pct(slow, 50):8.1f}")


main()
