#!/usr/bin/env python3
"""SpeakBridge benchmark: speakbridge beside socat (raw TCP) and ssh (an OpenSSH channel), all in the same run.

Each of the three carries lines from a sender's stdin to a FIFO on the "desktop" side (loopback only):
  - socat:       `socat -u STDIN TCP:127.0.0.1:P` -> `socat -u TCP-LISTEN:P OPEN:fifo`
  - ssh:         `ssh -p P 127.0.0.1 'cat > fifo'` -> a private sshd (own host key, own authorized key, temp dir)
  - speakbridge: `speakbridge send` (stdin) -> WebSocket + Noise -> `speakbridge serve --sink fifo:`
Per round (ROUNDS, default 3; the table shows medians): first line after the sender starts, latency p50/p99 of
COUNT lines paced PACE s, desktop and sender CPU per paced line (/proc/PID/task/*/schedstat, ns on CPU, threads
that exit meanwhile counted at their last sample), burst
throughput of BURST lines (speakbridge: durability on — journal on the sender, progress log fsynced before every
ack), desktop RSS idle with a client connected, one-shot send wall time (process start -> exit; speakbridge: acked),
and the first line again from a sender started at once after the one-shots (binary and libraries in the page cache).
The round's first start comes a minute or more after the tool last ran: where the kernel reclaims idle page cache
(this VM: DAMON pages out what was not touched for ~30 s, and its disk reads ahead 8 MiB) that one is a cold start;
`page_cache_note()` prints what the machine does. Then once: `strace -c -f` of both sides over STRACE_LINES paced lines (syscalls per line), the daemon's idle CPU,
and a traced speakbridge run (SPEAKBRIDGE_TRACE) turned into a per-stage table by stages.py.
"""
import argparse, glob, json, os, select, shutil, signal, socket, statistics, subprocess, sys, tempfile, threading, time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import stages  # noqa: E402  (Tests/bench/stages.py)


def percentile(values, p):
    v = sorted(values)
    k = max(0, min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1)))))
    return v[k]


def page_cache_note(binary):
    """One line on what makes a start cold here: DAMON schemes that page memory out, and the read-ahead of the disk
    that holds `binary` (a fault in a file that is not cached reads that much around it)."""
    parts = []
    for kd in sorted(glob.glob("/sys/kernel/mm/damon/admin/kdamonds/*")):
        try:
            if open(os.path.join(kd, "state")).read().strip() != "on":
                continue
            for scheme in glob.glob(os.path.join(kd, "contexts/[0-9]*/schemes/[0-9]*")):
                action = open(os.path.join(scheme, "action")).read().strip()
                age = int(open(os.path.join(scheme, "access_pattern/age/min")).read())
                aggr = glob.glob(os.path.join(kd, "contexts/*/monitoring_attrs/intervals/aggr_us"))
                aggr_s = int(open(aggr[0]).read()) / 1e6 if aggr else 0
                parts.append(f"DAMON {action} of memory idle >= {age * aggr_s:g} s")
        except (OSError, ValueError):
            continue
    try:
        st = os.stat(binary)
        dev = f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
        queue = os.path.join(dev, "queue") if os.path.exists(os.path.join(dev, "queue")) else os.path.join(dev, "..", "queue")
        parts.append(f"read-ahead {int(open(os.path.join(queue, 'read_ahead_kb')).read())} KiB on the binary's disk")
    except (OSError, ValueError):
        pass
    return "; ".join(parts) if parts else "no page-out scheme found"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class FifoLines:
    def __init__(self, path):
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self.buf = b""

    def read_line(self, timeout=20.0):
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
                    time.sleep(0.0005)
                self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def count_lines(self, n, timeout=180.0):
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
                if not data:
                    time.sleep(0.0005)
                seen += data.count(b"\n")
        self.buf = b""
        return seen

    def close(self):
        os.close(self.fd)


def descendants(pid):
    """pid and every process below it (from /proc/*/stat parents)."""
    parent = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                rest = f.read().rsplit(")", 1)[1].split()
            parent.setdefault(int(rest[1]), []).append(int(stat.split("/")[2]))
        except (OSError, IndexError, ValueError):
            pass
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(parent.get(p, []))
    return out


class CpuMeter:
    """CPU time of a set of processes, exact (schedstat ns per thread) and counting threads that exit meanwhile:
    each thread keeps the last value seen, so `sample()` every so often during a phase (GCD workers come and go)."""

    def __init__(self, pids):
        self.pids = pids
        self.seen = {}
        self.sample()

    def sample(self):
        for pid in self.pids:
            for path in glob.glob(f"/proc/{pid}/task/*/schedstat"):
                try:
                    with open(path) as f:
                        ns = int(f.read().split()[0])
                except (OSError, ValueError, IndexError):
                    continue
                self.seen[path] = max(self.seen.get(path, 0), ns)

    def total(self):
        self.sample()
        return sum(self.seen.values())

    def named(self, name):
        """CPU time (ns) of the threads called `name` (/proc/…/comm, as SpeakBridge names its threads), including
        those seen earlier that have exited. Their names are read now: call it while those threads still run."""
        return sum(ns for path, ns in self.seen.items() if thread_name(path) == name)


def thread_name(schedstat_path):
    """The name (/proc/PID/task/TID/comm) of the thread a `CpuMeter` path belongs to; None once it has exited."""
    try:
        with open(os.path.join(os.path.dirname(schedstat_path), "comm")) as f:
            return f.read().strip()
    except OSError:
        return None


def rss_kib(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def measure_latency(writer, reader, count, pace, warm=20, meters=()):
    samples = []
    for i in range(count + warm):
        if i % 100 == 0:
            for m in meters:
                m.sample()
        line = f"latency probe {i}\n".encode()
        t0 = time.perf_counter()
        writer.write(line)
        writer.flush()
        got = reader.read_line()
        t1 = time.perf_counter()
        if got != line[:-1]:
            raise RuntimeError(f"out of order: {got!r} vs {line!r}")
        if i >= warm:
            samples.append((t1 - t0) * 1e6)
        time.sleep(pace)
    return samples


def burst_payload(n):
    """The burst's input: `n` lines of about 48 bytes."""
    return b"".join(f"burst line {i} with some dictated words in it\n".encode() for i in range(n))


def burst(sender, reader, payload):
    """Seconds from writing `payload` into a streaming sender until its last line is on the FIFO."""
    # Written from another thread while this one reads: a sender that buffers little (ssh) would otherwise block on a
    # full FIFO that nobody reads yet.
    feeder = threading.Thread(target=lambda: (sender.stdin.write(payload), sender.stdin.flush()))
    t0 = time.perf_counter()
    feeder.start()
    reader.count_lines(payload.count(b"\n"))
    feeder.join()
    return time.perf_counter() - t0


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def end_sender(sender, reader, timeout):
    """Ends a streaming sender's input, waits for it (stops it after `timeout` s) and closes the FIFO reader."""
    sender.stdin.close()
    try:
        sender.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop(sender)
    reader.close()


class Tool:
    """One way of carrying lines; subclasses start the desktop side and a streaming sender."""
    name = "?"
    commit_thread = None  # the name of a thread whose CPU the table shows apart (`CpuMeter.named`)

    def desktop_pids(self):
        return descendants(self.desktop.pid)

    def sender_pids(self, sender):
        return descendants(sender.pid)

    def first_line(self, reader):
        """Starts a streaming sender and times its first line to the FIFO; returns (sender, ms)."""
        t0 = time.perf_counter()
        sender = self.start_sender()
        sender.stdin.write(b"first line\n")
        sender.stdin.flush()
        if reader.read_line() != b"first line":
            raise RuntimeError(f"{self.name}: wrong first line")
        return sender, (time.perf_counter() - t0) * 1e3

    def round(self, args):
        r = {}
        reader = FifoLines(self.fifo)
        # The round's first start comes after the other tools' rounds, a minute or more after this tool last ran: on
        # a machine that reclaims idle page cache (this VM's DAMON pages out what was not touched for ~30 s), the
        # tool's binary and libraries are read from disk again. `first_line_warm_ms` below is the same start with
        # them in the page cache.
        sender, r["first_line_ms"] = self.first_line(reader)
        time.sleep(1.0)
        r["desktop_rss_idle_mib"] = rss_kib(self.desktop_pids()) / 1024.0
        dm, sm = CpuMeter(self.desktop_pids()), CpuMeter(self.sender_pids(sender))
        d0, s0 = dm.total(), sm.total()
        c0 = dm.named(self.commit_thread) if self.commit_thread else 0
        lat = measure_latency(sender.stdin, reader, args.count, args.pace, meters=(dm, sm))
        d1, s1 = dm.total(), sm.total()
        c1 = dm.named(self.commit_thread) if self.commit_thread else 0
        n = args.count + 20
        # The desktop's durability (the group commit's fdatasync, on its own thread) apart from the rest: socat and
        # ssh make no fsync, and on this VM an fdatasync's CPU time is its whole wall time (README, Benchmarks).
        r["desktop_commit_cpu_us_per_line"] = (c1 - c0) / 1e3 / n
        r["p50_us"] = statistics.median(lat)
        r["p99_us"] = percentile(lat, 99)
        r["desktop_cpu_us_per_line"] = (d1 - d0) / 1e3 / n
        r["sender_cpu_us_per_line"] = (s1 - s0) / 1e3 / n
        r["burst_lines_per_s"] = args.burst / burst(sender, reader, burst_payload(args.burst))
        end_sender(sender, reader, 60)
        walls = []
        for _ in range(args.oneshots):
            walls.append(self.oneshot())
        r["oneshot_ms"] = statistics.median(walls)
        reader = FifoLines(self.fifo)
        sender, r["first_line_warm_ms"] = self.first_line(reader)
        end_sender(sender, reader, 30)
        return r

    def strace(self, args, base):
        """Syscalls per paced line on both sides, from `strace -c -f` attached during STRACE_LINES lines."""
        reader = FifoLines(self.fifo)
        sender = self.start_sender()
        sender.stdin.write(b"warm\n")
        sender.stdin.flush()
        reader.read_line()
        time.sleep(0.5)
        outs = {}
        tracers = []
        for side, pids in (("desktop", self.desktop_pids()), ("sender", self.sender_pids(sender))):
            out = os.path.join(base, f"strace-{self.name}-{side}")
            cmd = ["strace", "-c", "-f", "-o", out] + sum((["-p", str(p)] for p in pids), [])
            tracers.append(subprocess.Popen(cmd, stderr=subprocess.DEVNULL))
            outs[side] = out
        time.sleep(1.0)
        measure_latency(sender.stdin, reader, args.strace_lines, args.pace, warm=0)
        for t in tracers:
            t.send_signal(signal.SIGINT)
            t.wait(timeout=10)
        sender.stdin.close()
        try:
            sender.wait(timeout=30)
        except subprocess.TimeoutExpired:
            stop(sender)
        reader.close()
        result = {}
        for side, out in outs.items():
            result[side] = parse_strace(out, args.strace_lines)
        return result


def parse_strace(path, lines):
    counts = {}
    try:
        with open(path) as f:
            for row in f:
                parts = row.split()
                if len(parts) >= 5 and parts[0].replace(".", "").isdigit() and not parts[-1].startswith("total"):
                    name = parts[-1]
                    calls = int(parts[3])
                    counts[name] = calls
    except OSError:
        return {}
    wake = sum(counts.get(n, 0) for n in ("epoll_wait", "epoll_pwait", "poll", "ppoll", "select", "pselect6"))
    futex = counts.get("futex", 0)
    return {
        "syscalls": sum(counts.values()) / lines,
        "waits (poll/epoll/select)": wake / lines,
        "futex": futex / lines,
        "fsync": sum(counts.get(n, 0) for n in ("fsync", "fdatasync")) / lines,
        "write": sum(counts.get(n, 0) for n in ("write", "writev", "pwrite64", "sendto", "sendmsg")) / lines,
        "read": sum(counts.get(n, 0) for n in ("read", "readv", "recvfrom", "recvmsg")) / lines,
    }


class Socat(Tool):
    name = "socat"

    def __init__(self, base):
        self.fifo = os.path.join(base, "socat.fifo")
        os.mkfifo(self.fifo, 0o600)
        self.port = free_port()
        # fork: one child per connection (the rounds and one-shots each connect anew), as sshd does.
        self.desktop = subprocess.Popen(["socat", "-u", f"TCP-LISTEN:{self.port},bind=127.0.0.1,reuseaddr,fork",
                                         f"OPEN:{self.fifo},wronly"])
        self.keep = os.open(self.fifo, os.O_RDONLY | os.O_NONBLOCK)  # the FIFO always has a reader
        time.sleep(0.3)

    def start_sender(self):
        return subprocess.Popen(["socat", "-u", "STDIN", f"TCP:127.0.0.1:{self.port}"], stdin=subprocess.PIPE)

    def oneshot(self):
        t0 = time.perf_counter()
        subprocess.run(["socat", "-u", "STDIN", f"TCP:127.0.0.1:{self.port}"], input=b"one shot\n", check=True)
        wall = (time.perf_counter() - t0) * 1e3
        drain(self.keep)
        return wall

    def close(self):
        stop(self.desktop)


class SSH(Tool):
    name = "ssh"

    def __init__(self, base):
        d = os.path.join(base, "ssh")
        os.mkdir(d, 0o700)
        self.fifo = os.path.join(d, "ssh.fifo")
        os.mkfifo(self.fifo, 0o600)
        hostkey, userkey = os.path.join(d, "host_ed25519"), os.path.join(d, "user_ed25519")
        for k in (hostkey, userkey):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", k], check=True)
        auth = os.path.join(d, "authorized_keys")
        shutil.copy(userkey + ".pub", auth)
        os.chmod(auth, 0o600)
        self.port = free_port()
        conf = os.path.join(d, "sshd_config")
        with open(conf, "w") as f:
            f.write(f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {hostkey}\nAuthorizedKeysFile {auth}\n"
                    f"PidFile {d}/sshd.pid\nStrictModes no\nUsePAM no\nPermitRootLogin prohibit-password\n"
                    "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPrintMotd no\nUseDNS no\n"
                    "Subsystem sftp internal-sftp\n")
        try:
            os.makedirs("/run/sshd", exist_ok=True)  # privilege separation directory (Debian's sshd as root needs it)
        except OSError:
            pass  # not root: sshd runs unprivileged and logs in only this user, which is all the bench needs
        self.desktop = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", conf], stderr=subprocess.DEVNULL)
        self.client = ["ssh", "-q", "-i", userkey, "-p", str(self.port), "-o", "StrictHostKeyChecking=no",
                       "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR",
                       "127.0.0.1"]
        self.keep = os.open(self.fifo, os.O_RDONLY | os.O_NONBLOCK)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)

    def start_sender(self):
        return subprocess.Popen(self.client + [f"cat > {self.fifo}"], stdin=subprocess.PIPE)

    def oneshot(self):
        t0 = time.perf_counter()
        subprocess.run(self.client + [f"cat > {self.fifo}"], input=b"one shot\n", check=True)
        wall = (time.perf_counter() - t0) * 1e3
        drain(self.keep)
        return wall

    def close(self):
        stop(self.desktop)


class SpeakBridge(Tool):
    name = "speakbridge"
    commit_thread = "sb-commit"

    def __init__(self, base, binary):
        self.bin = binary
        self.desk, self.phone = os.path.join(base, "desk"), os.path.join(base, "phone")
        self.fifo = os.path.join(base, "sb.fifo")
        self.port = free_port()
        self.start_daemon({})
        code = json.loads(subprocess.run([binary, "pair", "--json", "--home", self.desk], capture_output=True,
                                         text=True, check=True).stdout)["code"]
        subprocess.run([binary, "join", code, "--name", "bench", "--home", self.phone], check=True,
                       capture_output=True)
        self.keep = None

    def start_daemon(self, env):
        self.desktop = subprocess.Popen([self.bin, "serve", "--home", self.desk, "--listen", f"127.0.0.1:{self.port}",
                                         "--no-mdns", "--sink", "fifo:" + self.fifo],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        env=dict(os.environ, **env))
        for _ in range(400):
            st = subprocess.run([self.bin, "status", "--json", "--home", self.desk], capture_output=True, text=True)
            if st.returncode == 0:
                return
            time.sleep(0.05)
        raise RuntimeError("speakbridge serve did not start")

    def start_sender(self, env=None):
        return subprocess.Popen([self.bin, "send", "--home", self.phone], stdin=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=dict(os.environ, **(env or {})))

    def oneshot(self):
        reader = FifoLines(self.fifo)
        t0 = time.perf_counter()
        subprocess.run([self.bin, "send", "--home", self.phone, "--text", "one shot"], check=True,
                       stderr=subprocess.DEVNULL)
        wall = (time.perf_counter() - t0) * 1e3
        reader.read_line()
        reader.close()
        return wall

    def idle_cpu_percent(self, seconds):
        reader = FifoLines(self.fifo)
        sender = self.start_sender()
        sender.stdin.write(b"idle\n")
        sender.stdin.flush()
        reader.read_line()
        time.sleep(1.0)
        meter = CpuMeter([self.desktop.pid])
        t0 = meter.total()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(0.5)
            meter.sample()
        t1 = meter.total()
        sender.stdin.close()
        sender.wait(timeout=30)
        reader.close()
        return 100.0 * (t1 - t0) / 1e9 / seconds

    def traced(self, args, base):
        """Restarts the daemon with SPEAKBRIDGE_TRACE and streams paced lines from a traced sender."""
        path = os.path.join(base, "trace.txt")
        stop(self.desktop)
        env = {"SPEAKBRIDGE_TRACE": path}
        self.start_daemon(env)
        reader = FifoLines(self.fifo)
        # The start-up table (stages.startup_table) counts from here: the moment the sender is spawned.
        with open(path, "a") as f:
            f.write(f"spawn {time.clock_gettime_ns(time.CLOCK_MONOTONIC)} 0\n")
        sender = self.start_sender(env)
        sender.stdin.write(b"warm\n")
        sender.stdin.flush()
        reader.read_line()
        measure_latency(sender.stdin, reader, args.trace_lines, args.pace, warm=0)
        sender.stdin.close()
        sender.wait(timeout=30)
        reader.close()
        stop(self.desktop)
        self.start_daemon({})
        return path

    def close(self):
        stop(self.desktop)


def drain(fd):
    time.sleep(0.01)
    try:
        while os.read(fd, 1 << 16):
            pass
    except BlockingIOError:
        pass


ROWS = [
    ("latency p50 (µs)", "p50_us", "{:.0f}"),
    ("latency p99 (µs)", "p99_us", "{:.0f}"),
    ("burst throughput (lines/s)", "burst_lines_per_s", "{:,.0f}"),
    ("first line after the sender starts (ms)", "first_line_ms", "{:.1f}"),
    ("first line, started again at once (ms)", "first_line_warm_ms", "{:.1f}"),
    ("desktop CPU per paced line (µs)", "desktop_cpu_us_per_line", "{:.0f}"),
    ("… of it on the group-commit thread (fdatasync)", "desktop_commit_cpu_us_per_line", "{:.0f}"),
    ("sender CPU per paced line (µs)", "sender_cpu_us_per_line", "{:.0f}"),
    ("desktop RSS, idle with a client (MiB)", "desktop_rss_idle_mib", "{:.1f}"),
    ("one-shot send wall (ms)", "oneshot_ms", "{:.1f}"),
]


def add_tools(tools, base, binary, wanted=("socat", "ssh", "speakbridge")):
    """Starts the desktop side of each wanted tool that is installed (socat, ssh, speakbridge, in that order) and
    appends it to `tools` as it starts, so that the caller's cleanup closes those already running if one fails."""
    if "socat" in wanted and shutil.which("socat"):
        tools.append(Socat(base))
    if "ssh" in wanted and os.path.exists("/usr/sbin/sshd") and shutil.which("ssh"):
        tools.append(SSH(base))
    if "speakbridge" in wanted:
        tools.append(SpeakBridge(base, binary))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("ROUNDS", 3)))
    ap.add_argument("--count", type=int, default=1500)
    ap.add_argument("--pace", type=float, default=0.002)
    ap.add_argument("--burst", type=int, default=50000)
    ap.add_argument("--oneshots", type=int, default=5)
    ap.add_argument("--idle", type=float, default=5.0)
    ap.add_argument("--strace-lines", type=int, default=300)
    ap.add_argument("--trace-lines", type=int, default=1000)
    ap.add_argument("--only", default="socat,ssh,speakbridge", help="comma-separated tools")
    ap.add_argument("--no-strace", action="store_true")
    ap.add_argument("--json", help="also write every round's figures here")
    args = ap.parse_args()
    base = tempfile.mkdtemp(prefix="sb-bench-")
    tools = []
    try:
        add_tools(tools, base, args.bin, args.only.split(","))
        rounds = {t.name: [] for t in tools}
        for i in range(args.rounds):
            for t in tools:  # interleaved, so a noisy moment of the machine hits every tool alike
                r = t.round(args)
                rounds[t.name].append(r)
                print(f"round {i + 1} {t.name}: " + ", ".join(f"{k} {v:.1f}" for k, v in r.items()), flush=True)
        names = [t.name for t in tools]
        print(f"\npage cache on this machine: {page_cache_note(args.bin)}")
        print(f"medians of {args.rounds} round(s); {args.count} lines paced {args.pace * 1e3:g} ms, "
              f"burst {args.burst} lines")
        print("| metric | " + " | ".join(names) + " |")
        print("| --- |" + " --- |" * len(names))
        for label, key, fmt in ROWS:
            cells = [fmt.format(statistics.median(r[key] for r in rounds[n])) for n in names]
            print(f"| {label} | " + " | ".join(cells) + " |")
        sb = next((t for t in tools if t.name == "speakbridge"), None)
        if sb:
            print(f"\nspeakbridge daemon idle CPU over {args.idle:g} s with a client: "
                  f"{sb.idle_cpu_percent(args.idle):.3f} %")
        if not args.no_strace and shutil.which("strace"):
            print(f"\nsyscalls per paced line (strace -c -f, {args.strace_lines} lines; strace itself slows both sides)")
            per = {t.name: t.strace(args, base) for t in tools}
            keys = ["syscalls", "waits (poll/epoll/select)", "futex", "write", "read", "fsync"]
            print("| per line | " + " | ".join(f"{n} desktop | {n} sender" for n in names) + " |")
            print("| --- |" + " --- | --- |" * len(names))
            for k in keys:
                cells = []
                for n in names:
                    for side in ("desktop", "sender"):
                        cells.append(f"{per[n].get(side, {}).get(k, 0):.2f}")
                print(f"| {k} | " + " | ".join(cells) + " |")
        if sb:
            path = sb.traced(args, base)
            print(f"\nspeakbridge per-stage trace ({args.trace_lines} paced lines, SPEAKBRIDGE_TRACE; each mark is one "
                  "write(2), so traced lines are a little slower)")
            print(stages.table(stages.load(path)))
            print("\nspeakbridge start-up, traced (one streaming send: spawned → its first line on the FIFO)")
            print(stages.startup_table(stages.load(path)))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rounds, f, indent=1)
        return 0
    finally:
        for t in reversed(tools):
            t.close()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
