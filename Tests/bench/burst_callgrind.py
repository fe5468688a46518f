"""Instructions per BURST line (callgrind), desktop and/or sender.
usage: SB_BIN=/path/to/speakbridge CG_OUT=/tmp/mydir CG_SEND=1 python3 Tests/bench/burst_callgrind.py 5000
Then: callgrind_annotate --inclusive=yes --threshold=100 $CG_OUT/cg-send.<pid>.1 | less
The '.1' dump covers only the N burst lines (written at once, as bench.py's burst) after a 200-line paced warm-up,
up to the last one on the FIFO plus 0.3 s (the acks that follow); divide PROGRAM TOTALS by N."""
import sys, os, time, tempfile, subprocess, glob
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench
N = int(sys.argv[1])
here = os.path.dirname(os.path.abspath(__file__))
base = tempfile.mkdtemp(prefix="cgb-")
t = bench.SpeakBridge(base, os.path.join(here, "callgrind-wrap.sh"))
started = time.time()
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
    payload = b"".join(f"burst line {i} with some dictated words in it\n".encode() for i in range(N))
    sender.stdin.write(payload); sender.stdin.flush()
    reader.count_lines(N)
    time.sleep(0.3)
    for p in set(pids):
        subprocess.run(["callgrind_control", "-d", "burst", str(p)], capture_output=True)
    sender.stdin.close(); sender.wait(timeout=120); reader.close()
finally:
    t.close()
out = os.environ.get("CG_OUT", "/tmp")
for f in sorted(glob.glob(os.path.join(out, "cg-*.1"))):
    if os.path.getmtime(f) < started: continue
    tot = subprocess.run(["callgrind_annotate", f], capture_output=True, text=True).stdout
    for line in tot.splitlines():
        if "PROGRAM TOTALS" in line:
            n = int(line.split()[0].replace(",", ""))
            print(f"{os.path.basename(f)}: {n:,} instructions, {n / N:,.0f} per burst line")
