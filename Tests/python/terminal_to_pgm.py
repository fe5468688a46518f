#!/usr/bin/env python3
"""Turns a tmux screen capture (`capture-pane -p -e -N`) into a PGM image, as a terminal would show it.

Usage: terminal_to_pgm.py CAPTURE OUT.pgm [dark|light]

Each cell is 8x16 pixels, so a half-block cell is two 8x8 squares: one QR module each. Colours follow the
SGR codes in the capture (30-37/90-97 foreground, 40-47/100-107 background, 39/49/0 defaults); the default
colours are those of a dark theme (light text on black) or a light one. Block glyphs: '█' all foreground,
'▀' upper half foreground, '▄' lower half foreground, ' ' all background. Any other character is drawn as
a foreground stroke in the middle of its cell (text near the code must not help the decoder).
Only the standard library: no PIL needed.
"""
import re
import sys

CELL_W, CELL_H = 8, 16
SGR = re.compile(r"\x1b\[([0-9;]*)m")
BASIC = [0, 205, 205, 205, 0, 205, 205, 229]        # grey levels of colours 0-7 (black ... white)
BRIGHT = [127, 255, 255, 255, 92, 255, 255, 255]    # colours 8-15


def level(code):
    return BRIGHT[code - 8] if code >= 8 else BASIC[code]


def parse(line, state, default_fg, default_bg):
    """Cells of one captured line: (character, fg grey, bg grey). tmux writes an SGR code only where the colours
    change, so `state` ([fg, bg]) carries over from one line to the next."""
    fg, bg = state
    cells = []
    pos = 0
    for match in list(SGR.finditer(line)) + [None]:
        end = match.start() if match else len(line)
        for ch in line[pos:end]:
            cells.append((ch, fg, bg))
        if match is None:
            break
        pos = match.end()
        codes = [int(c) for c in match.group(1).split(";") if c] or [0]
        for c in codes:
            if c == 0:
                fg, bg = default_fg, default_bg
            elif 30 <= c <= 37:
                fg = level(c - 30)
            elif 90 <= c <= 97:
                fg = level(c - 90 + 8)
            elif c == 39:
                fg = default_fg
            elif 40 <= c <= 47:
                bg = level(c - 40)
            elif 100 <= c <= 107:
                bg = level(c - 100 + 8)
            elif c == 49:
                bg = default_bg
    state[:] = [fg, bg]
    return cells


def main():
    capture, out = sys.argv[1], sys.argv[2]
    theme = sys.argv[3] if len(sys.argv) > 3 else "dark"
    default_fg, default_bg = (205, 0) if theme == "dark" else (0, 255)
    with open(capture, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    columns = 80
    state = [default_fg, default_bg]
    rows = [parse(line, state, default_fg, default_bg) for line in lines]
    margin = 2 * CELL_H                             # the window frame around the screen, default background
    width = columns * CELL_W + 2 * margin
    height = len(rows) * CELL_H + 2 * margin
    pixels = bytearray([default_bg]) * (width * height)

    def fill(x0, y0, w, h, grey):
        for y in range(y0, y0 + h):
            start = y * width + x0
            pixels[start:start + w] = bytes([grey]) * w

    for r, cells in enumerate(rows):
        for c, (ch, fg, bg) in enumerate(cells[:columns]):
            x, y = margin + c * CELL_W, margin + r * CELL_H
            half = CELL_H // 2
            if ch == "█":
                fill(x, y, CELL_W, CELL_H, fg)
            elif ch == "▀":
                fill(x, y, CELL_W, half, fg)
                fill(x, y + half, CELL_W, half, bg)
            elif ch == "▄":
                fill(x, y, CELL_W, half, bg)
                fill(x, y + half, CELL_W, half, fg)
            else:
                fill(x, y, CELL_W, CELL_H, bg)
                if ch != " ":
                    fill(x + 2, y + 3, CELL_W - 4, CELL_H - 6, fg)
    with open(out, "wb") as f:
        f.write(b"P5\n%d %d\n255\n" % (width, height))
        f.write(bytes(pixels))


if __name__ == "__main__":
    main()
