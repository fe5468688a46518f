#!/usr/bin/env python3
"""Per-stage trace of two (or more) binaries taking turns: each run restarts a daemon and a sender with
SPEAKBRIDGE_TRACE, streams 1,000 lines paced 2 ms (bench.py's traced step) and prints each stage's median, run by run.

usage: python3 Tests/bench/stages_ab.py BIN1,BIN2 [RUNS]   (default 3 runs of each, alternating)

The stages are stages.py's (stdin read → journaled → sealed → socket → decrypt + ledger + submit → progress → sink
write → fsync → ack); a stage that moved in most pairs, not in one, is a change of the code rather than of the VM.
An investigation tool, not part of `make bench`. Loopback only; stops what it started.
"""
import os, shutil, statistics, sys, tempfile, types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench, stages  # noqa: E402


def main():
    binaries = sys.argv[1].split(",")
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    args = types.SimpleNamespace(trace_lines=1000, pace=0.002)
    medians = {b: [] for b in binaries}
    for _ in range(runs):
        for binary in binaries:
            base = tempfile.mkdtemp(prefix="stages-ab-")
            tools = []
            try:
                bench.add_tools(tools, base, binary, ["speakbridge"])
                rows = stages.lines(stages.load(tools[0].traced(args, base)))
                medians[binary].append({label: statistics.median((r[b] - r[a]) / 1e3 for r in rows)
                                        for label, a, b in stages.STEPS + stages.TOTALS})
            finally:
                for t in tools:
                    t.close()
                shutil.rmtree(base, ignore_errors=True)
    for label, _, _ in stages.STEPS + stages.TOTALS:
        print(f"{label[:48]:48s} " + "   ".join(
            f"{os.path.basename(b)}: " + ", ".join(f"{m[label]:.1f}" for m in medians[b]) for b in binaries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
