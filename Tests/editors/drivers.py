"""One driver per editor, each running the real editor with the real plugin from Examples/editors/ loaded.

- Neovim: `nvim --headless --clean --listen SOCK`, driven over its msgpack RPC socket (python3-pynvim).
- Vim: `vim -N -u NONE` in a pseudo-terminal, driven by keystrokes; a timer in the editor writes its state (lines,
  mode, cursor, plugin status) as JSON to a file every 20 ms, which the driver reads.
- Emacs: `emacs -Q --fg-daemon=SOCK`, driven with `emacsclient --eval`.

Common interface: setup(lines, row, col, mode) with row 1-based, col a 0-based byte offset and mode "n" (Normal)
or "i" (Insert; Emacs has only point), state() -> {"lines", "cursor": [row, col], "mode", "status"},
set_modifiable(bool), close(). Every editor runs with XDG_RUNTIME_DIR from env, so the plugin finds its default FIFO.
"""
import json
import os
import pty
import select
import subprocess
import threading
import time

from sbtest import wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLUGINS = os.path.join(ROOT, "Examples", "editors")


def lua_str(s):
    return json.dumps(s)  # a JSON string literal is a valid Lua string literal for what the tests use


class NvimDriver:
    def __init__(self, binary, workdir, env):
        import pynvim  # python3-pynvim (Debian)

        self.name = "nvim"
        sock = os.path.join(workdir, "nvim.sock")
        self.proc = subprocess.Popen([binary, "--headless", "--clean", "--listen", sock], env=env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=open(os.path.join(workdir, "nvim.log"), "ab"))
        wait_until("nvim's socket", lambda: os.path.exists(sock), 20)
        # The socket's name exists from bind(2), before nvim listens: a connect in between is refused (seen once in
        # a full run on this 2-CPU VM). Retried for a while, not taken as nvim failing.
        deadline = time.monotonic() + 10
        while True:
            try:
                self.nvim = pynvim.attach("socket", path=sock)
                break
            except ConnectionRefusedError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self.version = "nvim " + self.nvim.command_output("version").strip().splitlines()[0].split()[-1]
        self.nvim.command("set rtp+=" + os.path.join(PLUGINS, "nvim") + " noswapfile hidden")
        self.nvim.exec_lua('require("speakbridge").setup({}) require("speakbridge").start()')

    def setup(self, lines, row, col, mode):
        n = self.nvim
        n.input("<Esc>")
        wait_until("Normal mode", lambda: n.api.get_mode()["mode"] == "n", 5)
        n.command("set modifiable")
        n.current.buffer[:] = lines
        line = lines[row - 1]
        if mode == "i" and col >= len(line.encode()):
            n.current.window.cursor = (row, 0)
            n.input("A")
        else:
            n.current.window.cursor = (row, col)
            if mode == "i":
                n.input("i")
        wait_until("mode " + mode, lambda: n.api.get_mode()["mode"] == mode, 5)

    def set_modifiable(self, on):
        self.nvim.command("set modifiable" if on else "set nomodifiable")

    def state(self):
        n = self.nvim
        row, col = n.current.window.cursor
        status = n.exec_lua('local m = require("speakbridge") return m.status and m.status() or {}')
        return {"lines": n.current.buffer[:], "cursor": [row, col], "mode": n.api.get_mode()["mode"],
                "status": status if isinstance(status, dict) else {}}  # an empty Lua table comes as a list

    def close(self):
        try:
            self.nvim.close()
        except Exception:
            pass
        self.proc.kill()
        self.proc.wait()


VIM_HARNESS = r"""
set noswapfile nobackup hidden encoding=utf-8 ttimeoutlen=10 timeoutlen=1000 shortmess+=I
function! SBDump(...) abort
  let l:s = {'lines': getline(1, '$'), 'cursor': [line('.'), col('.') - 1], 'mode': mode(),
        \ 'status': exists('*SpeakBridgeStatus') ? SpeakBridgeStatus() : {}}
  call writefile([json_encode(l:s)], g:sb_state . '.tmp')
  call rename(g:sb_state . '.tmp', g:sb_state)
endfunction
function! SBSetup() abort
  let l:a = json_decode(join(readfile(g:sb_setup), ''))
  setlocal modifiable
  silent %delete _
  call setline(1, l:a.lines)
  call cursor(l:a.row, l:a.col + 1)
endfunction
call timer_start(20, function('SBDump'), {'repeat': -1})
SpeakBridgeStart
"""


class VimDriver:
    def __init__(self, binary, workdir, env):
        self.name = "vim"
        self.workdir = workdir
        self.state_path = os.path.join(workdir, "vim-state.json")
        self.setup_path = os.path.join(workdir, "vim-setup.json")
        harness = os.path.join(workdir, "harness.vim")
        with open(harness, "w") as f:
            f.write("let g:sb_state = %s\nlet g:sb_setup = %s\n" % (json.dumps(self.state_path),
                                                                   json.dumps(self.setup_path)))
            f.write(VIM_HARNESS)
        plugin = os.path.join(PLUGINS, "vim", "plugin", "speakbridge.vim")
        env = dict(env, TERM="xterm")
        pid, fd = pty.fork()
        if pid == 0:
            os.execve(binary, [binary, "-N", "-u", "NONE", "-i", "NONE", "-n", "-c", "source " + plugin,
                               "-S", harness], env)
        self.pid, self.fd = pid, fd
        self.output = bytearray()
        self.reading = True
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()
        wait_until("vim's first state dump", lambda: os.path.exists(self.state_path), 20)
        first = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
        self.version = "vim " + first.split("IMproved ")[1].split()[0]  # "VIM - Vi IMproved 9.0 (...)"

    def _drain(self):
        # The terminal's output must be read, or Vim blocks writing to it.
        while self.reading:
            r, _, _ = select.select([self.fd], [], [], 0.2)
            if r:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    return
                if not data:
                    return
                self.output += data
                del self.output[:-65536]

    def keys(self, s):
        os.write(self.fd, s.encode("utf-8"))

    def state(self):
        # Vim's rename() may remove the target before renaming: retry a moment later.
        for _ in range(50):
            try:
                with open(self.state_path) as f:
                    return json.load(f)
            except (FileNotFoundError, ValueError):
                time.sleep(0.01)
        raise RuntimeError("vim stopped writing its state; terminal output: %r" % bytes(self.output[-2000:]))

    def _wait_mode(self, mode):
        wait_until("vim in mode " + mode, lambda: self.state()["mode"] == mode, 5)

    def setup(self, lines, row, col, mode):
        self.keys("\x1b")
        self._wait_mode("n")
        line = lines[row - 1]
        append = mode == "i" and col >= len(line.encode())
        with open(self.setup_path, "w") as f:
            json.dump({"lines": lines, "row": row, "col": 0 if append else col}, f)
        self.keys(":call SBSetup()\r")
        wait_until("vim's buffer set up", lambda: self.state()["lines"] == lines, 5)
        if mode == "i":
            self.keys("A" if append else "i")
        self._wait_mode(mode)
        time.sleep(0.05)  # two dumps, so state() shows the cursor after the mode change

    def set_modifiable(self, on):
        insert = self.state()["mode"] == "i"
        if insert:
            self.keys("\x1b")
            self._wait_mode("n")
        self.keys(":setlocal %smodifiable\r" % ("" if on else "no"))
        time.sleep(0.1)
        if insert:
            self.keys("a")  # back in Insert mode after the character the Esc moved onto
            self._wait_mode("i")

    def close(self):
        self.reading = False
        try:
            self.keys("\x1b:qa!\r")
            for _ in range(50):
                if os.waitpid(self.pid, os.WNOHANG)[0]:
                    break
                time.sleep(0.05)
            else:
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
        except (OSError, ChildProcessError):
            pass
        os.close(self.fd)


class EmacsDriver:
    def __init__(self, binary, workdir, env):
        self.name = "emacs"
        self.env = env
        self.sock = os.path.join(workdir, "emacs.sock")
        self.client = os.path.join(os.path.dirname(binary), "emacsclient")
        plugin = os.path.join(PLUGINS, "emacs", "speakbridge.el")
        # No deferred native compilation of the libraries the plugin loads (Emacs 28 started it on every run, left
        # its input file in /tmp and was killed before it finished); anything else Emacs writes to a temp dir stays
        # in this test's.
        self.proc = subprocess.Popen([binary, "-Q", "--fg-daemon=" + self.sock,
                                      "--eval", "(setq native-comp-deferred-compilation nil)", "-l", plugin,
                                      "--eval", "(speakbridge-start)"], env=dict(env, TMPDIR=workdir),
                                     stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=open(os.path.join(workdir, "emacs.log"), "ab"))
        wait_until("emacs's server socket", lambda: os.path.exists(self.sock), 30)
        self.version = "emacs " + self.eval("emacs-version").strip('"')
        self.eval('(switch-to-buffer (get-buffer-create "dictation"))')

    def eval(self, expr):
        out = subprocess.run([self.client, "-s", self.sock, "--eval", expr], capture_output=True, text=True,
                             timeout=20, env=self.env)
        if out.returncode != 0:
            raise RuntimeError("emacsclient: " + out.stderr)
        return out.stdout.strip()

    def setup(self, lines, row, col, mode):
        text = "\n".join(lines)
        # col is a byte offset: the character offset is that of its byte prefix.
        line = lines[row - 1].encode()[:col].decode()
        self.eval('(with-current-buffer "dictation" (setq buffer-read-only nil) (erase-buffer) (insert %s) '
                  '(goto-char (point-min)) (forward-line %d) (forward-char %d))'
                  % (json.dumps(text), row - 1, len(line)))

    def set_modifiable(self, on):
        self.eval('(with-current-buffer "dictation" (setq buffer-read-only %s))' % ("nil" if on else "t"))

    def state(self):
        expr = ('(with-current-buffer "dictation" (require \'json) (json-encode (list (cons "text" (buffer-string)) '
                '(cons "row" (line-number-at-pos)) '
                '(cons "col" (string-bytes (buffer-substring (line-beginning-position) (point)))) '
                '(cons "status" (and (fboundp \'speakbridge-status) (speakbridge-status))))))')
        raw = self.eval(expr)
        obj = json.loads(json.loads(raw))  # emacsclient prints the Lisp string; its contents are the JSON
        status = obj["status"] or {}
        if isinstance(status, list):  # a plist encodes as a flat list
            status = {str(status[i]).lstrip(":"): status[i + 1] for i in range(0, len(status) - 1, 2)}
        return {"lines": obj["text"].split("\n"), "cursor": [obj["row"], obj["col"]], "mode": "e",
                "status": status}

    def close(self):
        try:
            self.eval("(kill-emacs)")
        except Exception:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
