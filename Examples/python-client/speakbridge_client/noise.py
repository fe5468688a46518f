"""Noise IKpsk1 for SpeakBridge (PROTOCOL.md, "Noise"), on the `noiseprotocol` package."""
from __future__ import annotations

import hashlib
import hmac

from noise.connection import Keypair, NoiseConnection

PROTOCOL_NAME = b"Noise_IKpsk1_25519_ChaChaPoly_SHA256"
PROLOGUE = {"pair": b"speakbridge.v1 pair", "session": b"speakbridge.v1 session"}
PATH = {"pair": "/speakbridge.v1/pair", "session": "/speakbridge.v1/session"}
SUBPROTOCOL = "speakbridge.v1"
SESSION_PSK_LABEL = b"speakbridge.v1 session psk"


def hkdf_sha256(ikm: bytes, salt: bytes, info: bytes, length: int) -> bytes:
    prk = hmac.new(salt or bytes(32), ikm, hashlib.sha256).digest()
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        out += block
        counter += 1
    return out[:length]


def session_psk(pairing_secret: bytes, pairing_handshake_hash: bytes) -> bytes:
    return hkdf_sha256(pairing_secret, pairing_handshake_hash, SESSION_PSK_LABEL, 32)


def handshake(intent: str, *, initiator: bool, static_private: bytes, psk: bytes,
              remote_static: bytes | None = None, ephemeral_private: bytes | None = None) -> NoiseConnection:
    """A started handshake. `ephemeral_private` only to replay test vectors."""
    n = NoiseConnection.from_name(PROTOCOL_NAME)
    if initiator:
        n.set_as_initiator()
        n.set_keypair_from_public_bytes(Keypair.REMOTE_STATIC, remote_static)
    else:
        n.set_as_responder()
    n.set_prologue(PROLOGUE[intent])
    n.set_psks(psk=psk)
    n.set_keypair_from_private_bytes(Keypair.STATIC, static_private)
    if ephemeral_private is not None:
        n.set_keypair_from_private_bytes(Keypair.EPHEMERAL, ephemeral_private)
    n.start_handshake()
    return n


def public_key(private: bytes) -> bytes:
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
    return X25519PrivateKey.from_private_bytes(private).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
