"""A scripted desktop for client tests (held.py, client_rules.py): the one test double of the Python suite. It plays
the desktop's side of one session byte for byte as PROTOCOL.md says — WebSocket with subprotocol `speakbridge.v1`,
the Noise responder, `welcome` — and leaves every transport answer to the test (`answer(message, send)`), so that a
test can send what a real desktop only sends at moments it cannot choose (a `held` with a hostile reason, an ack
above what was sent, `null` members).

`run_send` runs the example client's `send` (CLIENT: its sbclient.py, under this Python) with `lines` on stdin
against it, in a fresh state directory paired with the script's keys, and returns the exit status, stderr, the
client's journal and every message the desktop read (the `hello` first).
"""
from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../Examples/python-client"))
from websockets.asyncio.server import serve  # noqa: E402

from speakbridge_client import messages, noise, pairingcode  # noqa: E402


class Checks:
    """ok/FAIL lines and the counts for the closing line."""

    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0

    def check(self, name: str, ok: bool, detail: str = "") -> None:
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        print(f"ok   {name}" if ok else f"FAIL {name}: {detail}")

    def finish(self, script: str, main) -> None:
        """Runs `main` (a coroutine function), then prints "SCRIPT: N passed, M failed" and exits 1 on a failure."""
        try:
            asyncio.run(main())
        except Exception as error:
            self.check(f"{script}.py ran", False, f"{type(error).__name__}: {error}")
        print(f"{script}: {self.passed} passed, {self.failed} failed")
        sys.exit(1 if self.failed else 0)


def texts_of(seen: list[dict]) -> list[str]:
    """The texts of every chunk the desktop read, in order."""
    out = []
    for m in seen:
        if m["type"] == "chunk":
            out.append(m["text"])
        elif m["type"] == "chunks":
            out += [c["text"] for c in m["chunks"]]
    return out


def last_seq(message: dict) -> int:
    return message["seq"] if message["type"] == "chunk" else message["chunks"][-1]["seq"]


async def run_send(client: str, answer, lines: list[str], args: list[str]) -> tuple[int, str, str, list[dict]]:
    desktop_static = secrets.token_bytes(32)
    client_static = secrets.token_bytes(32)
    psk = secrets.token_bytes(32)
    seen: list[dict] = []

    async def session(ws) -> None:
        hs = noise.handshake("session", initiator=False, static_private=desktop_static, psk=psk)
        seen.append(messages.decode(bytes(hs.read_message(await ws.recv()))))
        await ws.send(bytes(hs.write_message(messages.encode({"type": "welcome"}))))

        async def send(plaintext: bytes) -> None:
            await ws.send(hs.encrypt(plaintext))

        async for frame in ws:
            message = messages.decode(hs.decrypt(frame))
            seen.append(message)
            if message["type"] == "bye":
                return
            await answer(message, send)

    async with serve(session, "127.0.0.1", 0, subprotocols=["speakbridge.v1"], compression=None) as server:
        port = server.sockets[0].getsockname()[1]
        with tempfile.TemporaryDirectory() as state:
            with open(os.path.join(state, "identity.key"), "wb") as f:
                f.write(client_static)
            public = noise.public_key(desktop_static)
            with open(os.path.join(state, "desktop.json"), "w") as f:
                json.dump({"name": "scripted desktop", "id": pairingcode.device_id(public), "public_key": public.hex(),
                           "psk": psk.hex(), "addresses": ["127.0.0.1"], "port": port}, f)
            process = await asyncio.create_subprocess_exec(
                sys.executable, client, "send", "--state", state, *args,
                stdin=subprocess.PIPE, stderr=subprocess.PIPE)
            _, stderr = await asyncio.wait_for(process.communicate(("\n".join(lines) + "\n").encode()), 30)
            journal = open(os.path.join(state, "journal.jsonl"), encoding="utf-8").read()
    return process.returncode, stderr.decode("utf-8", "replace"), journal, seen
