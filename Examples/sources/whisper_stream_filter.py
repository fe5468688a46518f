#!/usr/bin/env python3
"""Turns whisper.cpp's `whisper-stream` output into one clean line per finished phrase, for `speakbridge send`.

whisper-stream redraws its current guess with terminal escapes and carriage returns and prints status lines;
only text that follows a line break is final. This filter drops escapes, status lines ("### Transcription …",
"[Start speaking]"), timestamps ("[00:00:01.000 --> 00:00:04.000]") and non-speech tags ("[BLANK_AUDIO]",
"(music)"), and flushes every line at once so that it reaches the desktop within milliseconds.

    whisper-stream -m models/ggml-base.en.bin --step 0 --length 8000 -vth 0.6 2>/dev/null \
        | python3 whisper_stream_filter.py | speakbridge send
"""
import re
import sys

ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
TIMESTAMP = re.compile(r"^\[\d\d:\d\d:\d\d\.\d+ --> \d\d:\d\d:\d\d\.\d+\]\s*")
TAG_ONLY = re.compile(r"^(\[[^\]]*\]|\([^)]*\)|\s)*$")


def clean(line: str) -> str | None:
    line = ESCAPE.sub("", line).split("\r")[-1].strip()  # after a carriage return comes the last redraw
    if not line or line.startswith("###") or line == "[Start speaking]":
        return None
    line = TIMESTAMP.sub("", line).strip()
    if TAG_ONLY.match(line):
        return None
    return line


def main() -> int:
    for raw in sys.stdin:
        text = clean(raw)
        if text:
            print(text, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
