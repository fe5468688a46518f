#!/usr/bin/env python3
"""sbclient: an independent SpeakBridge protocol v1 capture client (see README.md), run from the source tree.

Installed with pip, the same program is the `speakbridge-client` command (speakbridge_client/cli.py).

  sbclient.py join CODE --name NAME --state DIR     pair with the desktop that shows CODE
  sbclient.py send --state DIR [--rate N]           send stdin lines, exactly once, in order
  sbclient.py check-vectors DIR                     check Pairing/vectors/ against this implementation
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from speakbridge_client.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], prog="sbclient.py"))
