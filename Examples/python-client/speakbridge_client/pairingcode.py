"""Pairing codes and device IDs (PROTOCOL.md, "Identity and device IDs" and "Pairing code")."""
from __future__ import annotations

import hashlib
import ipaddress
import struct
import zlib
from dataclasses import dataclass, field

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_VALUES: dict[str, int] = {}
for _i, _c in enumerate(ALPHABET):
    _VALUES[_c] = _i
    _VALUES[_c.lower()] = _i
for _c, _v in (("O", 0), ("I", 1), ("L", 1)):
    _VALUES[_c] = _v
    _VALUES[_c.lower()] = _v
_IGNORABLE = set(" \t\r\n-")

PREFIX = "SB1:"
HEADER = 73          # version, flags, key, secret, expiry, port, count
CHECKSUM = 4
MINIMUM = HEADER + CHECKSUM
MAX_ADDRESSES = 8
POSSIBLE_LENGTHS = {MINIMUM + 5 * a + 17 * b for a in range(9) for b in range(9 - a)}


class PairingCodeError(Exception):
    """`name` is the error name of PROTOCOL.md and the vectors."""

    def __init__(self, name: str, detail: str = "", version: int | None = None):
        super().__init__(f"{name}: {detail}" if detail else name)
        self.name = name
        self.version = version  # unsupportedVersion: the protocol version the code is for


def b32encode(data: bytes) -> str:
    out = []
    buffer = 0
    bits = 0
    for byte in data:
        buffer = (buffer << 8) | byte
        bits += 8
        while bits >= 5:
            bits -= 5
            out.append(ALPHABET[(buffer >> bits) & 31])
        buffer &= (1 << bits) - 1
    if bits:
        out.append(ALPHABET[(buffer << (5 - bits)) & 31])
    return "".join(out)


@dataclass
class _Bits:
    data: bytearray = field(default_factory=bytearray)
    leftover_bits: int = 0
    leftover_value: int = 0
    symbols: int = 0
    last_position: int = 0


def _decode_bits(text: str, first_position: int) -> _Bits:
    result = _Bits()
    buffer = 0
    for i, ch in enumerate(text):
        if ch in _IGNORABLE:
            continue
        value = _VALUES.get(ch)
        if value is None:
            raise PairingCodeError("invalidCharacter", f"{ch!r} at position {first_position + i}")
        buffer = (buffer << 5) | value
        result.leftover_bits += 5
        if result.leftover_bits >= 8:
            result.leftover_bits -= 8
            result.data.append((buffer >> result.leftover_bits) & 0xFF)
            buffer &= (1 << result.leftover_bits) - 1
        result.symbols += 1
        result.last_position = first_position + i
    result.leftover_value = buffer
    return result


def b32decode(text: str) -> bytes:
    bits = _decode_bits(text, 1)
    if bits.leftover_bits >= 5 or bits.leftover_value:
        raise ValueError("not a canonical Crockford base32 string")
    return bytes(bits.data)


def device_id(public_key: bytes) -> str:
    symbols = b32encode(hashlib.sha256(public_key).digest()[:10])
    return "-".join(symbols[i:i + 4] for i in range(0, 16, 4))


def parse_device_id(text: str) -> bytes:
    bits = _decode_bits(text, 1)
    if bits.symbols != 16:
        raise ValueError("a device ID has 16 characters")
    return bytes(bits.data)


@dataclass
class PairingCode:
    public_key: bytes
    secret: bytes
    expiry: int
    port: int
    addresses: list[str]

    def encode(self) -> str:
        payload = bytearray([1, 0]) + self.public_key + self.secret + struct.pack(">IHB", self.expiry, self.port,
                                                                                 len(self.addresses))
        for text in self.addresses:
            address = ipaddress.ip_address(text)
            payload.append(4 if address.version == 4 else 6)
            payload += address.packed
        return PREFIX + b32encode(bytes(payload) + struct.pack(">I", zlib.crc32(payload)))

    def check_not_expired(self, now: int) -> None:
        if now >= self.expiry:
            raise PairingCodeError("expired", f"the code expired {now - self.expiry} s ago")


def _crc_ok(data: bytes) -> bool:
    return len(data) >= CHECKSUM and zlib.crc32(data[:-CHECKSUM]) == int.from_bytes(data[-CHECKSUM:], "big")


def _split_prefix(text: str) -> tuple[str, int]:
    i = 0
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    rest = text[i:]
    if len(rest) < 2 or rest[:2].upper() != "SB":
        raise PairingCodeError("missingPrefix")
    j = 2
    while j < len(rest) and rest[j] in "0123456789":
        j += 1
    digits = rest[2:j]
    if not digits or j >= len(rest) or rest[j] != ":":
        raise PairingCodeError("missingPrefix")
    if digits != "1":
        if len(digits) <= 3 and (digits[0] != "0" or len(digits) == 1):
            raise PairingCodeError("unsupportedVersion", f"version {int(digits)}", version=int(digits))
        raise PairingCodeError("missingPrefix")
    return rest[j + 1:], i + j + 2


def _claimed_length(data: bytes) -> int | None:
    count = data[HEADER - 1]
    if count > MAX_ADDRESSES:
        return None
    length = HEADER
    for _ in range(count):
        if length >= len(data):
            return 1 << 62
        family = data[length]
        if family == 4:
            length += 5
        elif family == 6:
            length += 17
        else:
            return None
    return length + CHECKSUM


def _parse_payload(payload: bytes) -> PairingCode:
    def need(offset: int, size: int) -> None:
        if offset + size > len(payload):
            raise PairingCodeError("truncated")

    need(0, 1)
    if payload[0] != 1:
        raise PairingCodeError("unsupportedVersion", f"payload version {payload[0]}", version=payload[0])
    need(1, 1)
    if payload[1] != 0:
        raise PairingCodeError("unknownFlags", f"flags 0x{payload[1]:02x}")
    need(2, 71)
    public_key = payload[2:34]
    secret = payload[34:66]
    expiry, port, count = struct.unpack(">IHB", payload[66:73])
    if count > MAX_ADDRESSES:
        raise PairingCodeError("tooManyAddresses", str(count))
    offset = 73
    addresses = []
    for _ in range(count):
        need(offset, 1)
        family = payload[offset]
        offset += 1
        size = {4: 4, 6: 16}.get(family)
        if size is None:
            raise PairingCodeError("invalidAddressFamily", f"0x{family:02x}")
        need(offset, size)
        addresses.append(str(ipaddress.ip_address(payload[offset:offset + size])))
        offset += size
    if offset != len(payload):
        raise PairingCodeError("trailingBytes")
    return PairingCode(public_key, secret, expiry, port, addresses)


def parse(text: str) -> PairingCode:
    """Parses a code exactly as PROTOCOL.md, "Parsing", says: the first failing step decides the error."""
    body, offset = _split_prefix(text)
    bits = _decode_bits(body, offset)
    data = bytes(bits.data)
    if len(data) < MINIMUM:
        raise PairingCodeError("truncated")
    if _crc_ok(data):
        if bits.leftover_bits >= 5:
            raise PairingCodeError("trailingBytes")
        if bits.leftover_value:
            raise PairingCodeError("invalidCharacter", f"last symbol at position {bits.last_position}")
        return _parse_payload(data[:-CHECKSUM])
    for end in range(MINIMUM, len(data)):
        if _crc_ok(data[:end]):
            raise PairingCodeError("trailingBytes")
    if len(data) not in POSSIBLE_LENGTHS:
        wanted = _claimed_length(data)
        if wanted is not None and wanted > len(data):
            raise PairingCodeError("truncated")
    raise PairingCodeError("checksumMismatch")
