"""Instructions per PACED line (callgrind), desktop and/or sender.
usage: SB_BIN=/path/to/speakbridge CG_OUT=/tmp/mydir CG_DESK=1 CG_SEND=1 python3 Tests/bench/paced_callgrind.py 500
Then: callgrind_annotate --inclusive=yes --threshold=100 $CG_OUT/cg-desk.<pid>.1 | less
The '.1' dump covers only the N paced lines (2 ms apart) after a 200-line warm-up; divide PROGRAM TOTALS by N.
valgrind 3.19 cannot read the DWARF 5 the Swift 6.3 toolchain writes: give SB_BIN a copy made with
`llvm-objcopy --strip-debug` (function names stay in the symbol table). CG_ARGS passes more callgrind options, e.g.
--dump-instr=yes for code_footprint.py."""
import sys, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench, callgrind_window
N = int(sys.argv[1])
callgrind_window.run(N, "paced", lambda sender, reader: bench.measure_latency(sender.stdin, reader, N, 0.002, warm=0))
