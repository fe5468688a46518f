#!/usr/bin/env python3
"""`discover` on a LAN with real Avahi (performance issue: returns within 1 s of a desktop answering).

Flow: Tests/netns/lan.sh starts a private two-host LAN (network namespaces, a dbus and an avahi-daemon each; never
a real interface); host a runs `serve` (mDNS on), host b pairs with it (`join`), and has a second, unpaired home.
Measured in b, ROUNDS times each, process start → exit:
  1. paired, the desktop already announced: `discover --json --timeout 10`;
  2. unpaired (nothing known: it cannot tell when the last desktop answered), the desktop already announced:
     `discover --json --timeout 10`, and the default timeout (3 s);
  3. paired, `discover --timeout 10` started first, then the desktop: from the desktop's answer (the moment an
     `avahi-browse -rp` running in b beside it resolved the desktop) to discover's exit; and from serve's start
     (which includes mDNS probing, ~0.75 s by RFC 6762, before the desktop may answer at all).
Needs root, ip, dbus-daemon and avahi-daemon; otherwise prints why it skipped and exits 0 (the bench goes on).
Stops what it started by PID, and the LAN.
"""
import argparse, json, os, shutil, signal, statistics, subprocess, sys, tempfile, threading, time

here = os.path.dirname(os.path.abspath(__file__))
LAN = os.path.join(here, "..", "netns", "lan.sh")


def lan(*args, **kw):
    return subprocess.run(["bash", LAN, *args], **kw)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--rounds", type=int, default=int(os.environ.get("ROUNDS", 3)))
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("discover: skipped: network namespaces need root (make bench runs as root)")
        return 0
    missing = [t for t in ("ip", "dbus-daemon", "avahi-daemon") if not shutil.which(t)]
    if missing:
        print(f"discover: skipped: {', '.join(missing)} not installed (apt-get install -y iproute2 dbus avahi-daemon)")
        return 0
    state = tempfile.mkdtemp(prefix="sb-lan-")
    work = tempfile.mkdtemp(prefix="sb-discover-")
    os.chmod(work, 0o755)
    env = dict(os.environ, SB_LAN_STATE=state, SB_LAN_PREFIX=f"sbd{os.getpid()}")
    procs = []
    try:
        started = lan("start", "pair", env=env, capture_output=True, text=True)
        if started.returncode != 0:
            why = (started.stderr.strip().splitlines() or ["?"])[-1]
            print(f"discover: skipped: the namespaced LAN did not start ({why})")
            return 0
        desk, phone, stranger = (os.path.join(work, n) for n in ("desk", "phone", "stranger"))
        for d in (desk, phone, stranger):
            os.mkdir(d, 0o700)

        def sb(host, home, *cmd, **kw):
            return lan("exec", host, args.bin, *cmd, "--home", home, env=env, **kw)

        def serve():
            p = subprocess.Popen(["bash", LAN, "exec", "a", args.bin, "serve", "--home", desk, "--listen", "0.0.0.0:0",
                                  "--sink", "stdout"], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            procs.append(p)
            return p

        def announced(timeout=30):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                st = sb("a", desk, "status", "--json", capture_output=True, text=True)
                if st.returncode == 0 and json.loads(st.stdout).get("mdns", {}).get("active"):
                    return json.loads(st.stdout)["id"]
                time.sleep(0.1)
            raise RuntimeError("the desktop did not announce itself")

        def discover(home, timeout):
            t0 = time.perf_counter()
            out = sb("b", home, "discover", "--json", "--timeout", str(timeout), capture_output=True, text=True)
            return (time.perf_counter() - t0) * 1e3, out.stdout

        daemon = serve()
        desk_id = announced()
        code = json.loads(sb("a", desk, "pair", "--json", capture_output=True, text=True, check=True).stdout)["code"]
        sb("b", phone, "join", code, "--name", "bench", capture_output=True, check=True)
        time.sleep(1.5)  # let the announcement settle (a fresh avahi cache in b for every discover run below)
        res = {"paired, announced (--timeout 10)": [], "unpaired, announced (--timeout 10)": [],
               "unpaired, announced (default --timeout 3)": [],
               "paired, desktop starts after discover: serve's start → exit": [],
               "paired, desktop starts after discover: answered → exit": []}
        for _ in range(args.rounds):
            ms, out = discover(phone, 10)
            if desk_id not in out:
                raise RuntimeError(f"discover did not list the desktop: {out!r}")
            res["paired, announced (--timeout 10)"].append(ms)
            res["unpaired, announced (--timeout 10)"].append(discover(stranger, 10)[0])
            res["unpaired, announced (default --timeout 3)"].append(discover(stranger, 3)[0])
        for _ in range(args.rounds):
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=10)
            time.sleep(1.0)
            t0 = time.perf_counter()
            finder = subprocess.Popen(["bash", LAN, "exec", "b", args.bin, "discover", "--json", "--timeout", "10",
                                       "--home", phone], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            procs.append(finder)
            watcher = subprocess.Popen(["bash", LAN, "exec", "b", "avahi-browse", "-rp", "_speakbridge._tcp"],
                                       env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            procs.append(watcher)
            seen = []

            def watch(w=watcher, seen=seen):
                for raw in w.stdout:
                    if raw.startswith(b"=") and desk_id.encode() in raw:
                        seen.append(time.perf_counter())
                        return
            th = threading.Thread(target=watch, daemon=True)
            th.start()
            time.sleep(0.3)  # discover and avahi-browse are browsing
            t_serve = time.perf_counter()
            daemon = serve()
            out, _ = finder.communicate(timeout=30)
            t_end = time.perf_counter()
            if desk_id.encode() not in out:
                raise RuntimeError("discover did not list the desktop that started")
            res["paired, desktop starts after discover: serve's start → exit"].append((t_end - t_serve) * 1e3)
            th.join(timeout=10)
            watcher.send_signal(signal.SIGTERM)
            watcher.wait(timeout=10)
            if seen:
                res["paired, desktop starts after discover: answered → exit"].append((t_end - seen[0]) * 1e3)
            announced()
        print(f"discover on a namespaced LAN with avahi (process start → exit, ms; median [range] of {args.rounds})")
        print("| case | ms |")
        print("| --- | --- |")
        for k, v in res.items():
            if v:
                print(f"| {k} | {statistics.median(v):.0f} [{min(v):.0f}–{max(v):.0f}] |")
        return 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
        lan("stop", env=env, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
