#!/usr/bin/env python3
"""Load test (`make load`): N paired devices × L lines each, all at once, against one daemon (loopback only).

Flow:
  1. start `speakbridge serve` with a FIFO sink in a fresh temporary directory and open the FIFO for reading;
  2. pair N devices one after another (`pair --json` on the desktop, `join CODE --name dev-i` in each device's home);
  3. start N `speakbridge send` processes and write "device-i line-j" (j = 1…L) into each one's stdin, all devices
     at once, as fast as the pipes take them; a reader thread takes the FIFO apart per device;
  4. meanwhile an extra device (the independent Python client, Tests/load/ack_probe.py, when the virtualenv of
     Tests/python/run.sh exists) sends one chunk every 20 ms and times each ack: the ack latency a device sees
     while the others flood the daemon;
  5. wait until every `send` exited (exit 0 = every line acknowledged) and every line is on the FIFO, or the
     deadline passes.
Checks: every line exactly once (0 lost, 0 duplicated), per-device order kept, every `send` exited 0. Reports the
daemon's peak RSS (VmHWM), throughput, time to drain, line latency (stdin of `send` → FIFO, sampled; in a burst
this is mostly time spent queued) and the probe's ack latency while the load runs (and idle, before it). Exit 1 on any failed check. Everything started here is stopped by PID at the end.
"""
import argparse, json, os, re, select, shutil, signal, statistics, subprocess, sys, tempfile, threading, time

LINE = re.compile(rb"^device-(\d+) line-(\d+)$")


def percentile(values, p):
    v = sorted(values)
    return v[max(0, min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1)))))] if v else float("nan")


def status_kib(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class FifoReader(threading.Thread):
    """Reads the FIFO, checks per-device order, counts lines, and notes when sampled lines arrived."""

    def __init__(self, path, devices, lines):
        super().__init__(daemon=True)
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self.expected = devices * lines
        self.last = [0] * devices
        self.count = 0
        self.duplicated = 0
        self.out_of_order = 0
        self.foreign = 0
        self.probe = 0         # the ack probe's own lines
        self.arrived = {}      # (device, line) -> time, for sampled lines
        self.sample_every = max(1, lines // 100)
        self.stopping = False
        self.done = threading.Event()
        self.done_at = None      # perf_counter time the last expected line arrived

    def handle(self, raw, now):
        m = LINE.match(raw)
        if not m:
            if raw.startswith(b"probe line-"):
                self.probe += 1
            else:
                self.foreign += 1
            return
        i, j = int(m.group(1)), int(m.group(2))
        self.count += 1
        if j <= self.last[i]:
            self.duplicated += 1
        elif j != self.last[i] + 1:
            self.out_of_order += 1   # a gap: a later line came before an earlier one (or the earlier one is lost)
        self.last[i] = max(self.last[i], j)
        if j % self.sample_every == 0:
            self.arrived[(i, j)] = now

    def run(self):
        buf = b""
        while not self.stopping:
            r, _, _ = select.select([self.fd], [], [], 0.2)
            if not r:
                continue
            try:
                data = os.read(self.fd, 1 << 20)
            except BlockingIOError:
                continue
            if not data:
                time.sleep(0.005)  # no writer at the moment
                continue
            now = time.perf_counter()
            buf += data
            *lines, buf = buf.split(b"\n")
            for raw in lines:
                self.handle(raw, now)
            if self.count >= self.expected and not self.done.is_set():
                self.done_at = now
                self.done.set()


class Feeder(threading.Thread):
    """Writes device i's lines into its `send`, noting when each sampled line went in."""

    def __init__(self, proc, device, lines, sample_every):
        super().__init__(daemon=True)
        self.proc, self.device, self.lines, self.sample_every = proc, device, lines, sample_every
        self.written = {}
        self.error = None

    def run(self):
        try:
            step = 100
            for start in range(1, self.lines + 1, step):
                stop = min(self.lines, start + step - 1)
                block = b"".join(b"device-%d line-%d\n" % (self.device, j) for j in range(start, stop + 1))
                self.proc.stdin.write(block)
                self.proc.stdin.flush()
                now = time.perf_counter()
                for j in range(start, stop + 1):
                    if j % self.sample_every == 0:
                        self.written[(self.device, j)] = now
            self.proc.stdin.close()
        except OSError as error:
            self.error = str(error)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, **kw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--devices", type=int, default=100)
    ap.add_argument("--lines", type=int, default=10_000)
    ap.add_argument("--deadline", type=float, default=900, help="seconds for the whole load phase")
    ap.add_argument("--python", default="", help="Python of the client's virtualenv, for the ack probe")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()

    here = os.path.dirname(os.path.abspath(__file__))
    client = os.path.join(here, "..", "..", "Examples", "python-client", "sbclient.py")
    base = tempfile.mkdtemp(prefix="sb-load-")
    desk, fifo = os.path.join(base, "desk"), os.path.join(base, "out")
    procs = []
    results = {"devices": args.devices, "lines_per_device": args.lines}
    failures = []
    t_start = time.monotonic()
    try:
        daemon = subprocess.Popen([args.bin, "serve", "--home", desk, "--listen", "127.0.0.1:0", "--no-mdns",
                                   "--sink", "fifo:" + fifo],
                                  stdout=subprocess.DEVNULL, stderr=open(os.path.join(base, "daemon.log"), "wb"))
        procs.append(daemon)
        for _ in range(400):
            if run([args.bin, "status", "--json", "--home", desk]).returncode == 0 and os.path.exists(fifo):
                break
            time.sleep(0.05)
        else:
            raise RuntimeError("the daemon did not come up (see daemon.log)")
        reader = FifoReader(fifo, args.devices, args.lines)
        reader.start()

        # 2. Pairing.
        t0 = time.monotonic()
        for i in range(args.devices):
            code = json.loads(run([args.bin, "pair", "--json", "--home", desk], check=True).stdout)["code"]
            joined = run([args.bin, "join", code, "--name", f"dev-{i}", "--home", os.path.join(base, f"phone-{i}")])
            if joined.returncode != 0:
                raise RuntimeError(f"join of dev-{i} failed: {joined.stderr.strip()}")
        results["pairing_seconds"] = round(time.monotonic() - t0, 1)
        probe = None
        if args.python:
            code = json.loads(run([args.bin, "pair", "--json", "--home", desk], check=True).stdout)["code"]
            run([args.python, client, "join", code, "--name", "probe", "--state", os.path.join(base, "probe")],
                check=True)
        rss_before = status_kib(daemon.pid, "VmRSS")

        # 3. Load, and 4. the probe.
        stop_file = os.path.join(base, "stop-probe")
        if args.python:
            probe = subprocess.Popen([args.python, os.path.join(here, "ack_probe.py"), "--state",
                                      os.path.join(base, "probe"), "--stop", stop_file, "--seconds", str(args.deadline)],
                                     stdout=subprocess.PIPE, stderr=open(os.path.join(base, "probe.log"), "wb"))
            procs.append(probe)
            time.sleep(1.0)  # a few samples on an idle daemon first
        senders, feeders = [], []
        t_load, t_load_mono = time.perf_counter(), time.monotonic()
        for i in range(args.devices):
            p = subprocess.Popen([args.bin, "send", "--home", os.path.join(base, f"phone-{i}"), "--timeout", str(int(args.deadline))],
                                 stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                 stderr=open(os.path.join(base, f"send-{i}.log"), "wb"))
            procs.append(p)
            senders.append(p)
        for i, p in enumerate(senders):
            f = Feeder(p, i, args.lines, reader.sample_every)
            f.start()
            feeders.append(f)

        # 5. Wait, sampling the daemon's RSS.
        deadline = time.monotonic() + args.deadline
        rss_samples = []
        while time.monotonic() < deadline:
            rss_samples.append(status_kib(daemon.pid, "VmRSS"))
            if reader.done.is_set() and all(p.poll() is not None for p in senders):
                break
            if daemon.poll() is not None:
                failures.append(f"the daemon exited with {daemon.returncode}")
                break
            time.sleep(0.5)
        t_drained, t_drained_mono = time.perf_counter(), time.monotonic()
        open(stop_file, "w").close()
        time.sleep(0.5)
        reader.stopping = True

        if probe is not None:
            try:
                out, _ = probe.communicate(timeout=60)
                raw = json.loads(out.decode().strip().splitlines()[-1])
                idle = [ms for t, ms in raw["samples"] if t < t_load_mono]
                busy = [ms for t, ms in raw["samples"] if t_load_mono <= t <= t_drained_mono]
                results["probe"] = {"lost": raw["lost"], "idle_samples": len(idle),
                                    "idle_p50_ms": round(statistics.median(idle), 1) if idle else None,
                                    "load_samples": len(busy),
                                    "load_p50_ms": round(statistics.median(busy), 1) if busy else None,
                                    "load_p99_ms": round(percentile(busy, 99), 1) if busy else None,
                                    "load_max_ms": round(max(busy), 1) if busy else None}
                if raw["lost"]:
                    failures.append("the ack probe lost an ack (none within 30 s)")
            except (subprocess.TimeoutExpired, ValueError, IndexError) as error:
                failures.append(f"ack probe gave no result ({error}); see probe.log")
        not_done = [i for i, p in enumerate(senders) if p.poll() is None]
        bad_exit = [(i, p.returncode) for i, p in enumerate(senders) if p.poll() not in (None, 0)]
        feeder_errors = [(f.device, f.error) for f in feeders if f.error]
        lost = sum(args.lines - last for last in reader.last)
        if reader.done_at is not None:
            t_drained = reader.done_at  # the last line's arrival, not the 0.5 s polling tick that saw it
        latency = [(reader.arrived[k] - t) * 1000.0 for f in feeders for k, t in f.written.items()
                   if k in reader.arrived]
        results.update(
            lines_delivered=reader.count, lost=lost, duplicated=reader.duplicated, out_of_order=reader.out_of_order,
            foreign_lines=reader.foreign, probe_lines=reader.probe, seconds_to_drain=round(t_drained - t_load, 1),
            lines_per_second=int(reader.count / max(t_drained - t_load, 1e-9)),
            line_latency_p50_ms=round(statistics.median(latency), 1) if latency else None,
            line_latency_p99_ms=round(percentile(latency, 99), 1) if latency else None,
            daemon_rss_before_mib=round(rss_before / 1024, 1),
            daemon_rss_peak_sampled_mib=round(max(rss_samples or [0]) / 1024, 1),
            daemon_vmhwm_mib=round(status_kib(daemon.pid, "VmHWM") / 1024, 1),
            senders_not_finished=len(not_done), senders_failed=len(bad_exit))
        if lost or reader.duplicated or reader.out_of_order or reader.foreign:
            failures.append(f"{lost} lost, {reader.duplicated} duplicated, {reader.out_of_order} out of order, "
                            f"{reader.foreign} unrecognised lines")
        if not_done:
            failures.append(f"{len(not_done)} send process(es) still running at the deadline, e.g. dev-{not_done[0]}")
        if bad_exit:
            failures.append(f"send failed for {len(bad_exit)} device(s), e.g. dev-{bad_exit[0][0]} exit {bad_exit[0][1]}")
        if feeder_errors:
            failures.append(f"writing stdin failed for {len(feeder_errors)} device(s): {feeder_errors[0]}")
    except Exception as error:  # report, then clean up below
        failures.append(f"{type(error).__name__}: {error}")
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if args.keep or failures:
            print(f"load: kept {base} for inspection", file=sys.stderr)
        else:
            shutil.rmtree(base, ignore_errors=True)
    results["total_seconds"] = round(time.monotonic() - t_start, 1)
    print(json.dumps(results, indent=2))
    for f in failures:
        print(f"load: FAIL {f}", file=sys.stderr)
    print("load: " + ("FAILED" if failures else "ok: 0 lost, 0 duplicated, per-device order kept"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
