#!/usr/bin/env python3
"""Turns a SPEAKBRIDGE_TRACE file (lines `STAGE NANOSECONDS VALUE`, CLOCK_MONOTONIC, sender and desktop appending
to the same file) into a per-stage table: median and p99 in µs of each step of a line's way.

Marks (VALUE = the chunk's seq where the stage knows it, else 0):
  sender:  read (stdin read returned), journal (outbox append done, last seq), encrypt (a frame sealed and handed
           to the socket thread), ackrecv (a frame from the desktop arrived)
  desktop: recv (a frame off the socket, before decryption), ledger (decrypted, ledger accepted, submitted; last
           seq), progress (progress record written; seq), sink (sink write returned; last seq), commit (a group
           commit's fsync starts; 0), fsync (group commit durable; highest seq), ack (ack frames queued; highest seq)
  start-up (sender): spawn (written by the bench just before it starts `send`), main (entry point), parsed
           (arguments parsed), loaded (identity and peers.json read), outbox (journal open and locked), wsctx
           (libwebsockets context up), dial, upgraded (WebSocket open), noise (handshake done, `resume` goes next),
           resumed (the desktop's answer; not in the start-up table: the first line no longer waits for it)
Each line is followed by its seq (from `journal`); a stage without a seq is joined by time (the last `read` before
the journal mark, the first `encrypt` after it, the last `recv` before the ledger mark, the first `ackrecv` after
the ack). Meant for paced runs (one line per frame).

Usage: stages.py TRACEFILE       (per-line table; a start-up table too when the file has `spawn` marks)
"""
import bisect, sys

STEPS = [
    ("stdin read → journaled", "read", "journal"),
    ("journal → frame sealed, queued", "journal", "encrypt"),
    ("socket (lws wake, write, loopback, read)", "encrypt", "recv"),
    ("decrypt + ledger + submit", "recv", "ledger"),
    ("→ progress recorded (write)", "ledger", "progress"),
    ("→ sink write returned", "progress", "sink"),
    ("→ group commit fsynced", "sink", "fsync"),
    ("→ ack sealed, queued", "fsync", "ack"),
    ("ack on the wire → sender", "ack", "ackrecv"),
]
TOTALS = [
    ("total: stdin read → on the FIFO", "read", "sink"),
    ("total: stdin read → ack at the sender", "read", "ackrecv"),
]


def load(path):
    marks = {}
    try:
        f = open(path)
    except OSError:
        return marks  # a binary without the trace marks writes nothing
    with f:
        for row in f:
            parts = row.split()
            if len(parts) != 3:
                continue
            marks.setdefault(parts[0], []).append((int(parts[1]), int(parts[2])))
    for v in marks.values():
        v.sort()
    return marks


def last_before(series, t):
    times = [x[0] for x in series]
    i = bisect.bisect_right(times, t) - 1
    return series[i][0] if i >= 0 else None


def first_after(series, t):
    times = [x[0] for x in series]
    i = bisect.bisect_left(times, t)
    return series[i][0] if i < len(series) else None


def first_seq_at_least(series, seq, after):
    for t, v in series:
        if v >= seq and t >= after:
            return t
    return None


def lines(marks):
    """One dict stage -> ns per line that has every mark."""
    out = []
    journal = marks.get("journal", [])
    ledger = {v: t for t, v in marks.get("ledger", [])}
    for tj, seq in journal:
        row = {"journal": tj}
        row["read"] = last_before(marks.get("read", []), tj)
        row["encrypt"] = first_after(marks.get("encrypt", []), tj)
        tl = ledger.get(seq)
        row["ledger"] = tl
        if tl is None:
            continue
        row["recv"] = last_before(marks.get("recv", []), tl)
        row["progress"] = first_seq_at_least(marks.get("progress", []), seq, tl)
        row["sink"] = first_seq_at_least(marks.get("sink", []), seq, tl)
        row["fsync"] = first_seq_at_least(marks.get("fsync", []), seq, tl)
        row["ack"] = first_seq_at_least(marks.get("ack", []), seq, tl)
        if row["ack"] is not None:
            row["ackrecv"] = first_after(marks.get("ackrecv", []), row["ack"])
        if all(row.get(k) is not None for k in ("read", "encrypt", "recv", "progress", "sink", "fsync", "ack",
                                                "ackrecv")):
            out.append(row)
    return out


def pct(values, p):
    v = sorted(values)
    return v[max(0, min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1)))))]


def table(marks):
    rows = lines(marks)
    if not rows:
        return "(no complete traced lines)"
    out = [f"{len(rows)} traced lines", "| stage | median µs | p99 µs |", "| --- | --- | --- |"]
    for label, a, b in STEPS + TOTALS:
        d = [(r[b] - r[a]) / 1e3 for r in rows]
        out.append(f"| {label} | {pct(d, 50):.1f} | {pct(d, 99):.1f} |")
    return "\n".join(out)


# From the bench's `spawn` mark to the first line on the FIFO: the first mark of each stage after each spawn. No
# `resumed`: on a run's first connection the first line goes right behind the `resume`, before its answer
# (PROTOCOL.md, client rules), so "noise → encrypt" is the resume and the line sealed after the handshake.
STARTUP = ["spawn", "main", "parsed", "loaded", "outbox", "wsctx", "dial", "upgraded", "noise",
           "encrypt", "recv", "sink"]


def startup_rows(marks):
    spawns = [t for t, _ in marks.get("spawn", [])]
    out = []
    for i, t0 in enumerate(spawns):
        end = spawns[i + 1] if i + 1 < len(spawns) else float("inf")
        row, t = {}, t0
        for stage in STARTUP:
            # each stage's first mark after the previous stage's (the daemon writes main/parsed too, earlier)
            hit = next((tm for tm, _ in marks.get(stage, []) if t <= tm < end), None)
            if hit is None:
                break
            row[stage] = t = hit
        if len(row) == len(STARTUP):
            out.append(row)
    return out


def startup_table(marks):
    rows = startup_rows(marks)
    if not rows:
        return "(no complete traced start-ups)"
    out = [f"{len(rows)} traced start-ups (send spawned → first line on the FIFO)",
           "| stage | median µs | min µs |", "| --- | --- | --- |"]
    for a, b in zip(STARTUP, STARTUP[1:]):
        d = [(r[b] - r[a]) / 1e3 for r in rows]
        out.append(f"| {a} → {b} | {pct(d, 50):.0f} | {min(d):.0f} |")
    d = [(r["sink"] - r["spawn"]) / 1e3 for r in rows]
    out.append(f"| total | {pct(d, 50):.0f} | {min(d):.0f} |")
    return "\n".join(out)


if __name__ == "__main__":
    marks = load(sys.argv[1])
    print(table(marks))
    if "spawn" in marks:
        print()
        print(startup_table(marks))
