#!/usr/bin/python3
"""The browser route end to end: a real daemon (SPEAKBRIDGE_BIN) with a real FIFO sink, its HTTPS page in headless
Chromium (390x844, trusting the desktop's certificate by its key only), the page's real WebCrypto, IndexedDB and
WebSocket. The one double is the speech recognizer (fake_speech.js).

  0. a fresh daemon (no browser device) has no HTTPS listener; pair --web starts it, and its terminal QR decodes
     (zbarimg) to the page's URL
  1. pair --web --json → open the URL → '#sb-status' says paired; `devices --json` lists a 'browser' device;
     a second tab of the same browser refuses to send
  2. 100 lines through the text box → all in the FIFO once, in order; a line without Enter goes after a pause
  3. reload the page mid-stream → exactly once
  4. kill -9 the daemon mid-stream and restart it (a browser device is paired: its page listens at once) → exactly once
  5. dictation through SpeechRecognition: interim words greyed, each final result one chunk (with lang, start,
     end); config-pull refused
  5c. the FIFO's reader goes away: the sink holds the next line (the daemon's `held` after a second without a
     reader) → the page marks it held with the sink's reason; a reader again → it is delivered, once
  6. the used code again (fresh browser) → a clear message; an expired code → a clear message
  7. devices revoke → the page says revoked and sends nothing more
With SCREENSHOTS=1 it also writes docs/web-pairing.png, web-dictating.png, web-held.png, web-code-used.png,
web-revoked.png.
"""
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from selenium.webdriver.common.by import By

from browser import chromium

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, '..', '..'))
BIN = os.environ.get('SPEAKBRIDGE_BIN', os.path.join(REPO, '.build/debug/speakbridge'))
SHOTS = os.environ.get('SCREENSHOTS', '0') == '1'
FAKE_SPEECH = open(os.path.join(HERE, 'fake_speech.js')).read()


def fail(message):
    raise AssertionError(message)


def wait(what, predicate, timeout=20.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    fail(f'timed out waiting for {what}')


class FifoReader:
    """Reads the FIFO sink's lines; reopens it when the daemon (the writer) goes away. `hold()` closes the read
    end and keeps it closed (the sink then has no reader) until `release()`."""

    def __init__(self, path):
        self.path = path
        self.lines = []
        self.lock = threading.Lock()
        self.is_open = threading.Event()  # set while the read end is open
        self.holding = threading.Event()
        threading.Thread(target=self.run, daemon=True).start()

    def run(self):
        pending = b''
        while True:
            while self.holding.is_set():
                time.sleep(0.05)
            # O_NONBLOCK: the open does not wait for a writer, and reading can stop for hold() between lines.
            try:
                fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
            except FileNotFoundError:
                return  # the test is over: its directory is gone
            self.is_open.set()
            try:
                while not self.holding.is_set():
                    ready, _, _ = select.select([fd], [], [], 0.05)
                    if not ready:
                        continue
                    data = os.read(fd, 65536)
                    if not data:  # no writer (the daemon is gone or not started yet): open again
                        time.sleep(0.05)
                        break
                    pending += data
                    *complete, pending = pending.split(b'\n')
                    with self.lock:
                        self.lines += [line.decode('utf-8') for line in complete]
            finally:
                os.close(fd)
                self.is_open.clear()

    def hold(self):
        self.holding.set()
        wait('the FIFO reader closed', lambda: not self.is_open.is_set(), timeout=5)

    def release(self):
        self.holding.clear()

    def snapshot(self):
        with self.lock:
            return list(self.lines)


class Desktop:
    def __init__(self, tmp):
        self.home = os.path.join(tmp, 'desk')
        self.fifo = os.path.join(tmp, 'out.fifo')
        os.mkfifo(self.fifo, 0o600)
        self.reader = FifoReader(self.fifo)
        self.log = open(os.path.join(tmp, 'daemon.log'), 'ab')
        self.proc = None
        self.port = 0
        self.web_port = 0

    def start(self, lifetime=120, listening=True):
        """Starts the daemon; `listening`: whether its HTTPS front must listen at once (a browser device is paired)
        or must not (none is: it starts with the first `pair --web`)."""
        args = [BIN, 'serve', '--home', self.home, '--listen', f'127.0.0.1:{self.port}', '--web-port', str(self.web_port),
                '--web-root', os.path.join(REPO, 'Web'), '--no-mdns', '--sink', 'fifo:' + self.fifo,
                '--pairing-lifetime', str(lifetime)]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self.log)
        status = wait('the daemon', lambda: self.try_status(), timeout=20)
        self.port = status['port']
        web = status['web']
        if not web.get('enabled'):
            fail(f"the browser route is off: {web.get('reason')}")
        if web.get('listening', True) != listening:
            fail(f"the HTTPS front {'does not listen' if listening else 'listens'} at start: {web}")
        if listening:
            self.web_port = web['port']
        return status

    def web_status(self):
        """status --json's web object once the front listens (and remembers its port for restarts)."""
        web = json.loads(self.cli('status', '--json').stdout)['web']
        if not web.get('listening', True):
            fail(f'the HTTPS front does not listen: {web}')
        self.web_port = web['port']
        return web

    def try_status(self):
        if self.proc.poll() is not None:
            fail(f'the daemon exited with {self.proc.returncode}')
        r = self.cli('status', '--json', check=False)
        return json.loads(r.stdout) if r.returncode == 0 else None

    def cli(self, *args, check=True):
        r = subprocess.run([BIN, *args, '--home', self.home], capture_output=True, text=True, timeout=20)
        if check and r.returncode != 0:
            fail(f'speakbridge {" ".join(args)} failed: {r.stderr}')
        return r

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def status_text(driver):
    return driver.find_element(By.ID, 'sb-status').text


def states(driver):
    return driver.execute_script(
        "return [...document.querySelectorAll('#sb-log li')].map(li => [li.querySelector('.text').textContent, li.dataset.state])")


def type_lines(driver, lines):
    box = driver.find_element(By.ID, 'sb-text')
    for line in lines:
        box.send_keys(line + '\n')


def expect_exactly_once(desktop, expected, what):
    wait(f'{what}: {len(expected)} lines in the FIFO', lambda: len(desktop.reader.snapshot()) >= len(expected), 30)
    time.sleep(0.5)  # a duplicate would arrive right behind
    got = desktop.reader.snapshot()
    if got != expected:
        missing = [x for x in expected if x not in got]
        dupes = sorted({x for x in got if got.count(x) > 1})
        fail(f'{what}: FIFO differs (missing {missing[:5]}, duplicated {dupes[:5]}, {len(got)} lines for {len(expected)})')
    print(f'e2e.py: ok: {what}: {len(expected)} lines, each once, in order')


def shot(driver, name):
    if SHOTS:
        os.makedirs(os.path.join(REPO, 'docs'), exist_ok=True)
        driver.save_screenshot(os.path.join(REPO, 'docs', name))


def main():
    tmp = tempfile.mkdtemp(prefix='sb-web-')
    desktop = Desktop(tmp)
    drivers = []
    try:
        # 0. no browser device yet: no HTTPS front (status says why); pair --web starts it before showing the QR,
        # which decodes (zbarimg) to the page's URL, with the code in the fragment
        status = desktop.start(lifetime=120, listening=False)
        assert 'no browser device paired' in status['web']['reason'], status['web']
        print('e2e.py: ok: no HTTPS front before a browser device is paired or pair --web asks')
        shown = subprocess.run([BIN, 'pair', '--web', '--home', desktop.home], capture_output=True, text=True,
                               timeout=20, env={**os.environ, 'COLUMNS': '80', 'LINES': '40'})
        web = desktop.web_status()
        spki = web['spki']
        assert web['fingerprint'].count(':') == 31, web
        screen, image = os.path.join(tmp, 'qr.txt'), os.path.join(tmp, 'qr.pgm')
        with open(screen, 'w') as f:
            f.write(shown.stdout)
        subprocess.run(['python3', os.path.join(REPO, 'Tests/python/terminal_to_pgm.py'), screen, image, 'dark'], check=True)
        decoded = subprocess.run(['zbarimg', '-q', '--raw', image], capture_output=True, text=True).stdout.strip()
        url_line = shown.stdout.strip().splitlines()[-1]
        assert decoded.lower() == url_line.lower() and url_line.startswith('https://127.0.0.1:') and '#SB1:' in decoded, \
            (decoded, url_line)
        print('e2e.py: ok: the QR of pair --web decodes to', url_line[:40] + '…')
        first = json.loads(desktop.cli('pair', '--web', '--json').stdout)
        assert first['url'].startswith('https://127.0.0.1:') and '#SB1:' in first['url'] and first['code'] in first['url']
        profile = os.path.join(tmp, 'phone')
        driver = chromium(spki=spki, profile=profile, inject=FAKE_SPEECH)
        drivers.append(driver)

        # 1. pair
        driver.get(first['url'])
        wait('paired and connected', lambda: driver.find_element(By.ID, 'sb-status').get_attribute('data-state') == 'connected')
        assert 'paired' in status_text(driver), status_text(driver)
        assert '#' not in driver.current_url, 'the code stays in the address bar'
        devices = json.loads(desktop.cli('devices', '--json').stdout)
        listed = devices['devices'] if isinstance(devices, dict) else devices
        browser = [d for d in listed if d.get('kind') == 'browser']
        assert len(browser) == 1 and 'Chrome' in browser[0].get('agent', ''), listed
        key = driver.execute_async_script('''
            const done = arguments[arguments.length - 1];
            import('/store.js').then(async ({ Store }) => {
              const keys = await (await Store.open()).get('keys', 'static');
              done({ type: keys.privateKey.algorithm.name, extractable: keys.privateKey.extractable });
            });''')
        assert key == {'type': 'X25519', 'extractable': False}, key
        headers = subprocess.run(['curl', '-sk', '-D', '-', '-o', '/dev/null', first['url'].split('#')[0]],
                                 capture_output=True, text=True).stdout.lower()
        assert "content-security-policy: default-src 'none'; script-src 'self';" in headers and 'unsafe' not in headers, headers
        text = desktop.cli('devices').stdout
        assert f"{browser[0]['id']}  client  \"browser\"" in text and 'browser (Chrome 156 on Android)' in text, text
        print('e2e.py: ok: paired; devices lists kind browser,', browser[0]['agent'])
        shot(driver, 'web-pairing.png')

        # 1b. a second tab of the same browser does not send (it would number the same session's chunks twice)
        main_tab = driver.current_window_handle
        driver.switch_to.new_window('tab')
        driver.get(first['url'].split('#')[0])
        wait('the second tab refuses', lambda: 'another tab' in status_text(driver))
        assert driver.find_element(By.ID, 'sb-text').get_attribute('disabled') is not None
        driver.close()
        driver.switch_to.window(main_tab)

        # 2. 100 lines
        expected = [f'line {i:03d} ünïcode "quoted"' for i in range(100)]
        type_lines(driver, expected)
        expect_exactly_once(desktop, expected, '100 lines through the text box')
        wait('every line delivered', lambda: all(s == 'delivered' for _, s in states(driver)) and len(states(driver)) == 100)

        # 2b. text from the keyboard's own mic has no Enter: it is sent after a pause
        driver.find_element(By.ID, 'sb-text').send_keys('no enter pressed')
        expected.append('no enter pressed')
        expect_exactly_once(desktop, expected, 'a line sent after a pause in typing')

        # 3. reload mid-stream
        batch = [f'reload {i:03d}' for i in range(60)]
        type_lines(driver, batch[:30])
        wait('30 lines in the log', lambda: len(states(driver)) >= 131)
        driver.refresh()
        wait('paired after the reload', lambda: driver.find_element(By.ID, 'sb-status').get_attribute('data-state') == 'connected')
        type_lines(driver, batch[30:])
        expected += batch
        expect_exactly_once(desktop, expected, 'a reload mid-stream')

        # 4. kill -9 and restart the daemon mid-stream
        batch = [f'crash {i:03d}' for i in range(60)]
        type_lines(driver, batch[:30])
        desktop.kill9()
        type_lines(driver, batch[30:])
        wait('the page notices', lambda: 'reconnecting' in status_text(driver) or 'does not answer' in status_text(driver))
        desktop.start(lifetime=2)
        expected += batch
        expect_exactly_once(desktop, expected, 'kill -9 and restart of the daemon mid-stream')
        wait('connected again', lambda: driver.find_element(By.ID, 'sb-status').get_attribute('data-state') == 'connected')

        # 5. dictation
        driver.find_element(By.ID, 'sb-mic').click()
        config = wait('recognition started', lambda: driver.execute_script('return window.__speech.config()'))
        assert config['continuous'] and config['interim'], config
        driver.execute_script("window.__speech.say('hello from the', false)")
        wait('interim words shown', lambda: driver.find_element(By.ID, 'sb-interim').text == 'hello from the')
        assert 'hello from the' not in ' '.join(t for t, _ in states(driver)), 'an interim result was sent'
        shot(driver, 'web-dictating.png')
        # The daemon is stopped (SIGSTOP) for a moment, so the chunk stays in the page's outbox to be looked at.
        desktop.proc.send_signal(signal.SIGSTOP)
        try:
            driver.execute_script("window.__speech.say('hello from the phone', true)")
            stored = wait('the final result in the outbox', lambda: driver.execute_async_script('''
                const done = arguments[arguments.length - 1];
                import('/store.js').then(async ({ Store }) => {
                  const all = await (await Store.open()).outbox();
                  done(all.find((c) => c.text === 'hello from the phone') || null);
                });'''))
        finally:
            desktop.proc.send_signal(signal.SIGCONT)
        assert stored['lang'] == 'en-US' and stored['final'] is True, stored
        assert 0 <= stored['start'] <= stored['end'], stored
        driver.execute_script("window.__speech.say('second phrase', false)")
        driver.execute_script("window.__speech.say('second phrase done', true)")
        expected += ['hello from the phone', 'second phrase done']
        expect_exactly_once(desktop, expected, 'two final speech results as two chunks')
        assert driver.find_element(By.ID, 'sb-interim').text == ''
        driver.find_element(By.ID, 'sb-mic').click()

        # 5b. a browser device may not pull or push config: the desktop answers config-* with an error
        reply = driver.execute_async_script('''
            const done = arguments[arguments.length - 1];
            (async () => {
              const { Store } = await import('/store.js');
              const { Connection } = await import('/protocol.js');
              const store = await Store.open();
              const c = new Connection({ desktop: await store.get('state', 'desktop'),
                                         keys: await store.get('keys', 'static'), agent: 'config probe' });
              c.onWelcome = () => c.send({ type: 'config-pull', batch: 'b-probe' });
              c.onMessage = (m) => { done(m); c.close(); };
              c.onClose = (e) => done({ closed: e.code });
            })().catch((e) => done({ exception: String(e) }));''')
        assert reply.get('type') == 'error' and reply.get('code') == 'unknown-type', reply
        print('e2e.py: ok: a browser device cannot pull config:', reply.get('message'))

        # 5c. a sink that holds: the FIFO's reader goes away (every earlier line was read, so none is lost with
        # it); the next line waits in the daemon, which tells the page after a second (`held`, with the sink's
        # reason); a reader again → the line is delivered, once
        desktop.reader.hold()
        type_lines(driver, ['held until a reader comes back'])
        held = wait('the page marks the line held with the reason', lambda: driver.execute_script('''
            const item = [...document.querySelectorAll('#sb-log li')].pop();
            const reason = item && item.querySelector('.reason');
            return item && item.dataset.state === 'held' && reason ? reason.textContent : null;'''), timeout=15)
        assert held.startswith('fifo:') and 'no reader on FIFO' in held, held
        assert len(desktop.reader.snapshot()) == len(expected), 'a line arrived while the FIFO had no reader'
        shot(driver, 'web-held.png')
        desktop.reader.release()
        expected.append('held until a reader comes back')
        expect_exactly_once(desktop, expected, 'a line held by the sink, then delivered')
        wait('the held line turns delivered',
             lambda: states(driver)[-1] == ['held until a reader comes back', 'delivered'])
        print('e2e.py: ok: a held line is marked held with the reason, then delivered once:', held[:60])

        # 6. the used code in a fresh browser; an expired code
        other = chromium(spki=spki, profile=os.path.join(tmp, 'other-phone'), inject=FAKE_SPEECH)
        drivers.append(other)
        other.get(first['url'])
        wait('a clear message for a used code', lambda: 'did not accept this code' in other.find_element(By.ID, 'sb-message').text)
        shot(other, 'web-code-used.png')
        expired = json.loads(desktop.cli('pair', '--web', '--json').stdout)
        time.sleep(3)
        other.get(expired['url'])
        wait('a clear message for an expired code', lambda: 'expired' in other.find_element(By.ID, 'sb-message').text)
        print('e2e.py: ok: a used and an expired code each get a clear message')

        # 7. revoke
        desktop.cli('devices', 'revoke', browser[0]['id'])
        wait('the page says revoked', lambda: 'revoked' in status_text(driver))
        before = len(desktop.reader.snapshot())
        driver.execute_script("""
            const box = document.getElementById('sb-text');
            box.disabled = false; box.value = 'after revoke';
            document.getElementById('sb-form').requestSubmit();""")
        time.sleep(2)
        assert len(desktop.reader.snapshot()) == before, 'a line arrived after the revoke'
        assert 'after revoke' not in ' '.join(t for t, _ in states(driver)), 'the page took a line after the revoke'
        driver.execute_script("document.getElementById('sb-text').disabled = true")
        shot(driver, 'web-revoked.png')
        driver.refresh()
        wait('still revoked after a reload', lambda: 'revoked' in status_text(driver))
        print('e2e.py: ok: revoke ends the page at once; it says so and sends nothing more')
        return 0
    finally:
        for d in drivers:
            try:
                d.quit()
            except Exception:
                pass
        desktop.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    try:
        sys.exit(main())
    except AssertionError as error:
        print(f'e2e.py: FAIL: {error}')
        sys.exit(1)
