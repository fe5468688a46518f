#!/usr/bin/env python3
"""make torture: SIGKILL the desktop daemon again and again during a stream, and count what each sink shows.

One desktop (`serve` on 127.0.0.1) with three sinks at once — transcript:DIR (class c), jsonl:FIFO (class b) and
fifo:FIFO (class a) — and one `send` streaming numbered lines. The daemon is killed with SIGKILL at a random
moment CYCLES times and restarted each time on the same port; `send` keeps its journal and resends what was not
acknowledged. At the end every line must be acknowledged, and:
- transcript: every line exactly once, in order (0 lost, 0 repeated);
- jsonl, read the way the editor plugins read it (drop a seq already seen for the (device, session)): every line
  exactly once, in order; raw repeats are counted (at most one write per kill);
- fifo: 0 repeated (the lines are short), at most one write lost per kill.
Prints the counts; exits 1 when a sink did worse than its documented class allows.
"""
import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time


class PipeReader(threading.Thread):
    """Holds a FIFO open read-write (so it always has a reader and never sees end of file across daemon restarts)
    and splits what it reads into lines."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.fd = os.open(path, os.O_RDWR)
        self.lines = []
        self.lock = threading.Lock()

    def run(self):
        partial = b""
        while True:
            data = os.read(self.fd, 65536)
            partial += data
            *complete, partial = partial.split(b"\n")
            with self.lock:
                self.lines += [line.decode("utf-8", "replace") for line in complete]

    def snapshot(self):
        with self.lock:
            return list(self.lines)


def speakbridge(args, home, **kw):
    env = dict(os.environ, SPEAKBRIDGE_SECRETS="file")
    env.pop("SPEAKBRIDGE_HOME", None)
    return subprocess.run([BIN] + args + ["--home", home], env=env, capture_output=True, text=True, **kw)


CRASHES = []


def start_daemon(home, port, sinks):
    """Starts `serve` and waits for its control socket. A daemon that dies by itself (not killed by us) is a bug:
    it is counted (the run fails at the end) and started again, so the sinks' counts still cover every cycle."""
    env = dict(os.environ, SPEAKBRIDGE_SECRETS="file")
    args = [BIN, "serve", "--home", home, "--listen", f"127.0.0.1:{port}", "--no-mdns", "--quiet"]
    for sink in sinks:
        args += ["--sink", sink]
    for _ in range(5):
        log_path = os.path.join(home, f"serve-{len(CRASHES)}.log")
        proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=open(log_path, "ab"))
        deadline = time.time() + 20
        while time.time() < deadline and proc.poll() is None:
            status = speakbridge(["status", "--json"], home)
            if status.returncode == 0 and proc.poll() is None:
                return proc, json.loads(status.stdout)["port"]
            time.sleep(0.02)
        if proc.poll() is None:
            sys.exit("torture: the daemon did not start")
        with open(log_path, encoding="utf-8", errors="replace") as f:
            first = f.readline().strip()
        CRASHES.append(first)
        print(f"torture: the daemon died by itself ({first}); log kept: {log_path}", flush=True)
    sys.exit("torture: the daemon keeps dying")


def main():
    global BIN
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--lines-per-cycle", type=int, default=40)
    parser.add_argument("--rate", type=float, default=400, help="lines per second")
    options = parser.parse_args()
    BIN = options.bin
    root = tempfile.mkdtemp(prefix="sb-torture-")
    desk, phone = os.path.join(root, "desk"), os.path.join(root, "phone")
    os.makedirs(desk, mode=0o700)
    os.makedirs(phone, mode=0o700)
    transcripts = os.path.join(desk, "transcripts")
    jsonl, fifo = os.path.join(desk, "dictation.jsonl"), os.path.join(desk, "dictation.fifo")
    sinks = ["transcript:" + transcripts, "jsonl:" + jsonl, "fifo:" + fifo]

    daemon, port = start_daemon(desk, 0, sinks)
    readers = [PipeReader(jsonl), PipeReader(fifo)]
    for reader in readers:
        reader.start()
    code = json.loads(speakbridge(["pair", "--json"], desk).stdout)["code"]
    joined = speakbridge(["join", code, "--name", "torture"], phone)
    if joined.returncode != 0:
        sys.exit("torture: join failed: " + joined.stderr)

    total = options.cycles * options.lines_per_cycle
    expected = [f"line {n} é ✓" for n in range(1, total + 1)]
    env = dict(os.environ, SPEAKBRIDGE_SECRETS="file")
    sender = subprocess.Popen([BIN, "send", "--home", phone, "--timeout", "0", "--quiet"], env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def feed():
        for n, line in enumerate(expected):
            sender.stdin.write((line + "\n").encode())
            if n % 20 == 19:
                sender.stdin.flush()
                time.sleep(20 / options.rate)
        sender.stdin.close()

    threading.Thread(target=feed, daemon=True).start()
    period = options.lines_per_cycle / options.rate
    started = time.time()
    for cycle in range(options.cycles):
        time.sleep(random.uniform(0.2, 1.8) * period)
        if daemon.poll() is not None:
            CRASHES.append(f"exit status {daemon.returncode} while streaming")
            print(f"torture: the daemon died by itself while streaming: {CRASHES[-1]}", flush=True)
        daemon.send_signal(signal.SIGKILL)
        daemon.wait()
        daemon, _ = start_daemon(desk, port, sinks)
        if cycle % 100 == 99:
            print(f"torture: {cycle + 1} kills, {time.time() - started:.0f} s", flush=True)
    if sender.wait(timeout=600) != 0:
        sys.exit("torture: send did not finish with every line acknowledged")
    time.sleep(1)
    daemon.terminate()
    daemon.wait()

    failures = []

    def report(name, got, lost, repeated, allowed_lost, allowed_repeated):
        ok = lost <= allowed_lost and repeated <= allowed_repeated
        print(f"torture: {name}: {len(got)} lines, {lost} lost, {repeated} repeated "
              f"(allowed: {allowed_lost} lost, {allowed_repeated} repeated) {'ok' if ok else 'FAILED'}")
        if not ok:
            failures.append(name)

    def tally(texts):
        seen = set(texts)
        lost = sum(1 for line in expected if line not in seen)
        return lost, len(texts) - len(seen)

    transcript = []
    for name in sorted(os.listdir(transcripts)):
        if name.endswith(".jsonl"):
            with open(os.path.join(transcripts, name), encoding="utf-8") as f:
                transcript += [json.loads(line)["text"] for line in f]
    lost, repeated = tally(transcript)
    report("transcript", transcript, lost, repeated, 0, 0)
    if transcript != expected and not lost and not repeated:
        failures.append("transcript order")

    seen, kept, raw_repeats, runs, previous_repeated = {}, [], 0, 0, False
    for line in readers[0].snapshot():
        start = line.rfind('{"device":')
        obj = json.loads(line[start:])
        key = (obj["device"], obj["session"])
        repeated = obj["seq"] <= seen.get(key, 0)
        runs += repeated and not previous_repeated
        previous_repeated = repeated
        if repeated:
            raw_repeats += 1
            continue
        seen[key] = obj["seq"]
        kept.append(obj["text"])
    lost, repeated = tally(kept)
    report("jsonl (as a plugin reads it)", kept, lost, repeated, 0, 0)
    print(f"torture: jsonl: {raw_repeats} raw lines repeated (in {runs} runs, at most one per kill) and dropped by seq")
    if runs > options.cycles:
        failures.append("jsonl repeats")

    plain = readers[1].snapshot()
    lost, repeated = tally(plain)
    # One write(2) carries at most 4096 bytes: about 250 of these short lines.
    report("fifo", plain, lost, repeated, options.cycles * 250, 0)
    if CRASHES:
        failures.append(f"the daemon died by itself {len(CRASHES)} times")
    if failures:
        sys.exit(f"torture: failed: {', '.join(failures)} (files kept in {root})")
    shutil.rmtree(root, ignore_errors=True)


BIN = ""
if __name__ == "__main__":
    main()
