"""`sbclient.py check-vectors DIR`: runs every vector file in Pairing/vectors/ (layout: vectors/README.md)."""
from __future__ import annotations

import ipaddress
import json
import os
import warnings

from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from . import messages, noise, pairingcode


class Results:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, ok: bool, what: str) -> None:
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            print(f"FAIL {what}")

    def run(self, what: str, fn) -> None:
        try:
            self.check(bool(fn()), what)
        except Exception as error:  # a vector that throws is a failed vector, not a crash
            self.check(False, f"{what}: {type(error).__name__}: {error}")


def _same_fields(code: pairingcode.PairingCode, fields: dict) -> bool:
    return (code.public_key.hex() == fields["public_key"] and code.secret.hex() == fields["secret"]
            and code.expiry == fields["expiry"] and code.port == fields["port"]
            and [ipaddress.ip_address(a) for a in code.addresses]
            == [ipaddress.ip_address(a) for a in fields["addresses"]])


def _error_of(fn) -> str | None:
    try:
        fn()
    except pairingcode.PairingCodeError as error:
        return error.name
    return None


def _version_of(fn) -> int | None:
    try:
        fn()
    except pairingcode.PairingCodeError as error:
        return error.version
    return None


def pairing_codes(doc: dict, r: Results) -> None:
    by_name = {}
    for v in doc["valid"]:
        by_name[v["name"]] = v
        r.run(f"pairing code {v['name']} parses", lambda v=v: _same_fields(pairingcode.parse(v["code"]), v["fields"]))
        r.run(f"pairing code {v['name']} encodes", lambda v=v: pairingcode.PairingCode(
            bytes.fromhex(v["fields"]["public_key"]), bytes.fromhex(v["fields"]["secret"]), v["fields"]["expiry"],
            v["fields"]["port"], v["fields"]["addresses"]).encode() == v["code"])
        r.run(f"pairing code {v['name']} desktop ID", lambda v=v: pairingcode.device_id(
            bytes.fromhex(v["fields"]["public_key"])) == v["desktop_id"])
    for v in doc["variants"]:
        r.run(f"pairing code spelling: {v['description']}",
              lambda v=v: _same_fields(pairingcode.parse(v["code"]), by_name[v["same_as"]]["fields"]))
    for v in doc["invalid"]:
        r.run(f"pairing code rejected ({v['description']}) as {v['error']}",
              lambda v=v: _error_of(lambda: pairingcode.parse(v["code"])) == v["error"])
        if "version" in v:  # unsupportedVersion names the version the code is for
            r.run(f"pairing code of version {v['version']} reported as such",
                  lambda v=v: _version_of(lambda: pairingcode.parse(v["code"])) == v["version"])
    for v in doc["expiry"]:
        r.run(f"pairing code expiry: {v['description']}",
              lambda v=v: _error_of(lambda: pairingcode.parse(v["code"]).check_not_expired(v["now"])) == v["error"])


def handshakes(doc: dict, r: Results) -> None:
    r.check(doc["protocol_name"].encode() == noise.PROTOCOL_NAME, "protocol name")
    for h in doc["handshakes"]:
        r.run(f"handshake {h['name']}", lambda h=h: _replay(h, r))


def _replay(h: dict, r: Results) -> bool:
    name = h["name"]
    x = {k: bytes.fromhex(v) for k, v in h.items()
         if k.endswith(("_private", "_public")) or k in ("psk", "handshake_hash", "session_psk", "prologue")}
    r.check(x["prologue"] == noise.PROLOGUE[h["intent"]], f"{name}: prologue")
    r.check(noise.PATH[h["intent"]] == h["path"], f"{name}: path")
    for role in ("client", "desktop"):
        r.check(noise.public_key(x[f"{role}_static_private"]) == x[f"{role}_static_public"], f"{name}: {role} static")
        r.check(noise.public_key(x[f"{role}_ephemeral_private"]) == x[f"{role}_ephemeral_public"],
                f"{name}: {role} ephemeral")
    if "client_id" in h:
        r.check(pairingcode.device_id(x["client_static_public"]) == h["client_id"], f"{name}: client ID")
        r.check(pairingcode.device_id(x["desktop_static_public"]) == h["desktop_id"], f"{name}: desktop ID")
    if "pairing_code" in h:
        code = pairingcode.parse(h["pairing_code"])
        r.check(code.public_key == x["desktop_static_public"] and code.secret == x["psk"],
                f"{name}: the pairing code carries the desktop key and the psk")
    client = noise.handshake(h["intent"], initiator=True, static_private=x["client_static_private"], psk=x["psk"],
                             remote_static=x["desktop_static_public"],
                             ephemeral_private=x["client_ephemeral_private"])
    desktop = noise.handshake(h["intent"], initiator=False, static_private=x["desktop_static_private"],
                              psk=x["psk"], ephemeral_private=x["desktop_ephemeral_private"])
    for i, step in enumerate(h["messages"]):
        payload = step["payload"].encode("utf-8")
        wire = bytes.fromhex(step["message"])
        sender, receiver = (client, desktop) if step["direction"] == "client->desktop" else (desktop, client)
        label = f"{name}: message {i + 1} ({step['kind']}, {step['direction']})"
        if step["kind"] == "handshake":
            r.check(bytes(sender.write_message(payload)) == wire, f"{label} written byte for byte")
            r.check(bytes(receiver.read_message(wire)) == payload, f"{label} read")
        else:
            r.check(sender.encrypt(payload) == wire, f"{label} encrypted byte for byte")
            r.check(receiver.decrypt(wire) == payload, f"{label} decrypted")
        decoded = messages.decode(payload)
        r.check(messages.encode(decoded) == payload, f"{label} payload is canonical")
    r.check(client.get_handshake_hash() == x["handshake_hash"], f"{name}: client handshake hash")
    r.check(desktop.get_handshake_hash() == x["handshake_hash"], f"{name}: desktop handshake hash")
    if "session_psk" in x:
        r.check(noise.session_psk(x["psk"], x["handshake_hash"]) == x["session_psk"], f"{name}: per-pair psk")
        r.check(h["session_psk_label"].encode() == noise.SESSION_PSK_LABEL, f"{name}: psk label")
    return True


def frames(doc: dict, r: Results) -> None:
    aead = ChaCha20Poly1305(bytes.fromhex(doc["key"]))
    for f in doc["frames"]:
        nonce = bytes(4) + f["nonce"].to_bytes(8, "little")
        plaintext = f["plaintext"].encode("utf-8")
        wire = bytes.fromhex(f["ciphertext"])
        label = f"frame {f['description']}"
        r.run(f"{label}: encrypts", lambda: aead.encrypt(nonce, plaintext, b"") == wire)
        r.run(f"{label}: decrypts", lambda: aead.decrypt(nonce, wire, b"") == plaintext)
        r.run(f"{label}: parses as {f['type']}", lambda: messages.decode(plaintext)["type"] == f["type"])
        r.run(f"{label}: canonical", lambda: messages.encode(messages.decode(plaintext)) == plaintext)
    for a in doc["accepted"]:
        def accepted(a=a):
            m = messages.decode(a["plaintext"].encode("utf-8"))
            return m["type"] == a["type"] and messages.encode(m).decode("utf-8") == a["canonical"]
        r.run(f"accepted: {a['description']}", accepted)
    for j in doc["rejected"]:
        data = bytes.fromhex(j["plaintext_hex"]) if "plaintext_hex" in j else j["plaintext"].encode("utf-8")

        def rejected(data=data, j=j):
            try:
                messages.decode(data)
            except messages.MessageError as error:
                return error.code == j["error"]
            return False
        r.run(f"rejected as {j['error']}: {j['description']}", rejected)


def check(directory: str) -> int:
    # noiseprotocol warns when an ephemeral key is injected; replaying vectors is exactly what that is for.
    warnings.filterwarnings("ignore", message="One of ephemeral keypairs is already set")
    r = Results()
    files = {"pairing-codes.json": pairing_codes, "handshakes.json": handshakes, "frames.json": frames}
    for name, fn in files.items():
        path = os.path.join(directory, name)
        if not os.path.exists(path):
            r.check(False, f"{path} is missing")
            continue
        with open(path, encoding="utf-8") as f:
            fn(json.load(f), r)
    print(f"check-vectors: {r.passed} passed, {r.failed} failed")
    return 0 if r.failed == 0 else 1
