#!/usr/bin/env python3
"""Prints each final Vosk result from the microphone as one line, for `speakbridge send`.

    pip install vosk sounddevice
    # a model from the Vosk models page, unpacked, e.g. vosk-model-small-en-us-0.15
    python3 vosk_mic.py --model ~/vosk-model-small-en-us-0.15 | speakbridge send

Partial results are not printed: only what Vosk has finalized is sent, so nothing has to be corrected later.
"""
import argparse
import json
import queue
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="path of an unpacked Vosk model")
    parser.add_argument("--device", default=None, help="input device (see `python3 -m sounddevice`)")
    parser.add_argument("--rate", type=int, default=16000, help="sample rate in Hz")
    args = parser.parse_args()

    import sounddevice
    from vosk import KaldiRecognizer, Model, SetLogLevel

    SetLogLevel(-1)
    blocks: "queue.Queue[bytes]" = queue.Queue()

    def audio(data, frames, time, status):  # called on the audio thread
        if status:
            print(f"vosk_mic: {status}", file=sys.stderr)
        blocks.put(bytes(data))

    recognizer = KaldiRecognizer(Model(args.model), args.rate)
    with sounddevice.RawInputStream(samplerate=args.rate, blocksize=args.rate // 2, device=args.device,
                                    dtype="int16", channels=1, callback=audio):
        print("vosk_mic: listening; Ctrl-C to stop", file=sys.stderr)
        try:
            while True:
                if recognizer.AcceptWaveform(blocks.get()):
                    text = json.loads(recognizer.Result()).get("text", "")
                    if text:
                        print(text, flush=True)
        except KeyboardInterrupt:
            text = json.loads(recognizer.FinalResult()).get("text", "")
            if text:
                print(text, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
