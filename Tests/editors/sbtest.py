"""Shared pieces of the editor tests and the torture benchmark: a real daemon, a paired phone, a results table.

Everything here runs the real `speakbridge` binary on loopback: `serve` with the sinks a test asks for, `pair --json`
and `join` for a phone installation, `send` for chunks. The one test double is `FrameWriter`, which writes lines in
the `jsonl:` format into the FIFO itself, for what a daemon cannot be made to do on demand (repeat a seq, tear a
line, write plain text beside frames).
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time


def wait_until(what, predicate, timeout=10.0, interval=0.02):
    """Polls predicate() until it is truthy; returns its value or raises TimeoutError naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError("timed out waiting for " + what)
        time.sleep(interval)


class Results:
    """Counts checks and prints `ok`/`FAIL` lines and the closing "N passed, M failed" line."""

    def __init__(self):
        self.passed = 0
        self.failed = 0
        self.skipped = 0

    def check(self, name, ok, detail=""):
        if ok:
            self.passed += 1
            print("ok   " + name, flush=True)
        else:
            self.failed += 1
            print("FAIL " + name + (": " + detail if detail else ""), flush=True)
        return ok

    def skip(self, name, reason):
        self.skipped += 1
        print("skip " + name + ": " + reason, flush=True)

    def finish(self):
        line = "%d passed, %d failed" % (self.passed, self.failed)
        if self.skipped:
            line += ", %d skipped" % self.skipped
        print(line, flush=True)
        return 0 if self.failed == 0 else 1


class Daemon:
    """`speakbridge serve` on 127.0.0.1 with the given sinks; restarts on the same port (clients remember it)."""

    def __init__(self, binary, home, sinks, log_path, env=None):
        self.binary = binary
        self.home = home
        self.sinks = sinks
        self.log_path = log_path
        self.env = env or os.environ.copy()
        self.port = 0
        self.proc = None
        self.runs = 0

    def cli(self, *args, timeout=30):
        return subprocess.run([self.binary, *args, "--home", self.home], capture_output=True, text=True,
                              timeout=timeout, env=self.env)

    def start(self, timeout=30.0):
        self.runs += 1
        args = [self.binary, "serve", "--home", self.home, "--listen", "127.0.0.1:%d" % self.port, "--no-mdns"]
        for sink in self.sinks:
            args += ["--sink", sink]
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=self.env)
        log.close()

        def ready():
            if self.proc.poll() is not None:
                raise RuntimeError("the daemon exited with %s; log: %s" % (self.proc.returncode, self.log_tail()))
            out = self.cli("status", "--json")
            if out.returncode != 0:
                return None
            return json.loads(out.stdout).get("port")

        self.port = wait_until("the daemon's control socket", ready, timeout, 0.05)

    def log_tail(self, n=2000):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def kill9(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        if self.proc:
            self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill9()

    def pair_code(self):
        out = self.cli("pair", "--json")
        if out.returncode != 0:
            raise RuntimeError("pair failed: " + out.stderr)
        return json.loads(out.stdout)["code"]


class Phone:
    """A client installation (`--home`) paired with the daemon."""

    def __init__(self, binary, home, env=None):
        self.binary = binary
        self.home = home
        self.env = env or os.environ.copy()

    def join(self, daemon, name):
        out = subprocess.run([self.binary, "join", daemon.pair_code(), "--name", name, "--home", self.home],
                             capture_output=True, text=True, timeout=60, env=self.env)
        if out.returncode != 0:
            raise RuntimeError("join failed: " + out.stderr)

    def send(self, texts, timeout=60):
        """Sends each text as one chunk (one `send` run); returns the CompletedProcess (0 = all acknowledged)."""
        args = [self.binary, "send", "--home", self.home, "--timeout", str(timeout)]
        for t in texts:
            args += ["--text", t]
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout + 30, env=self.env)

    def journal_path(self):
        """The outbox journal of the (only) paired desktop: the file whose first line names the session."""
        for root, _dirs, files in os.walk(self.home):
            for f in files:
                if f.endswith(".jsonl"):
                    path = os.path.join(root, f)
                    try:
                        with open(path) as fh:
                            head = json.loads(fh.readline())
                        if isinstance(head, dict) and "session" in head:
                            return path
                    except (OSError, ValueError):
                        pass
        return None


class FrameWriter:
    """The test double: writes `jsonl:`-format lines (or any line) into the FIFO, as a second writer."""

    def __init__(self, path):
        self.path = path

    def write_lines(self, lines):
        fd = os.open(self.path, os.O_WRONLY)
        try:
            for line in lines:
                os.write(fd, (line + "\n").encode("utf-8"))
        finally:
            os.close(fd)

    @staticmethod
    def frame(device, session, seq, text):
        return json.dumps({"device": device, "session": session, "seq": seq, "text": text}, ensure_ascii=False)


def private_tmpdir(prefix):
    path = tempfile.mkdtemp(prefix=prefix, dir=os.environ.get("TMPDIR", "/tmp"))
    os.chmod(path, 0o700)
    return path


def say(*parts):
    print(*parts, file=sys.stderr, flush=True)
