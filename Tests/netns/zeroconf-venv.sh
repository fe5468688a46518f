# zeroconf-venv.sh: sourced by the netns test runners. Puts python-zeroconf (an mDNS stack that is not
# avahi) into a venv under .build and sets
#   ZEROCONF_PYTHON  the venv's python, or "" if zeroconf could not be installed
#   ZEROCONF_SKIP    "" or the one-line reason the zeroconf checks are skipped
# Needs ROOT (the repository). pip fetches from the package index in the root namespace; nothing else
# here touches the network.
zeroconf_venv() {
    local venv="$ROOT/.build/netns-venv"
    ZEROCONF_PYTHON=""
    ZEROCONF_SKIP=""
    mkdir -p "$ROOT/.build"
    if "$venv/bin/python" -c 'import zeroconf' 2> /dev/null; then
        ZEROCONF_PYTHON="$venv/bin/python"
    elif python3 -m venv "$venv" > "$ROOT/.build/netns-venv.log" 2>&1 \
         && "$venv/bin/pip" install --quiet zeroconf >> "$ROOT/.build/netns-venv.log" 2>&1 \
         && "$venv/bin/python" -c 'import zeroconf' 2> /dev/null; then
        ZEROCONF_PYTHON="$venv/bin/python"
    else
        ZEROCONF_SKIP="python-zeroconf could not be installed into $venv (see .build/netns-venv.log)"
    fi
}
