#!/usr/bin/env python3
"""The client side of `held` (PROTOCOL.md, "Transport messages"): `send` prints it on stderr, escaped, and keeps
the line until the ack.

  held.py CLIENT     CLIENT: the sbclient.py to run (under this Python)

The desktop here is a script (the one test double: it plays the desktop's side of one session, byte for byte as
PROTOCOL.md says, so that a `held` can be sent at a chosen moment with a hostile reason). It answers `resume`,
then for the first chunk sends `held` and only 16.5 s later the `ack`; the client must print the notice once,
escaped, keep its one connection (no ack-stall redial while the desktop holds), and exit 0 after the ack. Output: ok/FAIL lines and "held: N passed, M failed".
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
REASON = "xdotool: cannot open display\x1b]0;pwned\x07 \u202eevil\nspeakbridge-client: fake"
results = {"passed": 0, "failed": 0}


def check(name: str, ok: bool, detail: str = "") -> None:
    results["passed" if ok else "failed"] += 1
    print(f"ok   {name}" if ok else f"FAIL {name}: {detail}")


async def main() -> None:
    desktop_static = secrets.token_bytes(32)
    client_static = secrets.token_bytes(32)
    psk = secrets.token_bytes(32)
    seen: list[dict] = []

    async def session(ws) -> None:
        hs = noise.handshake("session", initiator=False, static_private=desktop_static, psk=psk)
        hello = messages.decode(bytes(hs.read_message(await ws.recv())))
        seen.append(hello)
        await ws.send(bytes(hs.write_message(messages.encode({"type": "welcome"}))))
        held_sent = False
        async for frame in ws:
            message = messages.decode(hs.decrypt(frame))
            seen.append(message)
            kind = message["type"]
            if kind == "resume":
                await ws.send(hs.encrypt(messages.encode({"type": "resume", "session": message["session"],
                                                          "delivered": 0})))
            elif kind in ("chunk", "chunks"):
                last = message["seq"] if kind == "chunk" else message["chunks"][-1]["seq"]
                if not held_sent:
                    held_sent = True
                    await ws.send(hs.encrypt(messages.encode({"type": "held", "session": message["session"],
                                                              "seq": 1, "sink": "type", "reason": REASON})))
                    # Longer than the client's ack stall (15 s): the client keeps the lines meanwhile, and a
                    # desktop that said why no ack comes is no stalled connection, so it must not redial.
                    await asyncio.sleep(16.5)
                await ws.send(hs.encrypt(messages.encode({"type": "ack", "session": message["session"],
                                                          "seq": last})))
            elif kind == "bye":
                return

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
                sys.executable, CLIENT, "send", "--state", state, "--timeout", "20",
                stdin=subprocess.PIPE, stderr=subprocess.PIPE)
            _, stderr = await asyncio.wait_for(process.communicate(b"line one\nline two\n"), 30)
            journal = open(os.path.join(state, "journal.jsonl"), encoding="utf-8").read()
    err = stderr.decode("utf-8", "replace")
    held_lines = [line for line in err.splitlines() if "held:" in line]
    check("send exits 0 once the held line is acknowledged", process.returncode == 0, f"exit {process.returncode}: {err}")
    check("the held notice is printed once, on one line, naming the sink and the line",
          len(held_lines) == 1 and "sink type has not taken line 1" in held_lines[0], repr(held_lines))
    check("the sink's reason reaches the terminal escaped (no ESC, BEL, bidi override or line break)",
          len(held_lines) == 1 and "\x1b" not in err and "\x07" not in err and "\u202e" not in err
          and held_lines[0].endswith("\\x1b]0;pwned\\x07 \\u{202E}evil\\nspeakbridge-client: fake"), repr(held_lines))
    texts = [m.get("text") for m in seen if m["type"] == "chunk"] + \
        [c["text"] for m in seen if m["type"] == "chunks" for c in m["chunks"]]
    hellos = sum(1 for m in seen if m["type"] == "hello")
    check("no redial while the desktop holds the line (16.5 s, past the 15 s ack stall)", hellos == 1,
          f"{hellos} connections: {err}")
    check("both lines were sent once; the journal ends acknowledged",
          texts == ["line one", "line two"] and '{"a": 2}' in journal, f"{texts}, journal {journal!r}")


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except Exception as error:
        check("held.py ran", False, f"{type(error).__name__}: {error}")
    print(f"held: {results['passed']} passed, {results['failed']} failed")
    sys.exit(1 if results["failed"] else 0)
