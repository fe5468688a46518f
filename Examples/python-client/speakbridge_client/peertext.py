"""Peer-chosen text made safe for one terminal line (PROTOCOL.md and SECURITY.md: peer strings are sanitized
before any log or terminal). Written visibly instead of acted on: C0 controls, DEL and C1 controls as `\\xNN`
(`\\n`, `\\r`, `\\t` by name), the bidi formatting characters U+061C, U+200E/F, U+202A-E, U+2066-9 and the line
and paragraph separators U+2028/9 as `\\u{NNNN}`; a backslash as `\\\\`, so the escaped form is unambiguous."""
from __future__ import annotations

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}
_BIDI_AND_SEPARATORS = {0x061C, 0x200E, 0x200F, 0x2028, 0x2029} | set(range(0x202A, 0x202F)) | set(range(0x2066, 0x206A))


def escape(text: object) -> str:
    out = []
    for ch in str(text):
        o = ord(ch)
        if ch in _NAMED:
            out.append(_NAMED[ch])
        elif o < 0x20 or 0x7F <= o <= 0x9F:
            out.append(f"\\x{o:02x}")
        elif o in _BIDI_AND_SEPARATORS:
            out.append(f"\\u{{{o:04X}}}")
        else:
            out.append(ch)
    return "".join(out)
