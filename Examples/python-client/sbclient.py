#!/usr/bin/env python3
"""sbclient: an independent SpeakBridge protocol v1 capture client (see README.md).

  sbclient.py join CODE --name NAME --state DIR     pair with the desktop that shows CODE
  sbclient.py send --state DIR [--rate N]           send stdin lines, exactly once, in order
  sbclient.py check-vectors DIR                     check Pairing/vectors/ against this implementation
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="sbclient.py", description="Independent SpeakBridge protocol v1 client.")
    sub = parser.add_subparsers(dest="command", required=True)
    join = sub.add_parser("join", help="pair with a desktop using its pairing code")
    join.add_argument("code")
    join.add_argument("--name", default="python-client", help="this device's name, shown on the desktop")
    join.add_argument("--state", required=True, help="directory for the key, the pairing and the journal")
    join.add_argument("--address", action="append", default=[], help="also try HOST:PORT (repeatable)")
    send = sub.add_parser("send", help="send stdin lines to the paired desktop")
    send.add_argument("--state", required=True)
    send.add_argument("--rate", type=float, default=0, help="at most N chunks per second (0 = no limit)")
    send.add_argument("--timeout", type=float, default=0,
                      help="give up (exit 75) after SECONDS without every chunk acknowledged (0 = never)")
    send.add_argument("--address", action="append", default=[], help="also try HOST:PORT (repeatable)")
    vectors = sub.add_parser("check-vectors", help="check the protocol test vectors")
    vectors.add_argument("directory")
    args = parser.parse_args(argv)

    if args.command == "check-vectors":
        from speakbridge_client import vectors as v
        return v.check(args.directory)
    from speakbridge_client import client
    try:
        if args.command == "join":
            return client.join(args.code, args.name, args.state, args.address)
        return client.send(args.state, args.rate, args.timeout, args.address)
    except client.ClientError as error:
        print(f"sbclient: error: {error}", file=sys.stderr)
        if error.hint:
            print(f"sbclient: hint: {error.hint}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
