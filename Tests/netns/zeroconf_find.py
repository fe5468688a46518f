#!/usr/bin/env python3
"""Find one _speakbridge._tcp service with python-zeroconf (an mDNS stack independent of avahi).

Usage: zeroconf_find.py NAME INTERFACE_ADDRESS TIMEOUT_SECONDS

Runs inside a test-LAN host (Tests/netns/lan.sh exec HOST ...). Binds only to
INTERFACE_ADDRESS, IPv4 only. Prints one JSON object on stdout: name, port, addresses,
server, and txt (the TXT strings in wire order); exits 1 if not found in time.
"""
import json
import sys
import time

from zeroconf import IPVersion, ServiceBrowser, ServiceListener, Zeroconf

SERVICE_TYPE = "_speakbridge._tcp.local."


class Seen(ServiceListener):
    def __init__(self):
        self.names = set()

    def add_service(self, zc, type_, name):
        self.names.add(name)

    def update_service(self, zc, type_, name):
        self.names.add(name)

    def remove_service(self, zc, type_, name):
        self.names.discard(name)


def txt_strings(raw):
    """Split TXT rdata (length-prefixed strings) in wire order."""
    out, i = [], 0
    while i < len(raw):
        n = raw[i]
        out.append(raw[i + 1:i + 1 + n].decode("utf-8", "replace"))
        i += 1 + n
    return out


def main():
    want, address, timeout = sys.argv[1], sys.argv[2], float(sys.argv[3])
    full = f"{want}.{SERVICE_TYPE}"
    zc = Zeroconf(interfaces=[address], ip_version=IPVersion.V4Only)
    seen = Seen()
    ServiceBrowser(zc, SERVICE_TYPE, seen)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if full in seen.names:
                info = zc.get_service_info(SERVICE_TYPE, full, timeout=3000)
                if info is not None:
                    print(json.dumps({
                        "name": want,
                        "port": info.port,
                        "addresses": info.parsed_addresses(),
                        "server": info.server,
                        "txt": txt_strings(info.text or b""),
                    }))
                    return 0
            time.sleep(0.05)
        print(json.dumps({"error": "not found", "seen": sorted(seen.names)}))
        return 1
    finally:
        zc.close()


if __name__ == "__main__":
    sys.exit(main())
