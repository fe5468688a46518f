#!/usr/bin/env python3
"""Many devices streaming at once (performance issue: per-device p99 ≤ 2× the single-device p99).

Flow: one desktop (`serve --no-mdns --sink fifo:`), N paired devices (`pair --json` + `join`), then in the same run:
  1. device 0 alone: LINES lines, one every PACE s, each stamped with CLOCK_MONOTONIC when written into its `send`;
  2. all N devices at once: each writes LINES lines, one every PACE s, device i offset by i·PACE/N in the period
     (independent speakers, not a lock-step burst);
a separate reader process takes the FIFO apart and notes, per line, arrival − stamp. Prints p50/p99 of phase 1 and,
for phase 2, the pooled p50/p99 and the per-device p99s (median and worst), and the ratio worst per-device p99 /
single-device p99 (goal ≤ 2), per round and pooled over the rounds (each device's lines of every round: the steadier
figure), and how many of the lines later than twice one device's p99 were late together with 3 or more other devices
(a stall of the whole path, not one device's). `--trace FILE` traces the daemon (SPEAKBRIDGE_TRACE; FILE is emptied
first) and says how many lines, of all and of the late ones, overlapped one of its group-commit fsyncs;
`--trace-senders` traces every `send` too and splits the late lines' time at their `send`'s socket hand-over (the
devices' side against the rest); `KEEP=1` keeps the temp dir (each phase's latencies and arrival times,
`lat-*.json`). Before and after the rounds, the machine's own idle stalls (`stalls.noise_line`). Every line must
arrive exactly once. Loopback only; stops what it started by PID.
With 2 or more CPUs (and --pin, the default), the desktop side (daemon, FIFO reader) runs on the last CPU and the
devices (every `send`, the writer) on the others, as 100 phones bring their own CPUs: otherwise 100 senders'
CPU time (each ~120 µs a line) would starve the daemon and the figure would measure this machine, not the desktop.
"""
import argparse, bisect, json, os, select, shutil, signal, statistics, subprocess, sys, tempfile, time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import stages  # noqa: E402
import stalls  # noqa: E402
from bench import descendants, percentile, stop, CpuMeter  # noqa: E402


def reader_main(fifo, out, expect, warm, timeout):
    """The reader process: `d<i> <seq> <ns>` lines; writes {device: [latency µs…]} and {device: [arrival ns…]} as
    JSON once `expect` came, and touches OUT.warm once `warm` warm-up lines (one per device) came."""
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    lat, arrival, seen, buf, n = {}, {}, set(), b"", 0
    dup = foreign = warmed = 0
    deadline = time.monotonic() + timeout
    with open(out + ".ready", "w"):
        pass
    while n < expect and time.monotonic() < deadline:
        r, _, _ = select.select([fd], [], [], 0.5)
        if not r:
            continue
        try:
            data = os.read(fd, 1 << 20)
        except BlockingIOError:
            continue
        if not data:
            time.sleep(0.001)
            continue
        now = time.monotonic_ns()
        buf += data
        *lines, buf = buf.split(b"\n")
        for raw in lines:
            parts = raw.split()
            if len(parts) != 3 or not parts[0].startswith(b"d"):
                foreign += 1
                continue
            key = (parts[0], parts[1])
            if key in seen:
                dup += 1
                continue
            seen.add(key)
            n += 1
            if parts[1] == b"warm":
                warmed += 1
                if warmed == warm:
                    with open(out + ".warm", "w"):
                        pass
            else:
                lat.setdefault(parts[0].decode(), []).append((now - int(parts[2])) / 1e3)
                arrival.setdefault(parts[0].decode(), []).append(now)
    with open(out, "w") as f:
        json.dump({"latency": lat, "arrival": arrival, "lines": n, "duplicated": dup, "foreign": foreign}, f)


class Run:
    def __init__(self, args, base):
        self.args, self.base = args, base
        self.home, self.fifo = os.path.join(base, "desk"), os.path.join(base, "out.fifo")
        env = dict(os.environ)
        if args.trace:  # the daemon's stage marks only (every `send` would write its own too)
            # Emptied, and private: the daemon appends only to a file of its user that no one else can read (0600).
            if os.path.lexists(args.trace):
                os.unlink(args.trace)
            os.close(os.open(args.trace, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            env["SPEAKBRIDGE_TRACE"] = args.trace
        cpus = sorted(os.sched_getaffinity(0))
        self.desk_cpu = [str(cpus[-1])] if args.pin and len(cpus) >= 2 else []
        self.phone_cpus = set(cpus[:-1]) if self.desk_cpu else set(cpus)
        self.pin = ["taskset", "-c", self.desk_cpu[0]] if self.desk_cpu and shutil.which("taskset") else []
        if not self.pin:
            self.phone_cpus = set(cpus)
        os.sched_setaffinity(0, self.phone_cpus)  # this writer and every `send` it starts
        self.daemon = subprocess.Popen(self.pin + [args.bin, "serve", "--home", self.home, "--listen", "127.0.0.1:0",
                                        "--no-mdns", "--sink", "fifo:" + self.fifo],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        for _ in range(400):
            if subprocess.run([args.bin, "status", "--json", "--home", self.home],
                              capture_output=True).returncode == 0 and os.path.exists(self.fifo):
                break
            time.sleep(0.05)
        else:
            raise RuntimeError("speakbridge serve did not start")
        t0 = time.monotonic()
        for i in range(args.devices):
            code = json.loads(subprocess.run([args.bin, "pair", "--json", "--home", self.home], capture_output=True,
                                             text=True, check=True).stdout)["code"]
            subprocess.run([args.bin, "join", code, "--name", f"dev-{i}", "--home", self.phone(i)], check=True,
                           capture_output=True)
        self.pairing_s = time.monotonic() - t0

    def phone(self, i):
        return os.path.join(self.base, f"phone-{i}")

    def sender_trace(self, i):
        return os.path.join(self.base, f"trace-d{i}.txt")

    def sender_env(self, i):
        """`--trace-senders`: each `send` traces into its own file (their sequence numbers overlap)."""
        if not self.args.trace_senders:
            return None
        return dict(os.environ, SPEAKBRIDGE_TRACE=self.sender_trace(i))

    def phase(self, devices, name):
        """Streams LINES paced lines from `devices` devices at once; returns the reader's result."""
        a = self.args
        out = os.path.join(self.base, f"lat-{name}.json")
        expect = devices * (a.lines + 1)
        reader = subprocess.Popen(self.pin + [sys.executable, os.path.abspath(__file__), "--read", self.fifo, "--out", out,
                                   "--expect", str(expect), "--warm", str(devices),
                                   "--timeout", str(a.timeout)])
        while not os.path.exists(out + ".ready"):
            time.sleep(0.01)
        senders = [subprocess.Popen([a.bin, "send", "--home", self.phone(i)], stdin=subprocess.PIPE,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=self.sender_env(i))
                   for i in range(devices)]
        try:
            for i, s in enumerate(senders):
                os.write(s.stdin.fileno(), b"d%d warm 0\n" % i)
            deadline = time.monotonic() + a.timeout
            while not os.path.exists(out + ".warm"):  # every device connected and its first line through
                if time.monotonic() > deadline or reader.poll() is not None:
                    raise RuntimeError("the warm-up lines did not all arrive")
                time.sleep(0.02)
            time.sleep(0.5)
            meter = CpuMeter(descendants(self.daemon.pid))
            phones = CpuMeter([s.pid for s in senders])
            c0, p0 = meter.total(), phones.total()
            start = time.monotonic() + 0.05
            slots = sorted((k * a.pace + i * a.pace / devices, i, k) for i in range(devices) for k in range(a.lines))
            # The daemon's threads are sampled now and then during the phase (one that exits keeps its CPU time), in
            # a gap between two lines once the last one has had 0.3 ms: sampling right after a write made that
            # line's `send` wait for this writer's CPU (it shares the devices' CPUs), 2-3 ms every 50th line of d0,
            # which made d0 the worst device. The devices' own threads live as long as the phase, so they are read
            # at its ends only (100 processes' threads take this writer several ms to read).
            due = False
            for offset, i, k in slots:
                at = start + offset
                if due and at - time.monotonic() > 0.0008:
                    time.sleep(0.0003)
                    meter.sample()
                    due = False
                delay = at - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                os.write(senders[i].stdin.fileno(), b"d%d %d %d\n" % (i, k, time.monotonic_ns()))
                due = due or (k % 50 == 0 and i == 0)
            reader.wait(timeout=a.timeout)  # every line arrived; the devices are still running (their stdin open)
            cpu_us = (meter.total() - c0) / 1e3 / (devices * a.lines)
            phone_us = (phones.total() - p0) / 1e3 / (devices * a.lines)
            for s in senders:
                s.stdin.close()
            for s in senders:
                s.wait(timeout=30)
        finally:
            for s in senders:
                stop(s)
            stop(reader)
        with open(out) as f:
            r = json.load(f)
        r["desktop_cpu_us_per_line"] = cpu_us
        r["sender_cpu_us_per_line"] = phone_us
        return r

    def close(self):
        stop(self.daemon)


def late_lines(r, limit_us, window_ns=5_000_000, others=3):
    """Lines later than `limit_us`, and how many of them were late together with late lines of at least `others`
    other devices within ±`window_ns` of their arrival: a stall of the whole path (this VM pausing, or the desktop
    not reading) rather than one device's bad luck. Returns (late, shared, {device: (late, shared)})."""
    late = sorted((t, d) for d, vs in r["latency"].items() for v, t in zip(vs, r["arrival"][d]) if v > limit_us)
    per, shared, lo, hi = {}, 0, 0, 0
    for t, d in late:  # [lo, hi) is the window around t; both ends only move forward
        while late[lo][0] < t - window_ns:
            lo += 1
        while hi < len(late) and late[hi][0] <= t + window_ns:
            hi += 1
        together = len({dd for _, dd in late[lo:hi]} - {d}) >= others
        shared += together
        n, s = per.get(d, (0, 0))
        per[d] = (n + 1, s + together)
    return len(late), shared, per


def fsync_overlap(results, marks, limit_us):
    """How many lines overlapped one of the desktop's group-commit fsyncs (a `commit` mark to the next `fsync` mark of
    its trace), of all lines and of those later than `limit_us`: (lines, overlapping, late, late overlapping)."""
    ends = [ns for ns, _ in marks.get("fsync", [])]
    intervals, k = [], 0
    for s, _ in marks.get("commit", []):
        while k < len(ends) and ends[k] < s:
            k += 1
        if k < len(ends):
            intervals.append((s, ends[k]))
    starts = [s for s, _ in intervals]
    counts = [0, 0, 0, 0]
    for r in results:
        for d, vs in r["latency"].items():
            for v, t in zip(vs, r["arrival"][d]):
                sent = t - int(v * 1e3)
                i = bisect.bisect_left(starts, t)  # the fsyncs that started before the line arrived
                hit = i > 0 and max(e for _, e in intervals[max(0, i - 4):i]) > sent
                late = v > limit_us
                counts[0] += 1
                counts[1] += hit
                counts[2] += late
                counts[3] += hit and late
    return tuple(counts), intervals


def sender_share(results, traces, limit_us):
    """Where the late lines (later than `limit_us`) spent their time: from the stamp to their `send`'s `encrypt` mark
    (read, journaled, sealed, handed to the socket: the devices' side and their CPU) against from there to the FIFO
    reader (loopback, the desktop, the reader). `traces`: device -> that `send`'s `encrypt` times, sorted. Returns
    (late lines matched, how many spent most of their time on the sender's side, median sender part, median rest)."""
    matched, sender_side, parts, rests = 0, 0, [], []
    for r in results:
        for d, vs in r["latency"].items():
            marks = traces.get(d, [])
            for v, t in zip(vs, r["arrival"][d]):
                if v <= limit_us:
                    continue
                sent = t - int(v * 1e3)
                i = bisect.bisect_left(marks, sent)
                if i == len(marks) or marks[i] > t:
                    continue
                part, rest = (marks[i] - sent) / 1e3, (t - marks[i]) / 1e3
                matched += 1
                sender_side += part > rest
                parts.append(part)
                rests.append(rest)
    return matched, sender_side, (statistics.median(parts) if parts else 0), (statistics.median(rests) if rests else 0)


def summary(r):
    allv = [v for vs in r["latency"].values() for v in vs]
    per = [percentile(vs, 99) for vs in r["latency"].values()]
    return {"p50": statistics.median(allv), "p99": percentile(allv, 99), "per_device_p99_median": statistics.median(per),
            "per_device_p99_max": max(per), "lines": r["lines"], "duplicated": r["duplicated"],
            "cpu": r["desktop_cpu_us_per_line"], "sender_cpu": r["sender_cpu_us_per_line"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin")
    ap.add_argument("--devices", type=int, default=100)
    ap.add_argument("--lines", type=int, default=200, help="lines per device and phase")
    # 100 ms: 1,000 lines/s from 100 devices (real dictation is a phrase every second or two). At 20 ms the 100
    # `send` processes need more CPU than a 2-core bench machine has and the figure measures the machine.
    ap.add_argument("--pace", type=float, default=0.1, help="seconds between one device's lines")
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("ROUNDS", 3)))
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--trace", help="trace the daemon into this file (SPEAKBRIDGE_TRACE) and set the late lines beside "
                    "its group commits' fsyncs")
    ap.add_argument("--trace-senders", action="store_true", help="trace every `send` too (its own file) and say how "
                    "much of the late lines' time was spent before their `send` handed them to the socket")
    ap.add_argument("--no-pin", dest="pin", action="store_false", help="run desktop and devices on every CPU")
    ap.add_argument("--read", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--expect", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--warm", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.read:
        reader_main(args.read, args.out, args.expect, args.warm, args.timeout)
        return 0
    base = tempfile.mkdtemp(prefix="sb-devices-")
    run = None
    try:
        run = Run(args, base)
        where = (f"desktop on CPU {run.pin[2]}, devices on CPU {','.join(map(str, sorted(run.phone_cpus)))}"
                 if run.pin else "desktop and devices share every CPU")
        print(f"devices: {args.devices} paired in {run.pairing_s:.1f} s; each sends {args.lines} lines paced "
              f"{args.pace * 1e3:g} ms (send stdin → desktop FIFO, stamped); {where}", flush=True)
        print(stalls.noise_line("before the rounds"), flush=True)
        rows, many_results = [], []
        pooled_one, pooled_many = {}, {}  # device -> latencies over every round (p99 of 3 × LINES, not of LINES)
        for k in range(args.rounds):
            one_r, many_r = run.phase(1, f"one-{k}"), run.phase(args.devices, f"many-{k}")
            many_results.append(many_r)
            for pool, r in ((pooled_one, one_r), (pooled_many, many_r)):
                for dev, vs in r["latency"].items():
                    pool.setdefault(dev, []).extend(vs)
            one, many = summary(one_r), summary(many_r)
            rows.append((one, many))
            print(f"round {k + 1}: 1 device p50/p99 {one['p50']:.0f}/{one['p99']:.0f} µs; {args.devices} devices p50/p99 "
                  f"{many['p50']:.0f}/{many['p99']:.0f} µs, per-device p99 median {many['per_device_p99_median']:.0f} "
                  f"max {many['per_device_p99_max']:.0f} µs; desktop CPU/line {one['cpu']:.0f} / {many['cpu']:.0f} µs, "
                  f"sender {one['sender_cpu']:.0f} / {many['sender_cpu']:.0f} µs; "
                  f"lines {one['lines']}+{many['lines']}, duplicated {one['duplicated'] + many['duplicated']}", flush=True)
        med = lambda f: statistics.median(f(o, m) for o, m in rows)  # noqa: E731
        print(f"\n| {args.devices} devices at once ({args.lines} lines each, paced {args.pace * 1e3:g} ms; "
              f"medians of {args.rounds}) | 1 device | {args.devices} devices |")
        print("| --- | --- | --- |")
        print(f"| latency p50 (µs) | {med(lambda o, m: o['p50']):.0f} | {med(lambda o, m: m['p50']):.0f} |")
        print(f"| latency p99, all lines (µs) | {med(lambda o, m: o['p99']):.0f} | {med(lambda o, m: m['p99']):.0f} |")
        print(f"| per-device p99, median / worst device (µs) | {med(lambda o, m: o['p99']):.0f} | "
              f"{med(lambda o, m: m['per_device_p99_median']):.0f} / {med(lambda o, m: m['per_device_p99_max']):.0f} |")
        print(f"| desktop CPU per line (µs) | {med(lambda o, m: o['cpu']):.0f} | {med(lambda o, m: m['cpu']):.0f} |")
        print(f"| sender CPU per line, each `send` (µs) | {med(lambda o, m: o['sender_cpu']):.0f} | "
              f"{med(lambda o, m: m['sender_cpu']):.0f} |")
        print(f"per-device p99 / single-device p99: median device "
              f"{med(lambda o, m: m['per_device_p99_median'] / o['p99']):.2f}×, worst device "
              f"{med(lambda o, m: m['per_device_p99_max'] / o['p99']):.2f}× (goal ≤ 2×)")
        one_p99 = percentile([v for vs in pooled_one.values() for v in vs], 99)
        p99s = {dev: percentile(vs, 99) for dev, vs in pooled_many.items()}
        per, worst = sorted(p99s.values()), max(p99s, key=p99s.get)
        print(f"pooled over the {args.rounds} rounds ({args.rounds * args.lines} lines per device): one device's p99 "
              f"{one_p99:.0f} µs; per-device p99 median {statistics.median(per):.0f} µs, worst {per[-1]:.0f} µs: "
              f"{statistics.median(per) / one_p99:.2f}× / {per[-1] / one_p99:.2f}× (goal ≤ 2×; the steadier figure: "
              f"the p99 of one round's {args.lines} lines is about their worst)")
        # Where the worst device's tail came from: its lines later than twice one device's p99, and how many of them
        # were late with at least 3 other devices' lines within ±5 ms (a stall of the whole path, not of one device).
        late = shared = wl = ws = 0
        for r in many_results:
            n, s, per_dev = late_lines(r, 2 * one_p99)
            n_worst, s_worst = per_dev.get(worst, (0, 0))
            late, shared, wl, ws = late + n, shared + s, wl + n_worst, ws + s_worst
        print(f"lines later than 2 × one device's p99 ({2 * one_p99:.0f} µs): {late} of "
              f"{args.rounds * args.devices * args.lines}, {shared} of them together with 3 or more other devices' "
              f"(±5 ms); the worst device ({worst}): {wl}, {ws} of them together with 3 or more others")
        if args.trace:
            (n, hit, late, late_hit), intervals = fsync_overlap(many_results, stages.load(args.trace), 2 * one_p99)
            walls = sorted(e - s for s, e in intervals)
            print(f"group-commit fsyncs in the trace: {len(intervals)} (median {percentile(walls, 50) / 1e3:.0f} µs); "
                  f"lines overlapping one: {hit} of {n} ({100 * hit / max(n, 1):.1f} %), of the late lines {late_hit} "
                  f"of {late} ({100 * late_hit / max(late, 1):.1f} %)")
        if args.trace_senders:
            traces = {f"d{i}": [ns for ns, _ in stages.load(run.sender_trace(i)).get("encrypt", [])]
                      for i in range(args.devices)}
            matched, side, part, rest = sender_share(many_results, traces, 2 * one_p99)
            print(f"late lines traced on their `send`: {matched}; {side} of them spent most of their time before the "
                  f"`send` handed them to the socket (median {part:.0f} µs there, {rest:.0f} µs after)")
        print(stalls.noise_line("after the rounds"))
        expected = args.lines + 1 + args.devices * (args.lines + 1)
        bad = [k for k, (o, m) in enumerate(rows) if o["lines"] + m["lines"] != expected or o["duplicated"] or m["duplicated"]]
        if bad:
            print(f"devices: FAIL: lines lost or repeated in round(s) {bad}", file=sys.stderr)
            return 1
        return 0
    finally:
        if run is not None:
            run.close()
        if os.environ.get("KEEP"):
            print(f"kept {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
