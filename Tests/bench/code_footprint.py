"""Code footprint of a window of lines: the distinct 64-byte code lines (and 4 KiB pages) a callgrind dump executed,
per object file, and the functions that span the most lines.
usage: SB_BIN=/path/to/speakbridge CG_OUT=DIR CG_DESK=1 CG_SEND=1 CG_ARGS=--dump-instr=yes \
           python3 Tests/bench/paced_callgrind.py 500
       python3 Tests/bench/code_footprint.py DIR/cg-desk.<pid>.1 500 [TOP]
(valgrind 3.19 cannot read the DWARF 5 of the release binary: give SB_BIN a copy made with
`llvm-objcopy --strip-debug`.) "run every line" counts the lines whose instructions ran at least N times in the N-line
window. After a 2 ms sleep code is cold on this VM, and its pages cost more than its lines: 1,000 calls cost 13 µs
packed on 16 pages, 41 µs spread over 140 (README → Experiments, thirteenth session). An investigation tool, not part
of `make bench`.
"""
import collections
import re
import subprocess
import sys

COST_LINE = re.compile(r"^(0x[0-9a-fA-F]+|[+-]\d+|\*)\s")
NAME_LINE = re.compile(r"^(c?ob|c?fn)=(?:\((\d+)\))?\s*(.*)$")


def executed(path):
    """{instruction address: instructions run there, object, function} from a --dump-instr=yes dump."""
    runs, where = collections.Counter(), {}
    names = {"ob": {}, "fn": {}}
    current = {"ob": None, "fn": None}
    cost_field, last, call_site = 1, 0, False
    with open(path, errors="replace") as dump:
        for line in dump:
            if line.startswith("positions:"):
                cost_field = len(line.split()) - 1      # "instr line": the cost follows the line number
                continue
            if COST_LINE.match(line):
                fields = line.split()
                pos = fields[0]
                last = last if pos == "*" else last + int(pos) if pos[0] in "+-" else int(pos, 16)
                if call_site:                            # the call's inclusive cost: not this address's own
                    call_site = False
                    continue
                cost = int(fields[cost_field]) if len(fields) > cost_field else 0
                if cost:
                    runs[last] += cost
                    where[last] = (current["ob"], current["fn"])
                continue
            if line.startswith("calls="):
                call_site = True
                continue
            m = NAME_LINE.match(line.rstrip("\n"))
            if m:
                key, index, name = m.group(1), m.group(2), m.group(3)
                kind = key.lstrip("c")
                if index and name:
                    names[kind][index] = name
                if not key.startswith("c"):
                    current[kind] = names[kind].get(index, name) if index else name
    return runs, where


def main():
    path, n = sys.argv[1], int(sys.argv[2])
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    runs, where = executed(path)
    lines, pages, every = (collections.defaultdict(set) for _ in range(3))
    by_function, per_function = collections.defaultdict(set), collections.Counter()
    for address, count in runs.items():
        obj, function = where[address]
        obj = (obj or "?").rsplit("/", 1)[-1]
        lines[obj].add(address >> 6)
        pages[obj].add(address >> 12)
        if count >= n:
            every[obj].add(address >> 6)
        by_function[function].add(address >> 6)
        per_function[function] += count
    total = sum(map(len, lines.values()))
    print(f"{path}: {total} distinct 64-byte code lines ({total * 64 // 1024} KiB) on "
          f"{sum(map(len, pages.values()))} pages; {sum(map(len, every.values()))} run every line (>= {n} times)")
    for obj in sorted(lines, key=lambda o: -len(lines[o])):
        print(f"  {obj:32s} {len(lines[obj]):6d} lines {len(pages[obj]):5d} pages {len(every[obj]):6d} run every line")
    widest = sorted(by_function, key=lambda f: -len(by_function[f]))[:top]
    demangled = subprocess.run(["swift-demangle", "--simplified"], input="\n".join(map(str, widest)),
                               capture_output=True, text=True).stdout.splitlines() or list(map(str, widest))
    for function, name in zip(widest, demangled):
        print(f"  {len(by_function[function]):5d} lines {per_function[function] / n:8.0f} instructions a line  "
              f"{name[:120]}")


if __name__ == "__main__":
    main()
