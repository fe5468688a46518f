#!/usr/bin/env bash
# lan.sh: SpeakBridge's private test LAN for mDNS / DNS-SD.
#
# Each "host" is a Linux network namespace with its own D-Bus system bus and
# avahi-daemon.  Nothing is ever configured in the root namespace: every link is
# created with `ip -n NS`, so both veth ends are born inside namespaces.  Hosts use
# IPv4 link-local addresses (169.254.0.0/16), IPv6 is disabled in every namespace,
# and each avahi-daemon is limited to its host's one interface (allow-interfaces).
#
#   single   host a: only `lo` (multicast on); avahi on lo
#   pair     hosts a, b: one veth link "lan0" between them
#   trio     hosts a, b, c: each with "lan0" on a bridge that lives in a fourth
#            namespace (PREFIX-sw) running no daemons (for "two desktops" tests)
#
# Usage (root):
#   lan.sh start [single|pair|trio]   default pair; idempotent for the same mode
#   lan.sh stop                       kill only the PIDs recorded at start, delete only
#                                     the namespaces recorded at start; idempotent
#   lan.sh exec HOST CMD [ARG...]     run CMD in HOST with DBUS_SYSTEM_BUS_ADDRESS set
#   lan.sh avahi-restart HOST         stop and start HOST's avahi-daemon (its bus stays)
#   lan.sh avahi-stop HOST | avahi-start HOST
#   lan.sh dbus-stop HOST              stop HOST's avahi-daemon and its D-Bus bus ("no bus at all")
#   lan.sh dbus-start HOST             start the bus again (same socket path; then avahi-start)
#   lan.sh set-address HOST ADDR      replace HOST's IPv4 address (169.254.x.y[/n] only)
#   lan.sh address HOST               print HOST's IPv4 address
#   lan.sh bus HOST                   print HOST's D-Bus address
#   lan.sh hosts                      print the host namespace names, one per line
#   lan.sh status
# HOST is a namespace name from `hosts` or just its letter (a, b, c).
#
# Environment:
#   SB_LAN_STATE    state dir.  Default: `start` makes one with mktemp and writes its
#                   path to $SB_LAN_POINTER; the other commands read it from there.
#                   Concurrent runs must each set their own SB_LAN_STATE.
#   SB_LAN_POINTER  default /tmp/speakbridge-lan.current
#   SB_LAN_PREFIX   namespace/host name prefix for `start` (default sbt<pid>)
#   SB_LAN_NET      first three octets of host addresses (default 169.254.90)
#
# Exit 77 (the "skipped" code) with a one-line reason when namespaces cannot be
# made here: not root, or ip / dbus-daemon / avahi-daemon missing, or `ip netns add`
# refused.  A failed start undoes what it created.
set -euo pipefail

SKIP=77
POINTER=${SB_LAN_POINTER:-/tmp/speakbridge-lan.current}
NET=${SB_LAN_NET:-169.254.90}
LINK=lan0
MARK=.speakbridge-lan          # marks a state dir as ours (stop removes nothing else)

say()  { echo "lan.sh: $*" >&2; }
fail() { say "$*"; exit 1; }
skip() { echo "lan.sh: skipped: $*" >&2; exit $SKIP; }

# ---------------------------------------------------------------- state handling

locate_state() {               # sets STATE and PREFIX for an existing LAN
    STATE=${SB_LAN_STATE:-}
    if [ -z "$STATE" ] && [ -r "$POINTER" ]; then STATE=$(cat "$POINTER"); fi
    [ -n "$STATE" ] && [ -f "$STATE/$MARK" ] || return 1
    PREFIX=$(cat "$STATE/prefix")
}

netns_inode() { stat -L -c %i "/run/netns/$1" 2>/dev/null; }
netns_present() { [ -e "/run/netns/$1" ]; }

# True if PID is alive, sits in one of our namespaces, and was started with a
# path inside our state dir on its command line.  Guards against PID reuse.
pid_is_ours() {
    local pid=$1 ns ino link
    [[ "$pid" =~ ^[0-9]+$ ]] && [ -d "/proc/$pid" ] || return 1
    tr '\0' '\n' < "/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$STATE/" || return 1
    link=$(readlink "/proc/$pid/ns/net" 2>/dev/null) || return 1
    for ns in $(cat "$STATE/namespaces" 2>/dev/null); do
        ino=$(netns_inode "$ns") || continue
        [ "$link" = "net:[$ino]" ] && return 0
    done
    return 1
}

# Running and not a zombie (a daemon whose launcher exited is reaped by PID 1 at its own pace).
alive() { [ -r "/proc/$1/stat" ] && ! awk '{ exit ($3 == "Z") ? 0 : 1 }' "/proc/$1/stat" 2>/dev/null; }

kill_recorded() {              # $1 = pid file; TERM, wait up to 5 s, then KILL
    local file=$1 pid n
    [ -f "$file" ] || return 0
    pid=$(cat "$file")
    if pid_is_ours "$pid"; then
        kill -TERM "$pid" 2>/dev/null || true
        for n in $(seq 50); do alive "$pid" || break; sleep 0.1; done
        if pid_is_ours "$pid"; then say "pid $pid ignored TERM; killing"; kill -KILL "$pid" 2>/dev/null || true; fi
    fi
    rm -f "$file"
}

resolve_host() {               # HOST or its letter -> namespace name (must be a host)
    local h
    for h in $(cat "$STATE/hosts"); do
        if [ "$h" = "$1" ] || [ "$h" = "$PREFIX-$1" ]; then echo "$h"; return 0; fi
    done
    fail "unknown host '$1' (hosts: $(tr '\n' ' ' < "$STATE/hosts"))"
}

# ---------------------------------------------------------------- daemons

write_configs() {              # $1 = host namespace, $2 = interface for avahi
    local d="$STATE/$1"
    cat > "$d/dbus.conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<!-- Private system bus of test host $1; reachable only through this socket. -->
<busconfig>
  <type>system</type>
  <listen>unix:path=$d/bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
EOF
    cat > "$d/avahi-daemon.conf" <<EOF
# avahi-daemon of test host $1 (SpeakBridge lan.sh); IPv4 on $2 only.
[server]
host-name=$1
domain-name=local
allow-interfaces=$2
use-ipv4=yes
use-ipv6=no
enable-dbus=yes
ratelimit-interval-usec=1000000
ratelimit-burst=1000
[wide-area]
enable-wide-area=no
[publish]
publish-hinfo=no
publish-workstation=no
[reflector]
enable-reflector=no
EOF
}

start_dbus() {                 # $1 = host namespace
    local d="$STATE/$1" n
    rm -f "$d/bus"
    # `ip netns exec` exec()s its command, so $! is dbus-daemon's own PID.
    ip netns exec "$1" dbus-daemon --config-file="$d/dbus.conf" --nofork --nopidfile --nosyslog \
        < /dev/null > "$d/dbus.log" 2>&1 &
    echo $! > "$d/dbus.pid"
    for n in $(seq 50); do [ -S "$d/bus" ] && return 0; sleep 0.1; done
    fail "dbus-daemon of $1 did not come up: $(tail -n 2 "$d/dbus.log")"
}

start_avahi() {                # $1 = host namespace
    local d="$STATE/$1" n pid
    : > "$d/avahi.log"
    # The mount namespace that `ip netns exec` gives its command is a private slave
    # copy: tmpfs over /run (avahi's pid file and socket live in /run/avahi-daemon,
    # which must not be shared between daemons) and over /etc/avahi/services (the
    # machine's static services must not be published) stays invisible outside.
    DBUS_SYSTEM_BUS_ADDRESS="unix:path=$d/bus" ip netns exec "$1" sh -c '
        mount -t tmpfs -o mode=0755,size=1m speakbridge-lan /run &&
        mkdir /run/avahi-daemon &&
        mount -t tmpfs -o mode=0755,size=1m speakbridge-lan /etc/avahi/services &&
        exec avahi-daemon --file="$1" --no-drop-root --no-chroot --no-proc-title --no-rlimits
    ' speakbridge-lan-avahi "$d/avahi-daemon.conf" < /dev/null >> "$d/avahi.log" 2>&1 &
    pid=$!
    echo "$pid" > "$d/avahi.pid"
    for n in $(seq 100); do
        grep -q "Server startup complete" "$d/avahi.log" && return 0
        alive "$pid" || fail "avahi-daemon of $1 exited: $(tail -n 2 "$d/avahi.log")"
        sleep 0.1
    done
    fail "avahi-daemon of $1 not ready after 10 s: $(tail -n 2 "$d/avahi.log")"
}

# ---------------------------------------------------------------- namespaces

new_netns() {                  # $1 = name; recorded before anything else happens
    ip netns add "$1"
    echo "$1" >> "$STATE/namespaces"
    # IPv6 off before any link exists, so no link ever gets an IPv6 address.
    ip netns exec "$1" sh -c 'echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6
                              echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6' 2>/dev/null || true
    ip -n "$1" link set lo up
}

host_link_up() {               # $1 = host namespace, $2 = host number (address)
    ip -n "$1" addr add "$NET.$2/24" dev "$LINK"
    ip -n "$1" link set "$LINK" multicast on up
}

preflight() {
    [ "$(id -u)" = 0 ] || skip "needs root to create network namespaces"
    local t
    for t in ip dbus-daemon avahi-daemon mount; do
        command -v "$t" > /dev/null || skip "$t not installed (apt-get install -y iproute2 dbus avahi-daemon)"
    done
}

cmd_start() {
    local mode=${1:-pair} h i letters
    case "$mode" in single) letters="a" ;; pair) letters="a b" ;; trio) letters="a b c" ;;
        *) fail "unknown mode '$mode' (single|pair|trio)" ;; esac
    preflight
    if locate_state; then
        if [ "$(cat "$STATE/mode")" = "$mode" ] && all_alive; then say "already running ($mode) in $STATE"; return 0; fi
        say "replacing the LAN in $STATE"; cmd_stop
    fi
    STATE=${SB_LAN_STATE:-}
    if [ -z "$STATE" ]; then STATE=$(mktemp -d /tmp/speakbridge-lan.XXXXXX); fi
    mkdir -p "$STATE"
    touch "$STATE/$MARK"
    [ -n "${SB_LAN_STATE:-}" ] || echo "$STATE" > "$POINTER"
    PREFIX=${SB_LAN_PREFIX:-sbt$$}
    [ ${#STATE} -le 80 ] || fail "state dir path too long for a unix socket: $STATE"
    echo "$PREFIX" > "$STATE/prefix"
    echo "$mode" > "$STATE/mode"
    : > "$STATE/namespaces"; : > "$STATE/hosts"
    for h in $letters; do echo "$PREFIX-$h" >> "$STATE/hosts"; done
    for h in $(cat "$STATE/hosts") $([ "$mode" = trio ] && echo "$PREFIX-sw"); do
        netns_present "$h" && fail "namespace $h already exists and is not ours; pick another SB_LAN_PREFIX"
    done

    trap 'rc=$?; if [ $rc -ne 0 ]; then say "start failed; cleaning up"; cmd_stop; fi; exit $rc' EXIT
    # The first `ip netns add` doubles as the check that namespaces work here at all.
    if ! ip netns add "$PREFIX-a" 2> "$STATE/netns.err"; then
        local why; why=$(head -n 1 "$STATE/netns.err")
        trap - EXIT; cmd_stop; skip "cannot create a network namespace: $why"
    fi
    ip netns del "$PREFIX-a"

    for h in $(cat "$STATE/hosts"); do new_netns "$h"; done
    case "$mode" in
        single)
            ip -n "$PREFIX-a" link set lo multicast on
            ;;
        pair)
            ip -n "$PREFIX-a" link add "$LINK" type veth peer name "$LINK" netns "$PREFIX-b"
            host_link_up "$PREFIX-a" 1; host_link_up "$PREFIX-b" 2
            ;;
        trio)
            new_netns "$PREFIX-sw"
            # Snooping off: with no IGMP querier on this LAN, flood all multicast.
            ip -n "$PREFIX-sw" link add br0 type bridge mcast_snooping 0
            ip -n "$PREFIX-sw" link set br0 up
            i=1
            for h in $letters; do
                ip -n "$PREFIX-sw" link add "port-$h" type veth peer name "$LINK" netns "$PREFIX-$h"
                ip -n "$PREFIX-sw" link set "port-$h" master br0 up
                host_link_up "$PREFIX-$h" $i
                i=$((i + 1))
            done
            ;;
    esac
    for h in $(cat "$STATE/hosts"); do
        mkdir -p "$STATE/$h"
        write_configs "$h" "$([ "$mode" = single ] && echo lo || echo "$LINK")"
        start_dbus "$h"
        start_avahi "$h"
        say "$h: dbus $(cat "$STATE/$h/dbus.pid"), avahi $(cat "$STATE/$h/avahi.pid"), $(host_address "$h")"
    done
    trap - EXIT
    say "LAN up ($mode) in $STATE"
}

all_alive() {
    local h
    for h in $(cat "$STATE/hosts"); do
        netns_present "$h" || return 1
        pid_is_ours "$(cat "$STATE/$h/dbus.pid" 2>/dev/null)" || return 1
        pid_is_ours "$(cat "$STATE/$h/avahi.pid" 2>/dev/null)" || return 1
    done
}

cmd_stop() {
    if [ -z "${STATE:-}" ] && ! locate_state; then say "nothing to stop"; return 0; fi
    [ -f "$STATE/$MARK" ] || { say "nothing to stop in ${STATE}"; return 0; }
    local h left
    for h in $(cat "$STATE/hosts" 2>/dev/null); do
        kill_recorded "$STATE/$h/avahi.pid"
        kill_recorded "$STATE/$h/dbus.pid"
    done
    for h in $(cat "$STATE/namespaces" 2>/dev/null); do
        netns_present "$h" || continue
        left=$(ip netns pids "$h" 2>/dev/null | tr '\n' ' ')
        [ -z "$left" ] || say "warning: processes not started by lan.sh still in $h: $left(left alone)"
        ip netns del "$h"
    done
    if [ -r "$POINTER" ] && [ "$(cat "$POINTER")" = "$STATE" ]; then rm -f "$POINTER"; fi
    rm -rf "$STATE"
}

host_address() { ip -n "$1" -4 -o addr show dev "$([ "$(cat "$STATE/mode")" = single ] && echo lo || echo "$LINK")" \
                     | awk '{print $4}' | cut -d/ -f1 | head -n 1; }

cmd_set_address() {            # $1 = host, $2 = 169.254.x.y[/n]
    local h addr=$2
    h=$(resolve_host "$1")
    [ "$(cat "$STATE/mode")" != single ] || fail "set-address needs pair or trio"
    [[ "$addr" =~ ^169\.254\.[0-9]{1,3}\.[0-9]{1,3}(/[0-9]{1,2})?$ ]] || fail "only IPv4 link-local addresses (169.254.x.y) are allowed"
    [[ "$addr" == */* ]] || addr="$addr/24"
    ip -n "$h" -4 addr flush dev "$LINK"
    ip -n "$h" addr add "$addr" dev "$LINK"
}

cmd_status() {
    local h
    say "mode $(cat "$STATE/mode"), state $STATE"
    for h in $(cat "$STATE/hosts"); do
        printf '%s  %-15s dbus %s avahi %s\n' "$h" "$(host_address "$h")" \
            "$(pid_is_ours "$(cat "$STATE/$h/dbus.pid" 2>/dev/null)" && echo up || echo DOWN)" \
            "$(pid_is_ours "$(cat "$STATE/$h/avahi.pid" 2>/dev/null)" && echo up || echo DOWN)"
    done
}

need_lan() { locate_state || fail "no LAN running (set SB_LAN_STATE or run: $0 start)"; }

case "${1:-}" in
    start)          cmd_start "${2:-pair}" ;;
    stop)           STATE=; locate_state || true; cmd_stop ;;
    exec)           need_lan; h=$(resolve_host "${2:?usage: exec HOST CMD...}"); shift 2
                    [ $# -gt 0 ] || fail "usage: exec HOST CMD..."
                    DBUS_SYSTEM_BUS_ADDRESS="unix:path=$STATE/$h/bus" SB_LAN_HOST="$h" exec ip netns exec "$h" "$@" ;;
    avahi-restart)  need_lan; h=$(resolve_host "${2:?host}"); kill_recorded "$STATE/$h/avahi.pid"; start_avahi "$h" ;;
    avahi-stop)     need_lan; h=$(resolve_host "${2:?host}"); kill_recorded "$STATE/$h/avahi.pid" ;;
    avahi-start)    need_lan; h=$(resolve_host "${2:?host}")
                    pid_is_ours "$(cat "$STATE/$h/avahi.pid" 2>/dev/null)" || start_avahi "$h" ;;
    dbus-stop)      need_lan; h=$(resolve_host "${2:?host}")     # avahi first: it needs the bus
                    kill_recorded "$STATE/$h/avahi.pid"; kill_recorded "$STATE/$h/dbus.pid" ;;
    dbus-start)     need_lan; h=$(resolve_host "${2:?host}")
                    pid_is_ours "$(cat "$STATE/$h/dbus.pid" 2>/dev/null)" || start_dbus "$h" ;;
    set-address)    need_lan; cmd_set_address "${2:?host}" "${3:?address}" ;;
    address)        need_lan; host_address "$(resolve_host "${2:?host}")" ;;
    bus)            need_lan; h=$(resolve_host "${2:?host}"); echo "unix:path=$STATE/$h/bus" ;;
    hosts)          need_lan; cat "$STATE/hosts" ;;
    status)         need_lan; cmd_status ;;
    *)              sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 2 ;;
esac
