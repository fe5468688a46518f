#!/usr/bin/env python3
"""Adds the seed inputs of every fuzz target to Fuzz/corpus/<target>/seed-*, from Pairing/vectors/.

Run from the repository root: `python3 Fuzz/seeds.py` (Makefile: `make fuzz-seeds`), then `make fuzz-merge`, which
keeps only the inputs (seeds and whatever the fuzzer found) that reach a coverage edge no other one reaches;
the committed corpus is that set, under SHA-1 names. Rerun after Pairing/vectors/ changes.
"""
import json
import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VECTORS = os.path.join(ROOT, "Pairing", "vectors")
CORPUS = os.path.join(ROOT, "Fuzz", "corpus")

# config-* messages: the vectors hold none that decode (frames.json has one with an unknown body), so a few
# hand-written ones of each type. The HLC device is the vectors' client ID in compact form.
DEVICE = "034F0T0RAAF987DZ"
CONFIG = [
    {"type": "config-pull", "batch": "b-1"},
    {"type": "config-pull", "batch": "b-2", "keys": ["ui.theme", "deepgram.apiKey"]},
    {"type": "config-offer", "batch": "b-1", "part": 1, "parts": 1, "origin": "reply", "entries": [
        {"key": "ui.theme", "version": f"1767225600000:0:{DEVICE}", "value": "dark"},
        {"key": "transcription.locale", "version": f"1767225600000:1:{DEVICE}", "value": "de-DE"},
        {"key": "deepgram.apiKey", "version": f"1767225600000:2:{DEVICE}", "value": "k", "secret": True},
        {"key": "ui.fontSize", "version": f"1767225600000:3:{DEVICE}", "value": 14},
        {"key": "ui.old", "version": f"1767225600000:4:{DEVICE}", "deleted": True},
    ]},
    {"type": "config-offer", "batch": "b-3", "part": 2, "parts": 3, "origin": "push", "entries": []},
    {"type": "config-result", "batch": "b-1", "status": "applied", "applied": ["ui.theme"], "pending": [],
     "unchanged": ["ui.fontSize"], "skipped": []},
    {"type": "config-result", "batch": "b-1", "status": "denied"},
    {"type": "config-error", "batch": "b-1", "code": "denied", "message": "not shared"},
    {"type": "config-error", "code": "malformed", "message": "bad \u001b[31m"},
]


def write(target, name, data):
    directory = os.path.join(CORPUS, target)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "seed-" + name), "wb") as f:
        f.write(data)


def records(parts):
    """The FuzzResponder record format: 2-byte big-endian length, then the bytes."""
    return b"".join(struct.pack(">H", len(p)) + p for p in parts)


def main():
    codes = json.load(open(os.path.join(VECTORS, "pairing-codes.json")))
    frames = json.load(open(os.path.join(VECTORS, "frames.json")))
    handshakes = json.load(open(os.path.join(VECTORS, "handshakes.json")))

    for group in ("valid", "variants", "invalid", "expiry"):
        for i, item in enumerate(codes[group]):
            write("FuzzPairingCode", f"{group}-{i:02}", item["code"].encode())

    plaintexts = []
    for group in ("frames", "accepted", "rejected"):
        for i, item in enumerate(frames[group]):
            data = bytes.fromhex(item["plaintext_hex"]) if "plaintext_hex" in item else item["plaintext"].encode()
            plaintexts.append((f"{group}-{i:02}", data))
    for h in handshakes["handshakes"]:
        for i, m in enumerate(h["messages"]):
            plaintexts.append((f"{h['name']}-{i}", m["payload"].encode()))
    for name, data in plaintexts:
        write("FuzzJSON", name, data)
        write("FuzzMessageCodec", name, data)
    for i, message in enumerate(CONFIG):
        data = json.dumps(message, separators=(",", ":")).encode()
        write("FuzzConfigWire", f"config-{i:02}", data)
        write("FuzzMessageCodec", f"config-{i:02}", data)
        write("FuzzJSON", f"config-{i:02}", data)

    # FuzzResponder: byte 0 = flags (bit 0 session, bit 1 constructed), then records.
    for h in handshakes["handshakes"]:
        session = 1 if h["intent"] == "session" else 0
        ours = [m for m in h["messages"] if m["direction"] == "client->desktop"]
        write("FuzzResponder", f"raw-{h['name']}",
              bytes([session]) + records([bytes.fromhex(m["message"]) for m in ours]))
        write("FuzzResponder", f"raw-{h['name']}-message1", bytes([session]) + records([bytes.fromhex(ours[0]["message"])]))
        write("FuzzResponder", f"constructed-{h['name']}",
              bytes([session | 2]) + records([m["payload"].encode() for m in ours]))
    hello = b'{"type":"hello","agent":"fuzz"}'
    for name, data in plaintexts + [(f"config-{i:02}", json.dumps(m).encode()) for i, m in enumerate(CONFIG)]:
        write("FuzzResponder", f"constructed-session-{name}", bytes([3]) + records([hello, data]))

    # FuzzMessageReassembler: byte 0 = limit (0: 65,535), then callbacks: flags (bit 0 binary, bit 1 final,
    # bits 2-3 width of the announced length: none, 1, 2 or 8 bytes), the length, n, n payload bytes.
    def callback(binary, final, payload, announced=None):
        flags = (1 if binary else 0) | (2 if final else 0)
        if announced is None:
            head = bytes([flags])
        elif announced < 256:
            head = bytes([flags | 4, announced])
        elif announced < 65536:
            head = bytes([flags | 8]) + struct.pack(">H", announced)
        else:
            head = bytes([flags | 12]) + struct.pack(">Q", announced)
        return head + bytes([len(payload)]) + payload
    hello = json.dumps({"type": "hello"}).encode()
    reassembly = {
        "one-frame": b"\0" + callback(True, True, hello),
        "two-fragments": b"\0" + callback(True, False, hello[:5]) + callback(True, True, hello[5:]),
        "split-frame": b"\0" + callback(True, False, hello[:5], len(hello) - 5) + callback(True, True, hello[5:]),
        "text-frame": b"\0" + callback(False, True, b"text"),
        "announces-2^63-1": b"\0" + callback(True, False, b"x") + callback(True, False, b"y", (1 << 63) - 1),
        "at-the-limit": b"\x10" + callback(True, False, b"0123456789", 6) + callback(True, True, b"abcdef"),
        "over-the-limit": b"\x10" + callback(True, False, b"0123456789", 7),
        "empty-message": b"\0" + callback(True, True, b"") + callback(True, True, hello),
    }
    for name, data in reassembly.items():
        write("FuzzMessageReassembler", name, data)


if __name__ == "__main__":
    sys.exit(main())
