#!/usr/bin/env python3
"""Reconnect after a desktop restart (performance issue: ≤ 0.5 s from the moment the desktop listens).

Flow: a desktop (`serve --listen 127.0.0.1:P --no-mdns --sink fifo:`) and one paired device whose streaming
`send` is connected (a first line reached the FIFO). Then per round and per way of stopping (SIGKILL; SIGTERM,
the clean stop): the daemon is stopped, stays down DOWN seconds, a line is written into the still running `send`
(it is journaled and waits), the daemon is started again and a TCP connect to P is polled every millisecond;
measured: from the first connect that is accepted ("listens") to that line arriving on the FIFO (= the sender
reconnected, resumed and sent it). Then the sender's wake-ups while the desktop is down (`strace -c -f` on it
over WAKE seconds: connects, polls/epoll waits, all syscalls per second).
socat and ssh are not measured: neither reconnects (the sender exits when its connection breaks, and the
lines written meanwhile are lost), so there is no figure to put beside this one.
Loopback only; stops what it started (by PID).
"""
import argparse, os, shutil, signal, socket, statistics, subprocess, sys, tempfile, time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from bench import FifoLines, descendants, free_port, parse_strace, stop  # noqa: E402


class Desk:
    def __init__(self, binary, base):
        self.bin = binary
        self.home, self.phone = os.path.join(base, "desk"), os.path.join(base, "phone")
        self.fifo = os.path.join(base, "out.fifo")
        self.port = free_port()
        self.proc = None
        self.start()
        self.wait_listening()
        import json
        code = json.loads(subprocess.run([binary, "pair", "--json", "--home", self.home], capture_output=True,
                                         text=True, check=True).stdout)["code"]
        subprocess.run([binary, "join", code, "--name", "bench", "--home", self.phone], check=True,
                       capture_output=True)

    def start(self):
        self.proc = subprocess.Popen([self.bin, "serve", "--home", self.home, "--listen", f"127.0.0.1:{self.port}",
                                      "--no-mdns", "--sink", "fifo:" + self.fifo],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def wait_listening(self, timeout=20.0):
        """Polls a TCP connect every millisecond; returns the perf_counter time of the first accepted one."""
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            s = socket.socket()
            try:
                s.connect(("127.0.0.1", self.port))
                t = time.perf_counter()
                return t
            except OSError:
                time.sleep(0.001)
            finally:
                s.close()
        raise RuntimeError("the daemon did not listen")

    def stop(self, sig):
        self.proc.send_signal(sig)
        self.proc.wait(timeout=10)


def sender(desk):
    return subprocess.Popen([desk.bin, "send", "--home", desk.phone, "--timeout", "0"], stdin=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)


def wakeups(desk, snd, seconds, base):
    """The sender's syscalls while the desktop is down (after 2 s, so the first fast redials are in)."""
    desk.stop(signal.SIGKILL)
    time.sleep(2.0)
    out = os.path.join(base, "strace-down")
    tracer = subprocess.Popen(["strace", "-c", "-f", "-o", out] + sum((["-p", str(p)] for p in descendants(snd.pid)), []),
                              stderr=subprocess.DEVNULL)
    time.sleep(seconds)
    tracer.send_signal(signal.SIGINT)
    tracer.wait(timeout=10)
    counts = {}
    with open(out) as f:
        for row in f:
            parts = row.split()
            if len(parts) >= 5 and parts[0].replace(".", "").isdigit() and not parts[-1].startswith("total"):
                counts[parts[-1]] = int(parts[3])
    desk.start()
    desk.wait_listening()
    waits = sum(counts.get(n, 0) for n in ("epoll_wait", "epoll_pwait", "poll", "ppoll", "select", "pselect6"))
    return {"connects/s": counts.get("connect", 0) / seconds, "waits/s": waits / seconds,
            "futex/s": counts.get("futex", 0) / seconds, "syscalls/s": sum(counts.values()) / seconds}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("ROUNDS", 3)))
    ap.add_argument("--down", default="1,5", help="seconds the desktop stays down, comma-separated")
    ap.add_argument("--wake", type=float, default=10.0, help="seconds of strace while down (0: skip)")
    args = ap.parse_args()
    base = tempfile.mkdtemp(prefix="sb-reconnect-")
    desk, snd, reader = None, None, None
    try:
        desk = Desk(args.bin, base)
        reader = FifoLines(desk.fifo)
        snd = sender(desk)
        snd.stdin.write(b"first\n")
        snd.stdin.flush()
        assert reader.read_line() == b"first"
        downs = [float(d) for d in args.down.split(",")]
        results = {}
        n = 0
        for r in range(args.rounds):
            for sig in (signal.SIGKILL, signal.SIGTERM):
                for down in downs:
                    n += 1
                    desk.stop(sig)
                    time.sleep(down)
                    line = f"written while down {n}".encode()
                    snd.stdin.write(line + b"\n")
                    snd.stdin.flush()
                    desk.start()
                    t_listen = desk.wait_listening()
                    got = reader.read_line(timeout=30)
                    t_line = time.perf_counter()
                    if got != line:
                        raise RuntimeError(f"expected {line!r}, got {got!r}")
                    ms = (t_line - t_listen) * 1e3
                    results.setdefault((sig.name, down), []).append(ms)
                    print(f"round {r + 1} {sig.name} down {down:g} s: listening → line on the FIFO {ms:.0f} ms",
                          flush=True)
        print()
        print(f"reconnect after a desktop restart: listening → the line written while it was down on the FIFO "
              f"(ms, median [range] of {args.rounds}); goal ≤ 500 ms. socat and ssh do not reconnect.")
        print("| stop | down | ms |")
        print("| --- | --- | --- |")
        for (name, down), v in results.items():
            print(f"| {name} | {down:g} s | {statistics.median(v):.0f} [{min(v):.0f}–{max(v):.0f}] |")
        if args.wake > 0 and shutil.which("strace"):
            w = wakeups(desk, snd, args.wake, base)
            print(f"\nsender while the desktop is down ({args.wake:g} s of strace -c -f, from 2 s after it went down): "
                  + ", ".join(f"{k} {v:.1f}" for k, v in w.items()))
        snd.stdin.close()
        snd.wait(timeout=30)
        return 0
    finally:
        if snd is not None:
            stop(snd)
        if desk is not None and desk.proc is not None:
            stop(desk.proc)
        if reader is not None:
            reader.close()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
