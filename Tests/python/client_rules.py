#!/usr/bin/env python3
"""Client rules of PROTOCOL.md that only a desktop misbehaving on purpose can probe, against `send`:

  client_rules.py CLIENT     CLIENT: the sbclient.py to run (under this Python)

1. "Client rules": an `ack`, or a `resume`'s `delivered`, above the highest `seq` the client has sent is believed
   only up to that `seq` (a MUST). The scripted desktop answers `resume` with `delivered` 1000 and the first chunk
   with an `ack` two above it; the client must still send every line, once, and end acknowledged.
2. Parser rule 7: an optional member that is `null` counts as absent. The scripted desktop answers `resume` with
   `"delivered":null` and sends an `error` with `"expected":null`; the client must read both (resume, then report
   the error) and deliver every line.

The desktop here is a script (the one test double, as in held.py): it plays the desktop's side of one session
byte for byte as PROTOCOL.md says, except for the answers under test. Output: ok/FAIL lines and
"client_rules: N passed, M failed".
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

CLIENT = sys.argv[1]
LINES = ["line one", "line two", "line three"]
results = {"passed": 0, "failed": 0}


def check(name: str, ok: bool, detail: str = "") -> None:
    results["passed" if ok else "failed"] += 1
    print(f"ok   {name}" if ok else f"FAIL {name}: {detail}")


def texts_of(seen: list[dict]) -> list[str]:
    out = []
    for m in seen:
        if m["type"] == "chunk":
            out.append(m["text"])
        elif m["type"] == "chunks":
            out += [c["text"] for c in m["chunks"]]
    return out


async def run_client(answer, extra_args: list[str]) -> tuple[int, str, str, list[dict]]:
    """Runs `send` with LINES on stdin against a scripted desktop whose answers `answer(message, send)` writes
    (`send` takes the plaintext bytes). Returns exit status, stderr, the journal and what the desktop read."""
    desktop_static = secrets.token_bytes(32)
    client_static = secrets.token_bytes(32)
    psk = secrets.token_bytes(32)
    seen: list[dict] = []

    async def session(ws) -> None:
        hs = noise.handshake("session", initiator=False, static_private=desktop_static, psk=psk)
        messages.decode(bytes(hs.read_message(await ws.recv())))
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
                sys.executable, CLIENT, "send", "--state", state, "--timeout", "8", *extra_args,
                stdin=subprocess.PIPE, stderr=subprocess.PIPE)
            _, stderr = await asyncio.wait_for(process.communicate(("\n".join(LINES) + "\n").encode()), 30)
            journal = open(os.path.join(state, "journal.jsonl"), encoding="utf-8").read()
    return process.returncode, stderr.decode("utf-8", "replace"), journal, seen


def last_seq(message: dict) -> int:
    return message["seq"] if message["type"] == "chunk" else message["chunks"][-1]["seq"]


async def inflated_acks() -> None:
    first = {"chunk": True}

    async def answer(message: dict, send) -> None:
        if message["type"] == "resume":
            # Late enough that the client has journaled its input: an old client dropped it all here.
            await asyncio.sleep(0.5)
            await send(messages.encode({"type": "resume", "session": message["session"], "delivered": 1000}))
        elif message["type"] in ("chunk", "chunks"):
            seq = last_seq(message)
            if first["chunk"]:
                first["chunk"] = False
                seq += 2  # above what was sent (the client paces one line per 0.3 s)
            await send(messages.encode({"type": "ack", "session": message["session"], "seq": seq}))

    status, err, journal, seen = await run_client(answer, ["--rate", "3"])
    check("an ack and a resume's delivered above the highest seq sent are clamped: every line is sent once",
          texts_of(seen) == LINES, f"the desktop got {texts_of(seen)}; stderr: {err}")
    check("... and the run ends acknowledged (exit 0, journal acked through 3)",
          status == 0 and '{"a": 3}' in journal, f"exit {status}, journal {journal!r}, stderr: {err}")


async def null_members() -> None:
    async def answer(message: dict, send) -> None:
        if message["type"] == "resume":
            await send(b'{"type":"resume","session":"%s","delivered":null}' % message["session"].encode())
            await send(b'{"type":"error","code":"internal","message":"scripted","expected":null}')
        elif message["type"] in ("chunk", "chunks"):
            await send(messages.encode({"type": "ack", "session": message["session"], "seq": last_seq(message)}))

    status, err, journal, seen = await run_client(answer, [])
    check('"delivered":null counts as absent: the client resumes and sends every line, exit 0',
          texts_of(seen) == LINES and status == 0, f"exit {status}, the desktop got {texts_of(seen)}; stderr: {err}")
    check('"expected":null counts as absent: the error is read and reported, not dropped as malformed',
          "desktop reported internal: scripted" in err, f"stderr: {err}")


def decoding() -> None:
    try:
        resume = messages.decode(b'{"type":"resume","session":"s","delivered":null}')
        error = messages.decode(b'{"type":"error","code":"gap","expected":null}')
    except messages.MessageError as failure:
        check("decode: null delivered and expected are absent", False, str(failure))
        return
    check("decode: null delivered and expected are absent", "delivered" not in resume and "expected" not in error,
          f"{resume}, {error}")


async def main() -> None:
    decoding()
    await inflated_acks()
    await null_members()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except Exception as error:
        check("client_rules.py ran", False, f"{type(error).__name__}: {error}")
    print(f"client_rules: {results['passed']} passed, {results['failed']} failed")
    sys.exit(1 if results["failed"] else 0)
