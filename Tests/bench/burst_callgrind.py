"""Instructions per BURST line (callgrind), desktop and/or sender.
usage: SB_BIN=/path/to/speakbridge CG_OUT=/tmp/mydir CG_SEND=1 python3 Tests/bench/burst_callgrind.py 5000
Then: callgrind_annotate --inclusive=yes --threshold=100 $CG_OUT/cg-send.<pid>.1 | less
The '.1' dump covers only the N burst lines (written at once, as bench.py's burst) after a 200-line paced warm-up,
up to the last one on the FIFO plus 0.3 s (the acks that follow); divide PROGRAM TOTALS by N."""
import sys, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import callgrind_window
N = int(sys.argv[1])


def burst(sender, reader):
    sender.stdin.write(b"".join(f"burst line {i} with some dictated words in it\n".encode() for i in range(N)))
    sender.stdin.flush()
    reader.count_lines(N)


callgrind_window.run(N, "burst", burst)
