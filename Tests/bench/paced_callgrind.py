"""Instructions per PACED line (callgrind), desktop and/or sender.
usage: SB_BIN=/path/to/speakbridge CG_OUT=/tmp/mydir CG_DESK=1 CG_SEND=1 python3 Tests/bench/paced_callgrind.py 500
Then: callgrind_annotate --inclusive=yes --threshold=100 $CG_OUT/cg-desk.<pid>.1 | less
The '.1' dump covers only the N paced lines (2 ms apart) after a 200-line warm-up; divide PROGRAM TOTALS by N."""
import sys, os, time, tempfile, subprocess, glob
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench
N = int(sys.argv[1])
here = os.path.dirname(os.path.abspath(__file__))
base = tempfile.mkdtemp(prefix="cgp-")
t = bench.SpeakBridge(base, os.path.join(here, "callgrind-wrap.sh"))
try:
    reader = bench.FifoLines(t.fifo)
    sender = t.start_sender()
    sender.stdin.write(b"warm\n"); sender.stdin.flush(); reader.read_line()
    bench.measure_latency(sender.stdin, reader, 200, 0.002, warm=0)
    time.sleep(1)
    pids = [p for p in bench.descendants(t.desktop.pid)] + bench.descendants(sender.pid)
    for p in set(pids):
        subprocess.run(["callgrind_control", "-z", str(p)], capture_output=True)
    time.sleep(0.5)
    bench.measure_latency(sender.stdin, reader, N, 0.002, warm=0)
    time.sleep(0.3)
    for p in set(pids):
        subprocess.run(["callgrind_control", "-d", "paced", str(p)], capture_output=True)
    sender.stdin.close(); sender.wait(timeout=60); reader.close()
finally:
    t.close()
out = os.environ.get("CG_OUT", "/tmp")
for f in sorted(glob.glob(os.path.join(out, "cg-*.1"))):
    if os.path.getmtime(f) < time.time() - 60: continue
    tot = subprocess.run(["callgrind_annotate", f], capture_output=True, text=True).stdout
    for line in tot.splitlines():
        if "PROGRAM TOTALS" in line:
            n = int(line.split()[0].replace(",", ""))
            print(f"{os.path.basename(f)}: {n:,} instructions, {n / N:,.0f} per paced line")
