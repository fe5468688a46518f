"""`join` and `send` (PROTOCOL.md, "Pairing flow" and "Sessions and exactly-once delivery").

send flow:
1. Open the journal: unacknowledged chunks of an earlier run come back first.
2. A thread reads stdin lines; each is journaled (write + fsync) before it may be sent.
3. Connect (remembered addresses, then --address), Noise IKpsk1 with the per-pair psk, `resume`;
   resend every chunk above the desktop's `delivered`, in order, then new ones as they come.
4. `ack` drops chunks from the journal. A lost or stalled connection is redialled with backoff.
5. Done when stdin ended and every chunk is acknowledged: `bye`, exit 0.
"""
from __future__ import annotations

import asyncio
import sys
import threading
import time

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from . import messages, noise, pairingcode
from .peertext import escape
from .state import Journal, State, split_line

PROG = "speakbridge-client"  # set by cli.main: the name this program was started as

CONNECT_TIMEOUT = 5
ACK_STALL = 15
MAX_IN_FLIGHT = 4096
BATCH_BUDGET = messages.MAX_FRAME - 1024


class ClientError(Exception):
    def __init__(self, message: str, hint: str | None = None, exit_code: int = 1):
        super().__init__(message)
        self.hint = hint
        self.exit_code = exit_code


def log(text: str) -> None:
    """One line on stderr. Every string a peer chose goes through `escape` before it gets here."""
    print(f"{PROG}: {text}", file=sys.stderr, flush=True)


def _url(host: str, port: int, intent: str) -> str:
    host = f"[{host}]" if ":" in host else host
    return f"ws://{host}:{port}{noise.PATH[intent]}"


def _parse_hostport(text: str) -> tuple[str, int]:
    if text.startswith("["):
        host, _, port = text[1:].partition("]:")
    else:
        host, _, port = text.rpartition(":")
    return host, int(port)


async def _open(candidates: list[tuple[str, int]], intent: str):
    """Tries the candidates in order; returns (websocket, (host, port))."""
    failures = []
    for host, port in candidates:
        try:
            # No keepalive timeout: while the desktop pauses reading a connection (flow control) our pings wait
            # unread behind our data and their pongs never come, and the library would close a live connection
            # (the desktop sends unsolicited pongs then, which this library does not count). A dead connection is
            # found by the ack stall below, and by TCP.
            ws = await connect(_url(host, port, intent), subprotocols=[noise.SUBPROTOCOL],
                               max_size=messages.MAX_FRAME, compression=None, open_timeout=CONNECT_TIMEOUT,
                               ping_timeout=None)
        except (OSError, asyncio.TimeoutError, Exception) as error:  # refused, unreachable, upgrade refused
            failures.append(f"{host}:{port}: {error}")
            continue
        if ws.subprotocol != noise.SUBPROTOCOL:
            await ws.close()
            failures.append(f"{host}:{port}: the server did not accept {noise.SUBPROTOCOL}")
            continue
        return ws, (host, port)
    raise ConnectionError("; ".join(failures) or "no address to try")


async def _recv(ws) -> bytes:
    frame = await ws.recv()
    if not isinstance(frame, bytes):
        raise ConnectionError("text frame from the desktop")
    return frame


# MARK: join

def join(code_text: str, name: str, state_dir: str, extra: list[str]) -> int:
    try:
        code = pairingcode.parse(code_text)
        code.check_not_expired(int(time.time()))
    except pairingcode.PairingCodeError as error:
        hint = ("run `speakbridge pair` on the desktop for a new code; if it was fresh, check both clocks"
                if error.name == "expired" else "copy the whole code again, including SB1:")
        raise ClientError(f"invalid pairing code: {error}", hint) from None
    state = State(state_dir)
    static = state.identity()
    if noise.public_key(static) == code.public_key:
        raise ClientError("this code was issued by this installation itself")
    candidates = [(a, code.port) for a in code.addresses] + [_parse_hostport(x) for x in extra]
    desktop = asyncio.run(_pair(code, name, static, candidates))
    state.save_desktop(desktop)
    log(f"paired with \"{escape(desktop['name'])}\" ({desktop['id']}); send text with `{PROG} send`")
    return 0


async def _pair(code: pairingcode.PairingCode, name: str, static: bytes, candidates) -> dict:
    try:
        ws, (host, port) = await _open(candidates, "pair")
    except ConnectionError as error:
        raise ClientError(f"cannot reach the desktop: {error}") from None
    try:
        hs = noise.handshake("pair", initiator=True, static_private=static, psk=code.secret,
                             remote_static=code.public_key)
        await ws.send(bytes(hs.write_message(messages.encode({"type": "pair", "name": name}))))
        reply = messages.decode(bytes(hs.read_message(await asyncio.wait_for(_recv(ws), 15))))
        if reply["type"] != "pair-accept":
            raise ClientError(f"unexpected handshake reply {escape(reply['type'])}")
        psk = noise.session_psk(code.secret, hs.get_handshake_hash())
        await ws.send(hs.encrypt(messages.encode({"type": "pair-confirm"})))
        answer = messages.decode(hs.decrypt(await asyncio.wait_for(_recv(ws), 15)))
        if answer["type"] == "error":
            raise ClientError(f"the desktop refused: {escape(answer['code'])}: {escape(answer['message'])}")
        if answer["type"] != "paired":
            raise ClientError(f"expected paired, got {escape(answer['type'])}")
    except ConnectionClosed:
        raise ClientError("pairing failed: the desktop closed the connection",
                          "the code may be used, expired or revoked: run `speakbridge pair` for a new one") from None
    except asyncio.TimeoutError:
        raise ClientError("the desktop did not complete pairing in time") from None
    except (messages.MessageError, Exception) as error:
        if isinstance(error, ClientError):
            raise
        raise ClientError(f"pairing failed: {escape(str(error))}") from None
    finally:
        await ws.close()
    return {
        "name": reply["name"] or "desktop",
        "id": pairingcode.device_id(code.public_key),
        "public_key": code.public_key.hex(),
        "psk": psk.hex(),
        "addresses": [host] + [a for a in code.addresses if a != host],
        "port": port,
    }


# MARK: send

_NOTHING = object()  # drain_input without an item taken from the queue (None is the end-of-input item)


class Sender:
    def __init__(self, state: State, journal: Journal, rate: float, timeout: float, extra: list[str]):
        self.state = state
        self.journal = journal
        self.rate = rate
        self.timeout = timeout
        self.extra = [_parse_hostport(x) for x in extra]
        self.desktop = state.desktop()
        self.static = state.identity()
        self.input: asyncio.Queue = asyncio.Queue()
        self.input_done = False
        self.sent_through = 0       # highest seq sent on the current connection
        # Highest seq ever sent in this session: chunks held from an earlier run count (that run may have sent them).
        # An ack or a resume's `delivered` is believed only up to it (PROTOCOL.md, "Client rules": a desktop cannot
        # have delivered what it was never sent, and believing it would drop chunks it never got).
        self.highest_sent = max((c["seq"] for c in journal.pending), default=journal.acked)
        self.last_send = 0.0
        self.last_progress = 0.0
        self.started = time.monotonic()

    def start_reader(self) -> None:
        loop = asyncio.get_running_loop()

        def read() -> None:
            for raw in sys.stdin.buffer:
                line = raw.rstrip(b"\n")
                if line.endswith(b"\r"):
                    line = line[:-1]
                text = line.decode("utf-8", errors="replace")
                if text:
                    loop.call_soon_threadsafe(self.input.put_nowait, split_line(text))
            loop.call_soon_threadsafe(self.input.put_nowait, None)

        threading.Thread(target=read, name="sb-stdin", daemon=True).start()

    def candidates(self) -> list[tuple[str, int]]:
        desktop = self.state.desktop()
        seen, out = set(), []
        for c in [(a, desktop["port"]) for a in desktop["addresses"]] + self.extra:
            if c not in seen:
                seen.add(c)
                out.append(c)
        return out

    def drain_input(self, first=_NOTHING) -> None:
        """Journals `first` (an item already taken from the queue: texts, or None for the end of input) and
        everything queued after it, in order, before any of it may be sent."""
        items = [] if first is _NOTHING else [first]
        while not self.input.empty():
            items.append(self.input.get_nowait())
        texts = []
        for item in items:
            if item is None:
                self.input_done = True
            else:
                texts += item
        if texts:
            self.journal.append(texts)

    @property
    def done(self) -> bool:
        return self.input_done and not self.journal.pending

    async def run(self) -> int:
        self.start_reader()
        backoff = 0.2
        reported = False
        while True:
            self.drain_input()
            if self.done:
                return 0
            if self.timed_out():
                return self.give_up()
            try:
                ws, where = await _open(self.candidates(), "session")
            except ConnectionError as error:
                if not reported:
                    log(f"desktop not reachable ({error}); retrying")
                    reported = True
                await self.wait_input(backoff)
                backoff = min(backoff * 2, 5)
                continue
            try:
                result = await self.session(ws)
                backoff = 0.2
                if reported:
                    log(f"connected to {where[0]}:{where[1]}")
                    reported = False
                if result is not None:
                    return result
            except (ConnectionClosed, ConnectionError, asyncio.TimeoutError) as error:
                log(f"connection lost ({error or type(error).__name__}); reconnecting")
            except Exception as error:  # a handshake that does not verify, a broken frame
                log(f"closing the connection: {error}")
            finally:
                await ws.close()
            await self.wait_input(backoff)
            backoff = min(backoff * 2, 5)

    def timed_out(self) -> bool:
        return self.timeout > 0 and time.monotonic() - self.started > self.timeout

    def give_up(self) -> int:
        log(f"{len(self.journal.pending)} chunk(s) not acknowledged after {int(self.timeout)} s; "
            "they stay in the journal and go out with the next `send`")
        return 75

    async def wait_input(self, seconds: float) -> None:
        try:
            self.drain_input(await asyncio.wait_for(self.input.get(), seconds))
        except asyncio.TimeoutError:
            pass

    async def session(self, ws) -> int | None:
        """One connection. Returns an exit code when done, None to reconnect."""
        d = self.desktop
        hs = noise.handshake("session", initiator=True, static_private=self.static, psk=bytes.fromhex(d["psk"]),
                             remote_static=bytes.fromhex(d["public_key"]))
        await ws.send(bytes(hs.write_message(messages.encode({"type": "hello", "agent": "speakbridge-client.py/1"}))))
        welcome = messages.decode(bytes(hs.read_message(await asyncio.wait_for(_recv(ws), 10))))
        if welcome["type"] != "welcome":
            raise ConnectionError(f"unexpected handshake reply {escape(welcome['type'])}")
        session = self.journal.session
        await ws.send(hs.encrypt(messages.encode({"type": "resume", "session": session})))
        resumed = False
        holds = False  # the desktop said a sink holds an unacknowledged line: no ack stall while it does
        self.sent_through = 0
        receive = asyncio.ensure_future(_recv(ws))
        new_input = asyncio.ensure_future(self.input.get())
        try:
            while True:
                # Wake for a frame, for input, or at least every 50 ms (pacing, stall check).
                await asyncio.wait({receive, new_input}, timeout=0.05, return_when=asyncio.FIRST_COMPLETED)
                if new_input.done():
                    self.drain_input(new_input.result())
                    new_input = asyncio.ensure_future(self.input.get())
                if receive.done():
                    frame = receive.result()
                    receive = asyncio.ensure_future(_recv(ws))
                    try:
                        message = messages.decode(hs.decrypt(frame))
                    except messages.MessageError:
                        continue  # a newer desktop: ignore what we cannot read
                    kind = message["type"]
                    if kind == "resume" and message["session"] == session:
                        self.journal.ack(min(message.get("delivered", 0), self.highest_sent))
                        resumed = True
                        self.last_progress = time.monotonic()
                    elif kind == "ack" and message["session"] == session:
                        seq = min(message["seq"], self.highest_sent)
                        if seq > self.journal.acked:
                            self.last_progress = time.monotonic()
                            holds = False
                        self.journal.ack(seq)
                    elif kind == "error":
                        log(f"desktop reported {escape(message['code'])}: {escape(message['message'])}")
                    elif kind == "held" and message["session"] == session:
                        # A sink on the desktop has not taken line `seq` yet; the chunks stay in the journal, and
                        # waiting for their ack is not a stall (the desktop is there and said why).
                        holds = holds or message["seq"] > self.journal.acked
                        log(f"held: the desktop's sink {escape(message['sink'])} has not taken line {message['seq']} "
                            f"yet: {escape(message['reason'])}")
                    elif kind == "bye":
                        return None
                if resumed:
                    await self.transmit(ws, hs, session)
                    if self.done:
                        await ws.send(hs.encrypt(messages.encode({"type": "bye"})))
                        return 0
                    in_flight = self.sent_through > self.journal.acked
                    if in_flight and not holds and time.monotonic() - self.last_progress > ACK_STALL:
                        log(f"no acknowledgement for {ACK_STALL} s; reconnecting")
                        return None
                if self.timed_out():
                    return self.give_up()
        finally:
            receive.cancel()
            if new_input.done() and not new_input.cancelled():
                self.drain_input(new_input.result())  # taken from the queue: journal it, never drop it
            else:
                new_input.cancel()

    async def transmit(self, ws, hs, session: str) -> None:
        """Sends pending chunks above what this connection already carried, within the window and the rate."""
        pending = [c for c in self.journal.pending if c["seq"] > self.sent_through]
        while pending:
            room = MAX_IN_FLIGHT - (self.sent_through - self.journal.acked)
            if room <= 0:
                return
            if self.rate > 0:
                if time.monotonic() - self.last_send < 1 / self.rate:
                    return
                batch = pending[:1]
            else:
                batch, size = [], 64 + len(session)
                for c in pending[:min(room, messages.MAX_BATCH)]:
                    cost = len(messages.encode({"type": "chunk", "session": "", **c})) + 1
                    if batch and size + cost > BATCH_BUDGET:
                        break
                    batch.append(c)
                    size += cost
            if len(batch) == 1:
                message = {"type": "chunk", "session": session, **batch[0]}
            else:
                message = {"type": "chunks", "session": session, "chunks": batch}
            if self.sent_through <= self.journal.acked:
                self.last_progress = time.monotonic()  # the stall clock starts with the first chunk in flight
            await ws.send(hs.encrypt(messages.encode(message)))
            self.sent_through = batch[-1]["seq"]
            self.highest_sent = max(self.highest_sent, self.sent_through)
            self.last_send = time.monotonic()
            pending = pending[len(batch):]


def send(state_dir: str, rate: float, timeout: float, extra: list[str]) -> int:
    state = State(state_dir)
    if state.desktop() is None:
        raise ClientError("this state directory is not paired with a desktop",
                          f"run `{PROG} join CODE` first (with the same --state)")
    journal = Journal(state.path("journal.jsonl"))
    if journal.pending:
        log(f"resending {len(journal.pending)} unacknowledged chunk(s) from an earlier run")
    return asyncio.run(Sender(state, journal, rate, timeout, extra).run())
