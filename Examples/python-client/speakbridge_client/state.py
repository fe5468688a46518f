"""What this client keeps in its --state directory (all files 0600, the directory 0700):

  identity.key    the static X25519 private key, 32 raw bytes
  desktop.json    the paired desktop: public key, per-pair psk, name, device ID, addresses, port
  journal.jsonl   the outbox: {"session":S,"acked":N} then {"c":{"seq":…,"text":…}} and {"a":N} lines
"""
from __future__ import annotations

import json
import os
import secrets

from . import messages


def _write_private(path: str, data: bytes) -> None:
    """Atomic replace: temp file, fsync, rename, fsync of the directory."""
    temp = path + ".tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, path)
    dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


class State:
    def __init__(self, directory: str):
        self.directory = directory
        os.makedirs(directory, mode=0o700, exist_ok=True)

    def path(self, name: str) -> str:
        return os.path.join(self.directory, name)

    def identity(self) -> bytes:
        path = self.path("identity.key")
        if os.path.exists(path):
            with open(path, "rb") as f:
                key = f.read()
            if len(key) != 32:
                raise ValueError(f"{path} is damaged")
            return key
        key = secrets.token_bytes(32)
        _write_private(path, key)
        return key

    def save_desktop(self, desktop: dict) -> None:
        _write_private(self.path("desktop.json"), json.dumps(desktop, indent=2).encode() + b"\n")

    def desktop(self) -> dict | None:
        try:
            with open(self.path("desktop.json"), encoding="utf-8") as f:
                return json.load(f)
        except FileNotFoundError:
            return None


class Journal:
    """Chunks are appended (write + fsync) before they are sent and stay until acknowledged."""

    def __init__(self, path: str):
        self.path = path
        self.session: str | None = None
        self.acked = 0
        self.pending: list[dict] = []
        self._load()
        if self.session is None:
            # A new random session ID: never reuse one after losing state (PROTOCOL.md, "Client rules").
            self.session = "s-" + secrets.token_hex(8)
        self.next_seq = max(self.acked, self.pending[-1]["seq"] if self.pending else 0) + 1
        lines = [json.dumps({"session": self.session, "acked": self.acked})]
        lines += [json.dumps({"c": c}, ensure_ascii=False) for c in self.pending]
        _write_private(path, ("\n".join(lines) + "\n").encode("utf-8"))
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND)

    def _load(self) -> None:
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return
        chunks = []
        for line in raw.split(b"\n"):
            try:
                v = json.loads(line)  # a torn last line (killed mid-write) was never sent
            except ValueError:
                continue
            if not isinstance(v, dict):
                continue
            if "session" in v and self.session is None:
                self.session = v["session"]
                self.acked = int(v.get("acked", 0))
            elif "c" in v:
                c = v["c"]
                if c["seq"] > (chunks[-1]["seq"] if chunks else self.acked):
                    chunks.append(c)
            elif "a" in v:
                self.acked = max(self.acked, int(v["a"]))
        self.pending = [c for c in chunks if c["seq"] > self.acked]

    def append(self, texts: list[str]) -> list[dict]:
        chunks = []
        for text in texts:
            chunks.append({"seq": self.next_seq, "text": text})
            self.next_seq += 1
        data = "".join(json.dumps({"c": c}, ensure_ascii=False) + "\n" for c in chunks).encode("utf-8")
        os.write(self.fd, data)
        os.fsync(self.fd)
        self.pending += chunks
        return chunks

    def ack(self, seq: int) -> None:
        if seq <= self.acked:
            return
        os.write(self.fd, (json.dumps({"a": seq}) + "\n").encode())
        self.acked = seq
        self.pending = [c for c in self.pending if c["seq"] > seq]


def split_line(text: str) -> list[str]:
    """A line over the chunk limit becomes several chunks, cut at character boundaries."""
    pieces = []
    while len(text.encode("utf-8")) > messages.MAX_TEXT:
        cut, size = 0, 0
        for i, ch in enumerate(text):
            size += len(ch.encode("utf-8"))
            if size > messages.MAX_TEXT:
                break
            cut = i + 1
        pieces.append(text[:cut])
        text = text[cut:]
    pieces.append(text)
    return pieces
