#!/usr/bin/env python3
"""SpeakBridge benchmark. Every figure comes from one run on this machine; socat is measured in the same run.

latency: one line at a time written into the capture side's stdin, timed until it appears on the desktop's FIFO.
  - speakbridge: `speakbridge send` (stdin) -> WebSocket + Noise -> `speakbridge serve --sink fifo:`
  - floor:       `socat -u STDIN TCP:127.0.0.1:P` -> `socat -u TCP-LISTEN:P OPEN:fifo`
burst: N lines written as fast as possible into `send`; time until the last is on the FIFO (durability on: journal
  on the client, progress log fsynced before every ack on the desktop).
idle: the daemon's CPU time over 10 s with a paired device and no traffic, and its RSS.
"""
import argparse, os, select, shutil, signal, socket, statistics, subprocess, sys, tempfile, time, json

def percentile(values, p):
    v = sorted(values)
    k = max(0, min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1)))))
    return v[k]

class FifoLines:
    def __init__(self, path):
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self.buf = b""
    def read_line(self, timeout=10.0):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no line on the FIFO")
            r, _, _ = select.select([self.fd], [], [], left)
            if r:
                try:
                    data = os.read(self.fd, 1 << 20)
                except BlockingIOError:
                    continue
                if not data:
                    time.sleep(0.001)
                self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return line
    def count_lines(self, n, timeout=120.0):
        seen = self.buf.count(b"\n")
        deadline = time.monotonic() + timeout
        while seen < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"only {seen} of {n} lines")
            r, _, _ = select.select([self.fd], [], [], left)
            if r:
                try:
                    data = os.read(self.fd, 1 << 20)
                except BlockingIOError:
                    continue
                seen += data.count(b"\n")
        self.buf = b""
        return seen

def measure_latency(writer, reader, count, pace):
    samples = []
    for i in range(count + 50):
        line = f"latency probe {i}\n".encode()
        t0 = time.perf_counter()
        writer.write(line); writer.flush()
        got = reader.read_line()
        t1 = time.perf_counter()
        if got != line[:-1]:
            raise RuntimeError(f"out of order: {got!r} vs {line!r}")
        if i >= 50:
            samples.append((t1 - t0) * 1e6)
        time.sleep(pace)
    return samples

def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])

def rollup_kib(pid, field):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0

def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--pace", type=float, default=0.002)
    ap.add_argument("--burst", type=int, default=50000)
    ap.add_argument("--idle", type=float, default=10.0)
    args = ap.parse_args()
    base = tempfile.mkdtemp(prefix="sb-bench-")
    desk, phone = os.path.join(base, "desk"), os.path.join(base, "phone")
    fifo = os.path.join(base, "out")
    procs = []
    try:
        daemon = subprocess.Popen([args.bin, "serve", "--home", desk, "--listen", "127.0.0.1:0", "--no-mdns",
                                   "--sink", "fifo:" + fifo], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(daemon)
        for _ in range(200):
            st = subprocess.run([args.bin, "status", "--json", "--home", desk], capture_output=True, text=True)
            if st.returncode == 0:
                break
            time.sleep(0.05)
        code = json.loads(subprocess.run([args.bin, "pair", "--json", "--home", desk], capture_output=True,
                                         text=True, check=True).stdout)["code"]
        subprocess.run([args.bin, "join", code, "--name", "bench", "--home", phone], check=True,
                       capture_output=True)
        reader = FifoLines(fifo)
        results = {}

        # Idle first: paired, connected sender waiting on stdin, no traffic.
        sender = subprocess.Popen([args.bin, "send", "--home", phone], stdin=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL)
        procs.append(sender)
        sender.stdin.write(b"warm up\n"); sender.stdin.flush()
        reader.read_line()
        time.sleep(1.0)
        t0 = cpu_ticks(daemon.pid)
        time.sleep(args.idle)
        t1 = cpu_ticks(daemon.pid)
        hz = os.sysconf("SC_CLK_TCK")
        results["idle_cpu_percent"] = 100.0 * (t1 - t0) / hz / args.idle
        results["idle_rss_mib"] = rss_kib(daemon.pid) / 1024.0
        results["idle_pss_mib"] = rollup_kib(daemon.pid, "Pss") / 1024.0
        results["idle_anon_mib"] = rollup_kib(daemon.pid, "Anonymous") / 1024.0

        lat = measure_latency(sender.stdin, reader, args.count, args.pace)
        results["speakbridge_p50_us"] = statistics.median(lat)
        results["speakbridge_p99_us"] = percentile(lat, 99)

        # Burst.
        payload = b"".join(f"burst line {i} with some dictated words in it\n".encode() for i in range(args.burst))
        t0 = time.perf_counter()
        sender.stdin.write(payload); sender.stdin.flush()
        reader.count_lines(args.burst)
        t1 = time.perf_counter()
        results["burst_lines"] = args.burst
        results["burst_lines_per_s"] = args.burst / (t1 - t0)
        results["rss_after_burst_mib"] = rss_kib(daemon.pid) / 1024.0
        sender.stdin.close()
        sender.wait(timeout=60)

        # Floor: socat over TCP into a second FIFO, same measurement.
        if shutil.which("socat"):
            fifo2 = os.path.join(base, "floor")
            os.mkfifo(fifo2, 0o600)
            s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
            server = subprocess.Popen(["socat", "-u", f"TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr", f"OPEN:{fifo2},wronly"])
            procs.append(server)
            time.sleep(0.3)
            client = subprocess.Popen(["socat", "-u", "STDIN", f"TCP:127.0.0.1:{port}"], stdin=subprocess.PIPE)
            procs.append(client)
            reader2 = FifoLines(fifo2)
            lat2 = measure_latency(client.stdin, reader2, args.count, args.pace)
            results["socat_p50_us"] = statistics.median(lat2)
            results["socat_p99_us"] = percentile(lat2, 99)
            results["p50_ratio_to_socat"] = results["speakbridge_p50_us"] / results["socat_p50_us"]
        for k, v in results.items():
            print(f"{k:24} {v:12.2f}" if isinstance(v, float) else f"{k:24} {v:12}")
        return 0
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
        shutil.rmtree(base, ignore_errors=True)

if __name__ == "__main__":
    sys.exit(main())
