#!/usr/bin/env python3
"""Where a quiet machine stalls a thread for milliseconds (what makes the 100-device bench's worst devices late).

usage: python3 Tests/bench/stalls.py [SECONDS] [THRESHOLD_MS]     (defaults 30 s, 3 ms)
       python3 Tests/bench/stalls.py --noise WHEN                (one line, 3 s: what `make bench` prints)

Flow: one process per CPU, pinned, sleeps 1 ms in a loop and notes every wake-up that comes more than THRESHOLD_MS
late. Meanwhile the parent samples, every 2 ms, the CPU time of the machine's kernel threads that are known to run in
bursts (DAMON's `kdamond.*`, `kswapd*`) and the hypervisor's steal time (/proc/stat). Each late wake-up is printed
with what coincided with it (within 10 ms): a kdamond/kswapd burst (its CPU time grew by more than 2 ms in one
sample), steal time, or nothing known. A summary line counts them.

Found with it (seventh performance session): this VM's DAMON `pageout` scheme (`/sys/kernel/mm/damon`) runs its
kernel thread about 1 ms every 0.5 s (sampling) and 14–20 ms every ~5.2 s (aggregation and the scheme), and wake-ups
on either CPU come 4–5 ms late at those moments — the "clusters of late lines a few times a minute" of the 100-device
bench (README → Benchmarks). Nothing SpeakBridge does can move them; socat and ssh see the same stalls.
Loopback only: nothing here touches the network. Stops what it started.
"""
import os, sys, time, multiprocessing


def sleeper(cpu, seconds, threshold, out):
    os.sched_setaffinity(0, {cpu})
    late, end = [], time.monotonic() + seconds
    while True:
        before = time.monotonic()
        if before > end:
            break
        time.sleep(0.001)
        after = time.monotonic()
        if (after - before) * 1e3 > threshold:
            late.append((after, (after - before) * 1e3))
    out.put((cpu, late))


ALL_CPUS = sorted(os.sched_getaffinity(0))  # when first imported: a bench that pins itself later still measures all


def run_sleepers(seconds, threshold, meanwhile=None):
    """One pinned `sleeper` per CPU for `seconds`; `meanwhile()` runs in this process until they are done. Returns
    [(cpu, [(monotonic time, ms) of each late wake-up])]."""
    out = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=sleeper, args=(cpu, seconds, threshold, out)) for cpu in ALL_CPUS]
    for p in procs:
        p.start()
    if meanwhile:
        meanwhile()
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
    return results


def noise_line(when, seconds=3.0, threshold=2.0):
    """How much this machine stalls a sleeping thread right now, idle, for a benchmark to print beside its tail
    figures (`make bench`, devices.py): late = a 1 ms sleep that took more than `threshold` ms."""
    late = [ms for _, wakes in run_sleepers(seconds, threshold) for _, ms in wakes]
    return (f"machine noise {when}, idle (stalls.py: a pinned 1 ms sleeper per CPU, {seconds:g} s): "
            f"{len(late) / seconds:.1f} wake-ups a second more than {threshold:g} ms late over {len(ALL_CPUS)} CPUs, "
            f"the latest {max(late, default=0.0):.1f} ms")


def kernel_threads():
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue
        if name.startswith("kdamond") or name.startswith("kswapd"):
            found[int(pid)] = name
    return found


def runtime_ns(pid):
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def steal_ticks():
    with open("/proc/stat") as f:
        return int(f.readline().split()[8])


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--noise":  # run.sh: one line, `noise_line`
        print(noise_line(sys.argv[2]))
        return
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
    threshold = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
    threads = kernel_threads()
    with open("/proc/loadavg") as f:
        load = float(f.read().split()[0])
    print(f"load average {load:.2f}" + (" (busy machine: late wake-ups from other work too)" if load > 0.5 else ""))
    events = []  # (time, what)
    end = time.monotonic() + seconds + 0.1

    def watch():
        last = {pid: runtime_ns(pid) for pid in threads}
        steal = steal_ticks()
        while time.monotonic() < end:
            time.sleep(0.002)
            now = time.monotonic()
            for pid, name in threads.items():
                value = runtime_ns(pid)
                if value is not None and last[pid] is not None and value - last[pid] > 2_000_000:
                    events.append((now, f"{name} ran {(value - last[pid]) / 1e6:.1f} ms"))
                last[pid] = value
            s = steal_ticks()
            if s > steal:
                events.append((now, f"steal {s - steal} tick(s)"))
            steal = s

    results = run_sleepers(seconds, threshold, watch)
    known = unknown = 0
    start = end - seconds - 0.1
    for cpu, late in sorted(results):
        for at, ms in late:
            near = sorted({what.split(" ")[0] for t, what in events if abs(t - at) <= 0.010})
            known += bool(near)
            unknown += not near
            print(f"cpu {cpu} +{at - start:7.3f} s: woke {ms:5.1f} ms late; coincided with: {', '.join(near) or '-'}")
    bursts, previous = [], {}
    for t, what in events:  # one burst spans several 2 ms samples: count those within 10 ms of each other once
        name = what.split(" ")[0]
        if name != "steal" and t - previous.get(name, -1.0) > 0.010:
            bursts.append((t, name))
        previous[name] = t
    print(f"{seconds:.0f} s, threshold {threshold} ms: {known + unknown} late wake-up(s), {known} beside a kernel-thread "
          f"burst or steal, {unknown} with nothing known; kernel-thread bursts > 2 ms: {len(bursts)} "
          f"({', '.join(sorted(set(threads.values()))) or 'no kdamond/kswapd on this machine'})")


if __name__ == "__main__":
    main()
