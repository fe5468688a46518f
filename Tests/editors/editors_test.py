"""Editor plugins against a real daemon and a real FIFO, checking each buffer's exact content.

Flow: one real daemon (`serve --sink jsonl:$XDG_RUNTIME_DIR/speakbridge/dictation.fifo`, the plugins' default
path) and one paired phone (`join`, then `send --text ...` for chunks); then, one editor at a time, the editor is
started headless with its plugin reading the default FIFO, and each case sets up the buffer and cursor, sends
chunks through the daemon and waits for the exact lines and cursor. The cases that need a line the daemon cannot
be made to write on demand (a repeated seq, a torn line, a plain line beside frames) write it into the same FIFO
with `FrameWriter`. Usage: editors_test.py SPEAKBRIDGE_BIN EDITOR=BINARY... (EDITOR: nvim, vim or emacs).
"""
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbtest import Daemon, FrameWriter, Phone, Results, private_tmpdir, say, wait_until  # noqa: E402
import drivers  # noqa: E402

SINK = os.environ.get("SB_EDITORS_SINK", "jsonl")  # "fifo" runs the same cases against the plain sink


def expect(results, editor, name, want_lines, want_col=None, timeout=10.0, want=None):
    """Waits until the buffer is exactly want_lines (and the cursor column want_col, a byte offset)."""
    def matches():
        st = editor.state()
        if st["lines"] != want_lines:
            return None
        if want_col is not None and st["cursor"][1] != want_col:
            return None
        if want is not None and not want(st):
            return None
        return st

    try:
        wait_until(name, matches, timeout)
        return results.check("%s: %s" % (editor.label, name), True)
    except TimeoutError:
        st = editor.state()
        return results.check("%s: %s" % (editor.label, name), False,
                             "buffer %r cursor %r, wanted %r col %r (status %r)"
                             % (st["lines"], st["cursor"], want_lines, want_col, st["status"]))


def nbytes(s):
    return len(s.encode("utf-8"))


def run_cases(results, editor, daemon, phone, fifo):
    modes = ["n", "i"] if editor.name != "emacs" else ["e"]

    def send(*texts):
        out = phone.send(list(texts))
        if out.returncode != 0:
            results.check("%s: send %r" % (editor.label, texts), False, out.stderr[-500:])

    for mode in modes:
        m = {"n": "Normal mode", "i": "Insert mode", "e": "point"}[mode]
        setup_mode = "n" if mode == "e" else mode

        # A session's first chunk into an empty buffer: no space before it, no newline after it.
        editor.setup([""], 1, 0, setup_mode)
        send("Hello")
        expect(results, editor, m + ", empty buffer: the first chunk has no space before it", ["Hello"],
               4 if mode == "n" else 5)

        # Cursor on the first character (mid-line): before it, as `i` would; one/two/three in one batch.
        editor.setup(["existing line"], 1, 0, setup_mode)
        send("one", "two", "three")
        expect(results, editor, m + ", cursor on the first character: one/two/three before it, in order",
               ["one two three existing line"], nbytes("one two three"))

        # At the end of the line (Normal: on the last character; Insert and point: after it): appended.
        end = nbytes("existing line") - (1 if mode == "n" else 0)
        editor.setup(["existing line"], 1, end, setup_mode)
        send("one", "two", "three")
        want = "existing line one two three"
        expect(results, editor, m + ", end of line: appended with one space each, never glued",
               [want], nbytes(want) - (1 if mode == "n" else 0) if mode == "n" else nbytes(want))

        # Mid-line between two words: spaces on both sides, the cursor after the chunk.
        editor.setup(["hello world", "second line"], 1, 5, setup_mode)
        send("big", "wide")
        expect(results, editor, m + ", mid-line: one space each side, the next chunk follows the first",
               ["hello big wide world", "second line"], nbytes("hello big wide"))

        # Punctuation never gets a space before it; an opening bracket does.
        editor.setup(["Note"], 1, 3 if mode == "n" else 4, setup_mode)
        send("one", ", two", "three", ".", "(four)", "!", "¿five?")
        want = "Note one, two three. (four)! ¿five?"
        expect(results, editor, m + ", punctuation chunks: no space before , . ! and after (",
               [want], nbytes(want) - (nbytes("?") if mode == "n" else 0))

        # Multibyte: the last character is two bytes wide; chunks with umlauts and CJK.
        editor.setup(["café"], 1, nbytes("caf") if mode == "n" else nbytes("café"), setup_mode)
        send("au lait", "Grüße", "你好。")
        want = "café au lait Grüße 你好。"
        expect(results, editor, m + ", multibyte text and a two-byte last character",
               [want], nbytes(want) - (nbytes("。") if mode == "n" else 0))

    # A plugin error (the buffer is not modifiable) holds the chunk; it lands once the buffer is writable again.
    setup_mode = "n"  # Emacs ignores it
    editor.setup(["kept"], 1, 4 if editor.name == "emacs" else 3, setup_mode)  # point after / cursor on the "t"
    editor.set_modifiable(False)
    send("held back")
    try:
        wait_until("the plugin to hold the chunk", lambda: editor.state()["status"].get("held") == 1, 10)
        results.check("%s: a chunk that cannot be inserted (buffer not modifiable) is held, not lost"
                      % editor.label, editor.state()["lines"] == ["kept"], repr(editor.state()["lines"]))
    except TimeoutError:
        results.check("%s: a chunk that cannot be inserted is held" % editor.label, False, repr(editor.state()))
    send("and more")
    time.sleep(0.3)
    editor.set_modifiable(True)
    expect(results, editor, "the held chunks are inserted, in order, once the buffer is modifiable again",
           ["kept held back and more"], want=lambda st: st["status"].get("held") == 0)

    # A line break inside a chunk (kept by the daemon, "\n" in the JSON) becomes a space; none is added.
    editor.setup(["x"], 1, 0 if editor.name != "emacs" else 1, setup_mode)  # on / after the last character
    send("first line\nsecond line")
    expect(results, editor, "a line break inside a chunk becomes a space, no line is added",
           ["x first line second line"])

    # Frames the daemon cannot be made to write on demand, written by the test into the same FIFO.
    writer = FrameWriter(fifo)
    editor.setup([""], 1, 0, setup_mode)
    f = FrameWriter.frame
    writer.write_lines([f("TEST-DEVICE", "t-1", 1, "alpha"), f("TEST-DEVICE", "t-1", 1, "alpha"),
                        f("TEST-DEVICE", "t-1", 2, "beta"), f("TEST-DEVICE", "t-2", 1, "gamma"),
                        f("TEST-DEVICE", "t-1", 2, "beta")])
    expect(results, editor, "a repeated seq of the same (device, session) is dropped; another session's seq 1 is not",
           ["alpha beta gamma"])
    writer.write_lines(["plain words from the fifo: sink", '{"not":"a frame"}',
                        'torn{"dev' + f("TEST-DEVICE", "t-1", 3, "delta")])
    expect(results, editor, "a line that is not a frame is plain text; a torn line counts from its last object",
           ['alpha beta gamma plain words from the fifo: sink {"not":"a frame"} delta'])

    # The daemon is killed and restarted: the plugin reopens the FIFO and keeps its dedupe state.
    daemon.kill9()
    daemon.start()
    editor.setup([""], 1, 0, setup_mode)
    writer.write_lines([f("TEST-DEVICE", "t-1", 3, "delta"), f("TEST-DEVICE", "t-1", 4, "epsilon")])
    send("after restart")
    expect(results, editor, "after a daemon restart: the FIFO is reopened, the dedupe state is kept",
           ["epsilon after restart"])


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    binary = sys.argv[1]
    editors = [arg.split("=", 1) for arg in sys.argv[2:]]
    results = Results()
    if os.environ.get("SB_EDITORS_SKIPPED"):
        name, _, reason = os.environ["SB_EDITORS_SKIPPED"].partition(": ")
        results.skip(name, reason)
    tmp = private_tmpdir("sb-editors.")
    run = os.path.join(tmp, "run")
    os.makedirs(os.path.join(run, "speakbridge"), mode=0o700)
    os.chmod(run, 0o700)
    env = dict(os.environ, XDG_RUNTIME_DIR=run, LANG="C.UTF-8", LC_ALL="C.UTF-8")
    fifo = os.path.join(run, "speakbridge", "dictation.fifo")
    daemon = Daemon(binary, os.path.join(tmp, "desk"), ["%s:%s" % (SINK, fifo)], os.path.join(tmp, "daemon.log"),
                    env)
    phone = Phone(binary, os.path.join(tmp, "phone"), env)
    try:
        daemon.start()
        phone.join(daemon, "editor-test")
        for kind, path in editors:
            cls = {"nvim": drivers.NvimDriver, "vim": drivers.VimDriver, "emacs": drivers.EmacsDriver}[kind]
            workdir = os.path.join(tmp, kind + str(editors.index([kind, path])))
            os.makedirs(workdir)
            editor = None
            try:
                editor = cls(path, workdir, env)
                editor.label = editor.version
                say("-- %s (%s)" % (editor.version, path))
                run_cases(results, editor, daemon, phone, fifo)
            except Exception:
                results.check("%s (%s) ran" % (kind, path), False, traceback.format_exc())
            finally:
                if editor:
                    editor.close()
    finally:
        daemon.stop()
        if results.failed == 0:
            import shutil
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            say("kept " + tmp + " (daemon.log, editor logs)")
    return results.finish()


if __name__ == "__main__":
    sys.exit(main())
