#!/usr/bin/env bash
# The browser route in headless Chromium (Debian's chromium, chromium-driver, python3-selenium):
#   vectors.py  the page's WebCrypto Noise (AESGCM) and pairing code parser against the shared and protocol vectors
#   e2e.py      the page against a real daemon and FIFO (pair, 100 lines, reload, kill -9, speech, codes, revoke)
# Debian's python3 (/usr/bin/python3) is used on purpose: python3-selenium is installed for it.
set -euo pipefail
cd "$(dirname "$0")"
for tool in chromium chromedriver /usr/bin/python3; do
  command -v "$tool" >/dev/null || { echo "Tests/web: $tool is missing (make deps-test installs chromium chromium-driver python3-selenium)"; exit 1; }
done
/usr/bin/python3 vectors.py
/usr/bin/python3 e2e.py
