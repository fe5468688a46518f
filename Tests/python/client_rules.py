#!/usr/bin/env python3
"""Client rules of PROTOCOL.md that only a desktop misbehaving on purpose can probe, against `send`:

  client_rules.py CLIENT     CLIENT: the sbclient.py to run (under this Python)

1. "Client rules": an `ack`, or a `resume`'s `delivered`, above the highest `seq` the client has sent is believed
   only up to that `seq` (a MUST). The scripted desktop answers `resume` with `delivered` 1000 and the first chunk
   with an `ack` two above it; the client must still send every line, once, and end acknowledged.
2. Parser rule 7: an optional member that is `null` counts as absent. The scripted desktop answers `resume` with
   `"delivered":null` and sends an `error` with `"expected":null`; the client must read both (resume, then report
   the error) and deliver every line.

The desktop here is `scripted_desktop.py` (the one test double, shared with held.py): it plays the desktop's side of one session
byte for byte as PROTOCOL.md says, except for the answers under test. Output: ok/FAIL lines and
"client_rules: N passed, M failed".
"""
from __future__ import annotations

import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scripted_desktop import Checks, last_seq, run_send, texts_of  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../Examples/python-client"))
from speakbridge_client import messages  # noqa: E402

CLIENT = sys.argv[1]
LINES = ["line one", "line two", "line three"]
checks = Checks()
check = checks.check


async def run_client(answer, extra_args: list[str]) -> tuple[int, str, str, list[dict]]:
    """`send` with LINES on stdin against the scripted desktop (`answer(message, send)` writes its answers)."""
    return await run_send(CLIENT, answer, LINES, ["--timeout", "8", *extra_args])


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
    checks.finish("client_rules", main)
