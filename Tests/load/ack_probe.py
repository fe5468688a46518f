#!/usr/bin/env python3
"""Ack-latency probe for the load test: one paired device (the independent Python client's state directory, made
with `sbclient.py join`) sends single chunks at a steady pace and times each until its `ack` arrives.

Prints one JSON object: {"samples": [[t_sent, ms], ...], "lost": 0}, t_sent on CLOCK_MONOTONIC (time.monotonic,
the same clock in every process), so the caller can take the samples of its load window.
Runs under the virtualenv of Tests/python/run.sh (noiseprotocol, websockets), with Examples/python-client on
sys.path. Stops after --seconds, or once the file --stop exists.
"""
import argparse, asyncio, json, os, sys, time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "Examples", "python-client"))
from speakbridge_client import messages, noise  # noqa: E402
from speakbridge_client.state import State  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402


async def probe(state_dir, seconds, pace, stop_file):
    state = State(state_dir)
    d = state.desktop()
    url = f"ws://{d['addresses'][0]}:{d['port']}{noise.PATH['session']}"
    async with connect(url, subprotocols=[noise.SUBPROTOCOL], max_size=messages.MAX_FRAME, compression=None,
                       open_timeout=10) as ws:
        hs = noise.handshake("session", initiator=True, static_private=state.identity(),
                             psk=bytes.fromhex(d["psk"]), remote_static=bytes.fromhex(d["public_key"]))
        await ws.send(bytes(hs.write_message(messages.encode({"type": "hello", "agent": "load-probe/1"}))))
        welcome = messages.decode(bytes(hs.read_message(await asyncio.wait_for(ws.recv(), 10))))
        assert welcome["type"] == "welcome", welcome
        session = f"probe-{os.getpid()}-{int(time.time())}"
        await ws.send(hs.encrypt(messages.encode({"type": "resume", "session": session})))
        while True:
            m = messages.decode(hs.decrypt(await asyncio.wait_for(ws.recv(), 10)))
            if m["type"] == "resume":
                break
        samples, lost, seq = [], 0, 0
        end = time.monotonic() + seconds
        while time.monotonic() < end and not os.path.exists(stop_file):
            seq += 1
            t0, sent_at = time.perf_counter(), time.monotonic()
            await ws.send(hs.encrypt(messages.encode(
                {"type": "chunk", "session": session, "seq": seq, "text": f"probe line-{seq}", "final": True})))
            try:
                while True:
                    m = messages.decode(hs.decrypt(await asyncio.wait_for(ws.recv(), 30)))
                    if m["type"] == "ack" and m["seq"] >= seq:
                        break
            except asyncio.TimeoutError:
                lost += 1
                break
            samples.append([sent_at, (time.perf_counter() - t0) * 1000.0])
            await asyncio.sleep(pace)
        await ws.send(hs.encrypt(messages.encode({"type": "bye"})))
    return samples, lost


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--state", required=True)
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--pace", type=float, default=0.02)
    ap.add_argument("--stop", required=True)
    args = ap.parse_args()
    samples, lost = asyncio.run(probe(args.state, args.seconds, args.pace, args.stop))
    print(json.dumps({"samples": samples, "lost": lost}))


if __name__ == "__main__":
    main()
