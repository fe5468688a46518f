"""Instructions per line (callgrind) over a window of lines, desktop and/or sender: shared by paced_callgrind.py and
burst_callgrind.py. A daemon and a streaming `send` run under callgrind-wrap.sh (CG_DESK=1 / CG_SEND=1); after a
200-line paced warm-up every process's counters are zeroed, `workload(sender, reader)` runs, and a dump named
`label` (the '.1' file) covers only it. Prints each dump's total and its share per line."""
import os, time, tempfile, subprocess, glob, shutil
import bench


def run(n, label, workload):
    here = os.path.dirname(os.path.abspath(__file__))
    base = tempfile.mkdtemp(prefix="cg-")
    t = bench.SpeakBridge(base, os.path.join(here, "callgrind-wrap.sh"))
    started = time.time()
    try:
        reader = bench.FifoLines(t.fifo)
        sender = t.start_sender()
        sender.stdin.write(b"warm\n"); sender.stdin.flush(); reader.read_line()
        bench.measure_latency(sender.stdin, reader, 200, 0.002, warm=0)
        time.sleep(1)
        pids = set(bench.descendants(t.desktop.pid) + bench.descendants(sender.pid))
        for p in pids:
            subprocess.run(["callgrind_control", "-z", str(p)], capture_output=True)
        time.sleep(0.5)
        workload(sender, reader)
        time.sleep(0.3)
        for p in pids:
            subprocess.run(["callgrind_control", "-d", label, str(p)], capture_output=True)
        sender.stdin.close(); sender.wait(timeout=120); reader.close()
    finally:
        t.close()
        shutil.rmtree(base, ignore_errors=True)   # the homes and the FIFO; the dumps are in CG_OUT
    out = os.environ.get("CG_OUT", "/tmp")
    for f in sorted(glob.glob(os.path.join(out, "cg-*.1"))):
        if os.path.getmtime(f) < started:
            continue
        tot = subprocess.run(["callgrind_annotate", f], capture_output=True, text=True).stdout
        for line in tot.splitlines():
            if "PROGRAM TOTALS" in line:
                total = int(line.split()[0].replace(",", ""))
                print(f"{os.path.basename(f)}: {total:,} instructions, {total / n:,.0f} per {label} line")
