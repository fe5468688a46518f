"""JSON messages (PROTOCOL.md, "Messages"): the parser rules and the canonical encoding."""
from __future__ import annotations

import json
import math
import re

MAX_FRAME = 65535
MAX_PLAINTEXT = MAX_FRAME - 16
MAX_DEPTH = 8
MAX_SEQ = 1 << 53
MAX_TEXT = 16384
MAX_BATCH = 512
SESSION_RE = re.compile(r"[A-Za-z0-9._-]{1,64}\Z")

TYPES = {"pair", "pair-accept", "pair-confirm", "paired", "hello", "welcome", "resume", "chunk", "chunks", "ack",
         "held", "bye", "error"}
MAX_HELD_SINK = 64
MAX_HELD_REASON = 512


class MessageError(Exception):
    """`code` is the error code the desktop would answer: malformed, unknown-type or too-large."""

    def __init__(self, code: str, detail: str):
        super().__init__(f"{code}: {detail}")
        self.code = code


def _malformed(detail: str) -> MessageError:
    return MessageError("malformed", detail)


def _no_duplicates(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise _malformed(f"duplicate key {key!r}")
        seen[key] = value
    return seen


def _reject_constant(name):
    raise _malformed(f"{name} is not JSON")


def _finite_float(text):
    value = float(text)
    if not math.isfinite(value):
        raise _malformed("number out of range")
    return value


def _check_tree(value, depth: int) -> None:
    """Depth (outermost container = 1) and lone surrogates, which Python's json lets through."""
    if isinstance(value, (dict, list)):
        if depth + 1 > MAX_DEPTH:
            raise _malformed("nested too deeply")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(key, str):
                _check_string(key)
            _check_tree(item, depth + 1)
    elif isinstance(value, str):
        _check_string(value)


def _check_string(s: str) -> None:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise _malformed("lone surrogate") from None


def parse_json(data: bytes):
    if len(data) > MAX_FRAME:
        raise _malformed("larger than one frame")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _malformed("invalid UTF-8") from None
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant,
                           parse_float=_finite_float)
    except MessageError:
        raise
    except (ValueError, RecursionError) as error:
        raise _malformed(f"not JSON: {error}") from None
    _check_tree(value, 0)
    return value


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _string(obj: dict, key: str, max_bytes: int, required: bool = True, null_is_absent: bool = True):
    v = obj.get(key)
    if v is None and (not required) and (key not in obj or null_is_absent):
        return None
    if not isinstance(v, str):
        raise _malformed(f"{key!r} must be a string")
    if len(v.encode("utf-8")) > max_bytes:
        raise MessageError("too-large", f"{key!r} longer than {max_bytes} bytes")
    return v


def _seq(v, key: str, minimum: int) -> int:
    if not _is_int(v) or v < minimum or v > MAX_SEQ:
        raise _malformed(f"{key!r} must be an integer in {minimum}...2^53")
    return v


def _session(obj: dict) -> str:
    v = obj.get("session")
    if not isinstance(v, str) or not SESSION_RE.match(v):
        raise _malformed("'session' must be 1-64 characters of A-Z a-z 0-9 . _ -")
    return v


def _chunk(obj: dict) -> dict:
    if "seq" not in obj:
        raise _malformed("chunk without 'seq'")
    chunk = {"seq": _seq(obj["seq"], "seq", 1), "text": _string(obj, "text", MAX_TEXT)}
    final = obj.get("final")
    if final is not None and not isinstance(final, bool):
        raise _malformed("'final' must be a boolean")
    chunk["final"] = True if final is None else final
    for key, limit in (("lang", 35), ("speaker", 64)):
        v = _string(obj, key, limit, required=False)
        if v is not None:
            chunk[key] = v
    for key in ("start", "end"):
        v = obj.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise _malformed(f"{key!r} must be a number of seconds >= 0")
        chunk[key] = float(v)  # seconds are numbers; the canonical form writes them with a fraction
    return chunk


def decode(data: bytes) -> dict:
    """Returns the message as a dict with the members PROTOCOL.md lists (defaults filled in)."""
    value = parse_json(data)
    if not isinstance(value, dict):
        raise _malformed("not a JSON object")
    kind = value.get("type")
    if not isinstance(kind, str):
        raise _malformed("missing 'type'")
    if kind.startswith("config-") and len(kind.encode("utf-8")) <= 32:
        return dict(value)  # reserved for config transfer: kept whole, members in their order
    if kind not in TYPES:
        raise MessageError("unknown-type", kind[:64])
    out = {"type": kind}
    if kind == "pair":
        out["name"] = _string(value, "name", 64, required=False) or ""
    elif kind == "pair-accept":
        out["name"] = _string(value, "name", 64, required=False) or ""
        out["id"] = _string(value, "id", 64)
    elif kind == "hello":
        out["agent"] = _string(value, "agent", 128, required=False) or ""
    elif kind == "resume":
        if value.get("delivered") is not None:  # parser rule 7: null counts as absent
            out["delivered"] = _seq(value["delivered"], "delivered", 0)
        out["session"] = _session(value)
    elif kind == "chunk":
        out["session"] = _session(value)
        out.update(_chunk(value))
    elif kind == "chunks":
        items = value.get("chunks")
        if not isinstance(items, list):
            raise _malformed("'chunks' must be an array")
        if not items:
            raise _malformed("'chunks' is empty")
        if len(items) > MAX_BATCH:
            raise MessageError("too-large", f"more than {MAX_BATCH} chunks in one batch")
        chunks = []
        for item in items:
            if not isinstance(item, dict):
                raise _malformed("chunk is not an object")
            chunks.append(_chunk(item))
        for a, b in zip(chunks, chunks[1:]):
            if b["seq"] != a["seq"] + 1:
                raise _malformed("sequence numbers in a batch must be consecutive")
        out["session"] = _session(value)
        out["chunks"] = chunks
    elif kind == "ack":
        out["session"] = _session(value)
        if "seq" not in value:
            raise _malformed("ack without 'seq'")
        out["seq"] = _seq(value["seq"], "seq", 0)
    elif kind == "held":
        out["session"] = _session(value)
        if "seq" not in value:
            raise _malformed("held without 'seq'")
        out["seq"] = _seq(value["seq"], "seq", 1)
        out["sink"] = _string(value, "sink", MAX_HELD_SINK)
        out["reason"] = _string(value, "reason", MAX_HELD_REASON)
    elif kind == "error":
        out["code"] = _string(value, "code", 64)
        out["message"] = _string(value, "message", 1024, required=False) or ""
        if value.get("expected") is not None:  # parser rule 7: null counts as absent
            out["expected"] = _seq(value["expected"], "expected", 1)
    return out


# Canonical encoding: members in PROTOCOL.md's table order, no whitespace.

# Written as \uXXXX besides the C0 controls: DEL, the C1 controls, the bidi formatting characters and the line and
# paragraph separators (PROTOCOL.md, "Canonical encoding").
_ESCAPED = ({0x7F, 0x061C, 0x200E, 0x200F, 0x2028, 0x2029} | set(range(0x80, 0xA0)) | set(range(0x202A, 0x202F))
            | set(range(0x2066, 0x206A)))


def _encode_string(s: str) -> str:
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif o < 0x20 or o in _ESCAPED:
            out.append(f"\\u{o:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _encode_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _encode_float(v) if math.isfinite(v) else "null"
    if isinstance(v, str):
        return _encode_string(v)
    if isinstance(v, list):
        return "[" + ",".join(_encode_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(_encode_string(k) + ":" + _encode_value(x) for k, x in v.items()) + "}"
    if v is None:
        return "null"
    raise TypeError(type(v))


def _encode_float(v: float) -> str:
    """PROTOCOL.md's number form: the shortest round-trip digits (as `repr`), positional for 0 and magnitudes from
    0.0001 to 2^53, else exponential (`1e-05`, `9.1e+15`). `repr` already writes that except from 2^53 to 1e16,
    which it writes positionally; such a value is an integer, so its digits are those of `repr`'s integer part."""
    text = repr(v)
    if abs(v) <= 2.0 ** 53 or "e" in text:
        return text
    sign = "-" if text.startswith("-") else ""
    whole = text.lstrip("-").split(".")[0]
    digits = whole.rstrip("0")
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{sign}{mantissa}e+{len(whole) - 1:02d}"


ORDER = {
    "pair": ["name"], "pair-accept": ["name", "id"], "pair-confirm": [], "paired": [], "hello": ["agent"],
    "welcome": [], "resume": ["session", "delivered"], "chunk": ["session", "seq", "text", "final", "lang",
                                                                   "speaker", "start", "end"],
    "chunks": ["session", "chunks"], "ack": ["session", "seq"], "held": ["session", "seq", "sink", "reason"],
    "bye": [], "error": ["code", "message", "expected"],
}
CHUNK_ORDER = ["seq", "text", "final", "lang", "speaker", "start", "end"]


def _chunk_object(c: dict) -> dict:
    c = dict(c)
    c.setdefault("final", True)
    return {k: c[k] for k in CHUNK_ORDER if c.get(k) is not None}


def encode(message: dict) -> bytes:
    kind = message["type"]
    out = {"type": kind}
    if kind not in ORDER:  # config-*: type first, then the other members as given
        out.update((k, v) for k, v in message.items() if k != "type")
        return _encode_value(out).encode("utf-8")
    m = dict(message)
    if kind == "chunk":
        m.setdefault("final", True)
    for key in {"pair": ["name"], "pair-accept": ["name"], "hello": ["agent"], "error": ["message"]}.get(kind, []):
        m.setdefault(key, "")  # written even when empty
    for key in ORDER[kind]:
        if m.get(key) is None:
            continue
        out[key] = [_chunk_object(c) for c in m[key]] if key == "chunks" else m[key]
    return _encode_value(out).encode("utf-8")
