#!/usr/bin/python3
"""Runs Tests/web/vectors.js in headless Chromium: the page's WebCrypto Noise (AESGCM) against the shared cacophony
vectors and Pairing/vectors/handshakes-aesgcm.json, and its pairing code parser against pairing-codes.json.
Files are served over plain HTTP on 127.0.0.1 (a secure context, so WebCrypto is available)."""
import functools
import http.server
import os
import shutil
import sys
import tempfile
import threading
import time

from browser import chromium

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
SHARED = os.environ.get('SPEAKBRIDGE_SHARED', os.path.abspath(os.path.join(REPO, '..', 'shared')))


class Handler(http.server.SimpleHTTPRequestHandler):
    def translate_path(self, path):
        if path.startswith('/shared/'):
            return os.path.join(SHARED, path[len('/shared/'):].split('?')[0])
        return super().translate_path(path)

    def log_message(self, *args):
        pass


Handler.extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, '.js': 'text/javascript'}


def main():
    if not os.path.exists(os.path.join(SHARED, 'vectors/noise/cacophony_IK_IKpsk1_IKpsk2_AESGCM.json')):
        print(f'vectors.py: skipped: no shared AESGCM vectors at {SHARED}/vectors/noise (set SPEAKBRIDGE_SHARED)')
        return 0
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), functools.partial(Handler, directory=REPO))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    profile = tempfile.mkdtemp(prefix='sb-web-vectors-')
    driver = chromium(profile=profile)
    try:
        driver.get(f'http://127.0.0.1:{server.server_address[1]}/Tests/web/vectors.html')
        deadline = time.time() + 30
        results = None
        while time.time() < deadline and results is None:
            results = driver.execute_script('return window.__results || null')
            time.sleep(0.1)
    finally:
        driver.quit()
        server.shutdown()
        shutil.rmtree(profile, ignore_errors=True)
    if results is None:
        print('vectors.py: FAIL: no results within 30 s')
        return 1
    for f in results['failures']:
        print('vectors.py: FAIL:', f)
    print(f"vectors.py: {results['passed']} checks passed, {len(results['failures'])} failed")
    return 1 if results['failures'] else 0


if __name__ == '__main__':
    sys.exit(main())
