"""Torture: kill -9 the daemon, then the client, in the middle of a stream, many times; count what each sink lost
and duplicated, and compare with what the docs promise.

Flow:
  set-up   one real daemon with three sinks at once -- `transcript:DIR`, `jsonl:FIFO` (read by Neovim with the
           real plugin, Examples/editors/nvim) and `fifo:FIFO` (read by a `cat` loop into a file) -- and one paired
           phone installation.
  phase A  one `send` reads lines ("A0000001", ...) from a pipe written at a steady pace; CYCLES times: wait until
           the raw FIFO shows a new line since the last restart (the client is streaming to this daemon), wait a
           random 0-200 ms, kill -9 the daemon and start it again on the same port. Then the pipe is closed and
           `send` must exit 0 (every chunk acknowledged). Expected: every line written into the pipe.
  phase B  the daemon stays up; CYCLES times: a new `send` reads lines ("B0000001", ...) from a pipe, is killed
           with kill -9 once the raw FIFO shows a new line, at a random 0-200 ms later; after each kill the
           client's outbox journal is read (a chunk in it was accepted by the client). A last `send` flushes the
           outbox. Expected: every line that was in a journal or reached a sink; a line written into the pipe but
           never journaled was not accepted by the killed client and is counted as "not taken", not as lost.
  count    per sink and phase: lost (expected, absent), duplicated (extra copies); the Neovim buffer is split on
           spaces (the plugin separates chunks with one space). A table; exit 1 when a count breaks a promise:
           transcript and jsonl-in-Neovim: 0 lost, 0 duplicated; raw fifo: per kill at most RAW_LOST_WRITES_PER_KILL
           lost write(2) (a run of consecutive lines, <= 4096 bytes) and RAW_DUP_PER_KILL duplicated lines (the
           README's promise for `fifo:`); nothing lost or duplicated when only the client is killed. A sink this
           binary does not have is skipped with a line saying so.

Usage: torture.py SPEAKBRIDGE_BIN NVIM_BIN CYCLES
Environment: TORTURE_SINKS (default "transcript jsonl fifo"), RAW_LOST_WRITES_PER_KILL (1), RAW_DUP_PER_KILL (0),
TORTURE_RATE (lines per second written to `send`, 300), TORTURE_PHASE_SECONDS (stop a phase's cycles after that
long, reporting the kills done; default no limit), TORTURE_KEEP=1 keeps the temporary directory.
"""
import collections
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "editors"))
from sbtest import Daemon, Phone, private_tmpdir, say, wait_until  # noqa: E402
import drivers  # noqa: E402


class Feeder:
    """Writes numbered lines into a process's stdin at a steady pace until stopped or the pipe breaks, keeping at
    most WINDOW lines ahead of what `delivered()` reports (a stream the daemon keeps up with: without that, a backlog
    would grow in the client's outbox with every kill, and the cycles would wait on it, not on the kills)."""

    WINDOW = 300

    def __init__(self, proc, prefix, start, rate, delivered):
        self.proc, self.prefix, self.next, self.rate = proc, prefix, start, rate
        self.delivered = delivered
        self.written = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        interval = 1.0 / self.rate
        try:
            while not self.stopped.is_set():
                if len(self.written) - self.delivered() > self.WINDOW:
                    time.sleep(interval)
                    continue
                line = "%s%07d" % (self.prefix, self.next)
                self.proc.stdin.write((line + "\n").encode())
                self.proc.stdin.flush()
                self.written.append(line)
                self.next += 1
                time.sleep(interval)
        except (BrokenPipeError, ValueError, OSError):
            pass

    def stop(self, close=True):
        self.stopped.set()
        self.thread.join()
        if close:
            try:
                self.proc.stdin.close()
            except (BrokenPipeError, OSError):
                pass


class RawReader:
    """`cat` in a loop on the raw FIFO, appending to a file (a reader that reopens when the daemon restarts)."""

    def __init__(self, fifo, out):
        self.out = out
        self.proc = subprocess.Popen(["sh", "-c", 'while :; do cat -- "$1"; done', "sh", fifo],
                                     stdout=open(out, "wb"), stdin=subprocess.DEVNULL, start_new_session=True)

    def lines(self):
        with open(self.out, "rb") as f:
            return f.read().decode("utf-8", "replace").splitlines()

    def size(self):
        """Bytes read so far: grows whenever a line arrives (cheap to poll, unlike counting lines)."""
        return os.path.getsize(self.out)

    def stop(self):
        os.killpg(self.proc.pid, signal.SIGKILL)  # the loop's own process group: sh and its cat
        self.proc.wait()


def journal_texts(phone, prefix=""):
    """Texts of the chunks in the client's outbox journal(s) (state/outbox/*.journal) that start with `prefix`.
    A small journal is appended to across runs (not compacted on open), so it may still hold chunks of an
    earlier phase that were acknowledged long ago: each phase counts only its own lines."""
    texts = set()
    for root, _dirs, files in os.walk(phone.home):
        for f in files:
            if not f.endswith(".journal"):
                continue
            with open(os.path.join(root, f), "rb") as fh:
                for raw in fh.read().splitlines():
                    try:
                        obj = json.loads(raw)
                    except ValueError:
                        continue  # a line torn by the kill: not accepted
                    chunk = obj.get("c") if isinstance(obj, dict) else None
                    if isinstance(chunk, dict) and isinstance(chunk.get("text"), str) \
                            and chunk["text"].startswith(prefix):
                        texts.add(chunk["text"])
    return texts


def transcript_texts(daemon):
    """Texts in every transcript JSONL companion listed by `speakbridge sessions --json`."""
    out = daemon.cli("sessions", "--json")
    if out.returncode != 0:
        raise RuntimeError("sessions --json failed: " + out.stderr)
    texts = []
    for s in json.loads(out.stdout):
        path = s["path"]
        companion = (path[:-3] if path.endswith(".md") else path) + ".jsonl"
        with open(companion, "rb") as f:
            for raw in f.read().splitlines():
                texts.append(json.loads(raw)["text"])
    return texts


def tally(expected, seen, prefix):
    counts = collections.Counter(t for t in seen if t.startswith(prefix))
    lost = sum(1 for t in expected if counts[t] == 0)
    dup = sum(c - 1 for c in counts.values() if c > 1)
    extra = sum(1 for t in counts if t not in expected)
    return lost, dup, extra


LINE_BYTES = 9  # every line is a letter, 7 digits and "\n"


def lost_writes(expected, seen, prefix):
    """Lost lines as runs of consecutive lines (in the order they were sent): (number of runs, bytes in the
    largest run). One lost write(2) of the raw sink is one run."""
    present = set(t for t in seen if t.startswith(prefix))
    runs, biggest, current = 0, 0, 0
    for t in sorted(expected):
        if t in present:
            current = 0
            continue
        if current == 0:
            runs += 1
        current += len(t) + 1
        biggest = max(biggest, current)
    return runs, biggest


def sink_known(binary, sink, tmp, env):
    """Whether this binary has the sink: `serve` with an unknown one exits at once with "unknown sink"."""
    probe = os.path.join(tmp, "probe-" + sink)
    os.makedirs(probe, mode=0o700)
    target = os.path.join(probe, "x" if sink == "transcript" else "x.fifo")
    try:
        out = subprocess.run([binary, "serve", "--home", os.path.join(probe, "home"), "--listen", "127.0.0.1:0",
                              "--no-mdns", "--sink", "%s:%s" % (sink, target)], capture_output=True, text=True,
                             timeout=2, env=env)
        return "unknown sink" not in out.stderr
    except subprocess.TimeoutExpired:
        return True  # it started: it knows the sink (subprocess.run killed it)


def main():
    binary, nvim_bin, cycles = sys.argv[1], sys.argv[2], int(sys.argv[3])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # kill PID: the cleanup below still runs
    sinks = os.environ.get("TORTURE_SINKS", "transcript jsonl fifo").split()
    raw_writes_per_kill = int(os.environ.get("RAW_LOST_WRITES_PER_KILL", "1"))
    raw_dup_per_kill = int(os.environ.get("RAW_DUP_PER_KILL", "0"))
    rate = float(os.environ.get("TORTURE_RATE", "300"))
    budget = float(os.environ.get("TORTURE_PHASE_SECONDS", "0")) or float("inf")
    if "fifo" not in sinks:
        sinks.append("fifo")  # the raw FIFO is also how the driver sees that the stream flows
    tmp = private_tmpdir("sb-torture.")
    run = os.path.join(tmp, "run")
    os.makedirs(os.path.join(run, "speakbridge"), mode=0o700)
    os.chmod(run, 0o700)
    env = dict(os.environ, XDG_RUNTIME_DIR=run, LANG="C.UTF-8", LC_ALL="C.UTF-8")
    jsonl_fifo = os.path.join(run, "speakbridge", "dictation.fifo")  # the plugin's default path
    raw_fifo = os.path.join(run, "speakbridge", "raw.fifo")
    spec = {"transcript": "transcript:" + os.path.join(tmp, "transcripts"), "jsonl": "jsonl:" + jsonl_fifo,
            "fifo": "fifo:" + raw_fifo}
    daemon = Daemon(binary, os.path.join(tmp, "desk"), [spec[s] for s in sinks], os.path.join(tmp, "daemon.log"),
                    env)
    phone = Phone(binary, os.path.join(tmp, "phone"), env)
    started = time.monotonic()
    editor = None
    reader = None
    rows = []
    broken = 0
    skipped = []
    children = []  # every `send` started, killed in the end whatever happened
    try:
        for sink in ("transcript", "jsonl"):
            if sink in sinks and not sink_known(binary, sink, tmp, env):
                skipped.append("%s: this speakbridge has no %s: sink" % (sink, sink))
                sinks.remove(sink)
                daemon.sinks = [spec[s] for s in sinks]
        daemon.start()
        phone.join(daemon, "torture")
        reader = RawReader(raw_fifo, os.path.join(tmp, "raw.out"))
        if "jsonl" in sinks:
            os.makedirs(os.path.join(tmp, "nvim"))
            editor = drivers.NvimDriver(nvim_bin, os.path.join(tmp, "nvim"), env)
            editor.setup([""], 1, 0, "n")

        def new_line():
            # As a user would now and then: a new line (`o`, then Esc), so no buffer line grows to megabytes (each
            # insert copies its line, and undo keeps copies). The chunks' order is then read across lines.
            if editor:
                editor.nvim.input("o<Esc>")

        def wait_flowing(base, what):
            wait_until(what, lambda: reader.size() > base, 60, 0.005)

        # Phase A: the daemon is killed.
        say("phase A: %d kill -9 of the daemon during a stream" % cycles)
        sender = subprocess.Popen([binary, "send", "--home", phone.home, "--timeout", "0"], stdin=subprocess.PIPE,
                                  stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "send-a.log"), "ab"),
                                  env=env)
        children.append(sender)
        raw_base = reader.size()
        feeder = Feeder(sender, "A", 1, rate, lambda: (reader.size() - raw_base) // LINE_BYTES)
        t0 = time.monotonic()
        kills_a = 0
        died = 0
        for i in range(cycles):
            if time.monotonic() - t0 > budget:
                say("phase A: the time budget (TORTURE_PHASE_SECONDS=%d) is spent after %d kills" % (budget, i))
                break
            wait_flowing(reader.size(), "new lines on the raw FIFO after restart %d" % i)
            time.sleep(random.uniform(0, 0.2))
            if daemon.proc.poll() is not None:
                died += 1  # it died by itself, not by our kill: a failure whatever the counts say
                say("phase A: the daemon died by itself (status %s) before kill %d; log tail:\n%s"
                    % (daemon.proc.returncode, i + 1, daemon.log_tail(800)))
            daemon.kill9()
            kills_a += 1
            daemon.start()
            new_line()
            if (i + 1) % 100 == 0:
                say("  %d kills, %d lines written, %.0f s" % (i + 1, len(feeder.written), time.monotonic() - t0))
        feeder.stop()
        try:
            rc = sender.wait(300)
        except subprocess.TimeoutExpired:
            sender.kill()
            rc = "timeout"
        if rc != 0:
            say("phase A: send exited %s (log %s)" % (rc, os.path.join(tmp, "send-a.log")))
            broken += 1
        phase_a = (set(feeder.written), kills_a, time.monotonic() - t0)
        broken += died

        # Phase B: the client is killed.
        say("phase B: %d kill -9 of `send` during a stream" % cycles)
        t0 = time.monotonic()
        accepted = set()
        fed = set()
        next_line = 1
        kills_b = 0
        for i in range(cycles):
            if time.monotonic() - t0 > budget:
                say("phase B: the time budget (TORTURE_PHASE_SECONDS=%d) is spent after %d kills" % (budget, i))
                break
            base = reader.size()
            p = subprocess.Popen([binary, "send", "--home", phone.home, "--timeout", "0"], stdin=subprocess.PIPE,
                                 stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "send-b.log"), "ab"),
                                 env=env)
            children.append(p)
            feeder = Feeder(p, "B", next_line, rate, lambda: (reader.size() - base) // LINE_BYTES)
            wait_flowing(base, "new lines on the raw FIFO from client %d" % i)
            time.sleep(random.uniform(0, 0.2))
            p.kill()
            p.wait()
            kills_b += 1
            new_line()
            feeder.stop()
            next_line = feeder.next
            fed.update(feeder.written)
            accepted |= journal_texts(phone, "B")
            if (i + 1) % 100 == 0:
                say("  %d kills, %d lines written, %.0f s" % (i + 1, len(fed), time.monotonic() - t0))
        flush = subprocess.run([binary, "send", "--home", phone.home, "--timeout", "120"], stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, env=env, timeout=200)
        if flush.returncode != 0:
            say("phase B: the flushing send exited %d: %s" % (flush.returncode, flush.stderr[-500:]))
            broken += 1
        raw_seen_b = set(t for t in reader.lines() if t.startswith("B"))
        accepted |= raw_seen_b
        phase_b = (accepted, kills_b, time.monotonic() - t0)
        not_taken = len(fed - accepted)

        # Let the sinks settle: the Neovim buffer and the transcript stop changing.
        total = len(phase_a[0]) + len(phase_b[0])

        def nvim_tokens():
            return " ".join(editor.state()["lines"]).split() if editor else []

        if editor:
            try:
                wait_until("Neovim to have every chunk", lambda: len(set(nvim_tokens())) >= total, 60, 0.2)
            except TimeoutError:
                pass
        time.sleep(1)

        sources = [("raw fifo: (cat)", lambda: reader.lines())]
        if "jsonl" in sinks:
            sources.insert(0, ("jsonl: in Neovim", nvim_tokens))
        if "transcript" in sinks:
            sources.insert(0, ("transcript NAME.jsonl", lambda: transcript_texts(daemon)))
        nvim_dropped = editor.state()["status"]["dropped"] if editor else 0
        for label, fetch in sources:
            seen = fetch()
            for phase, (expected, kills, secs), prefix in (("A daemon", phase_a, "A"), ("B client", phase_b, "B")):
                lost, dup, extra = tally(expected, seen, prefix)
                writes, biggest = lost_writes(expected, seen, prefix)
                if label.startswith("raw") and prefix == "A":
                    # README: a kill loses at most the one write(2) in flight (<= 4096 bytes of whole lines), and
                    # nothing is repeated. Lost lines must form at most that many runs, each one write's worth.
                    promise = "<= %d write(s) lost, %d dup" % (raw_writes_per_kill * kills, raw_dup_per_kill * kills)
                    ok = (writes <= raw_writes_per_kill * kills and biggest <= 4096
                          and dup <= raw_dup_per_kill * kills and extra == 0)
                else:
                    promise = "0 lost, 0 dup"
                    ok = lost == 0 and dup == 0 and extra == 0
                broken += 0 if ok else 1
                rows.append((phase, kills, len(expected), label, "%d (%d write%s)" % (lost, writes, "" if writes == 1
                             else "s"), dup, promise, "ok" if ok else "BROKEN"))
        elapsed = time.monotonic() - started
        header = ("phase", "kills", "chunks", "sink", "lost", "dup", "promise", "verdict")
        widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
        print()
        for r in [header] + rows:
            print("  ".join(str(v).ljust(w) for v, w in zip(r, widths)).rstrip())
        print()
        for line in skipped:
            print("skipped " + line)
        print("phase A %.0f s, phase B %.0f s, total %.0f s; Neovim dropped %d repeated line(s); "
              "%d line(s) written to a killed client before it journaled them (not taken, not lost)"
              % (phase_a[2], phase_b[2], elapsed, nvim_dropped, not_taken))
    except Exception as e:  # a broken harness is a failure too, with its reason
        import traceback
        traceback.print_exc()
        say("torture: " + str(e) + "; daemon log tail:\n" + daemon.log_tail())
        broken += 1
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
        if editor:
            editor.close()
        if reader:
            reader.stop()
        daemon.stop()
        if broken == 0 and not os.environ.get("TORTURE_KEEP"):
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            say("kept " + tmp)
    closing = "%d passed, %d failed" % (len(rows) - min(broken, len(rows)), broken)
    print(closing + (", %d skipped" % len(skipped) if skipped else ""))
    return 0 if broken == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
