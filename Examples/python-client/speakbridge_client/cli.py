"""The command line: `speakbridge-client` (installed by pip) and `sbclient.py` (run from the source tree).

  speakbridge-client join CODE [--name NAME] [--state DIR]   pair with the desktop that shows CODE
  speakbridge-client send [--state DIR] [--rate N]           send stdin lines, exactly once, in order
  speakbridge-client check-vectors DIR                       check Pairing/vectors/ against this implementation

--state defaults to $SPEAKBRIDGE_CLIENT_STATE, else $XDG_STATE_HOME/speakbridge-client, else
~/.local/state/speakbridge-client.
"""
from __future__ import annotations

import argparse
import os
import sys


def default_state() -> str:
    explicit = os.environ.get("SPEAKBRIDGE_CLIENT_STATE")
    if explicit:
        return explicit
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "speakbridge-client")


def parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Independent SpeakBridge protocol v1 capture client.")
    sub = p.add_subparsers(dest="command", required=True)
    state_help = f"directory for the key, the pairing and the journal (default: {default_state()})"
    join = sub.add_parser("join", help="pair with a desktop using its pairing code")
    join.add_argument("code")
    join.add_argument("--name", default="python-client", help="this device's name, shown on the desktop")
    join.add_argument("--state", default=None, help=state_help)
    join.add_argument("--address", action="append", default=[], help="also try HOST:PORT (repeatable)")
    send = sub.add_parser("send", help="send stdin lines to the paired desktop")
    send.add_argument("--state", default=None, help=state_help)
    send.add_argument("--rate", type=float, default=0, help="at most N chunks per second (0 = no limit)")
    send.add_argument("--timeout", type=float, default=0,
                      help="give up (exit 75) after SECONDS without every chunk acknowledged (0 = never)")
    send.add_argument("--address", action="append", default=[], help="also try HOST:PORT (repeatable)")
    vectors = sub.add_parser("check-vectors", help="check the protocol test vectors")
    vectors.add_argument("directory")
    return p


def main(argv: list[str] | None = None, prog: str = "speakbridge-client") -> int:
    args = parser(prog).parse_args(sys.argv[1:] if argv is None else argv)
    if args.command == "check-vectors":
        from . import vectors
        return vectors.check(args.directory)
    from . import client
    client.PROG = prog
    state = args.state or default_state()
    try:
        if args.command == "join":
            return client.join(args.code, args.name, state, args.address)
        return client.send(state, args.rate, args.timeout, args.address)
    except client.ClientError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        if error.hint:
            print(f"{prog}: hint: {error.hint}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        return 130


def entry() -> None:
    """The console script."""
    sys.exit(main())
