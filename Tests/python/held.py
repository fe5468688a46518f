#!/usr/bin/env python3
"""The client side of `held` (PROTOCOL.md, "Transport messages"): `send` prints it on stderr, escaped, and keeps
the line until the ack.

  held.py CLIENT     CLIENT: the sbclient.py to run (under this Python)

The desktop here is `scripted_desktop.py` (the one test double: it plays the desktop's side of one session, byte for byte as
PROTOCOL.md says, so that a `held` can be sent at a chosen moment with a hostile reason). It answers `resume`,
then for the first chunk sends `held` and only 16.5 s later the `ack`; the client must print the notice once,
escaped, keep its one connection (no ack-stall redial while the desktop holds), and exit 0 after the ack. Output: ok/FAIL lines and "held: N passed, M failed".
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
REASON = "xdotool: cannot open display\x1b]0;pwned\x07 \u202eevil\nspeakbridge-client: fake"
checks = Checks()
check = checks.check


async def main() -> None:
    held_sent = {"done": False}

    async def answer(message: dict, send) -> None:
        if message["type"] == "resume":
            await send(messages.encode({"type": "resume", "session": message["session"], "delivered": 0}))
        elif message["type"] in ("chunk", "chunks"):
            if not held_sent["done"]:
                held_sent["done"] = True
                await send(messages.encode({"type": "held", "session": message["session"], "seq": 1, "sink": "type",
                                            "reason": REASON}))
                # Longer than the client's ack stall (15 s): the client keeps the lines meanwhile, and a desktop
                # that said why no ack comes is no stalled connection, so it must not redial.
                await asyncio.sleep(16.5)
            await send(messages.encode({"type": "ack", "session": message["session"], "seq": last_seq(message)}))

    status, err, journal, seen = await run_send(CLIENT, answer, ["line one", "line two"], ["--timeout", "20"])
    held_lines = [line for line in err.splitlines() if "held:" in line]
    check("send exits 0 once the held line is acknowledged", status == 0, f"exit {status}: {err}")
    check("the held notice is printed once, on one line, naming the sink and the line",
          len(held_lines) == 1 and "sink type has not taken line 1" in held_lines[0], repr(held_lines))
    check("the sink's reason reaches the terminal escaped (no ESC, BEL, bidi override or line break)",
          len(held_lines) == 1 and "\x1b" not in err and "\x07" not in err and "\u202e" not in err
          and held_lines[0].endswith("\\x1b]0;pwned\\x07 \\u{202E}evil\\nspeakbridge-client: fake"), repr(held_lines))
    hellos = sum(1 for m in seen if m["type"] == "hello")
    check("no redial while the desktop holds the line (16.5 s, past the 15 s ack stall)", hellos == 1,
          f"{hellos} connections: {err}")
    check("both lines were sent once; the journal ends acknowledged",
          texts_of(seen) == ["line one", "line two"] and '{"a": 2}' in journal, f"{texts_of(seen)}, journal {journal!r}")


if __name__ == "__main__":
    checks.finish("held", main)
