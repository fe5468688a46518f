#!/usr/bin/env bash
# Builds the Debian package; called by `make deb` with BIN (the release binary), GENMAN (generate-manual) and OUTDIR.
#
# Flow: stage with packaging/install.sh (PREFIX=/usr, Debian's directories, binary stripped, no manifest: dpkg
# keeps its own list) -> Depends from dpkg-shlibdeps on the staged binary (the Debian packages of the shared
# libraries it links, with their minimum versions), plus the libraries it dlopens -> DEBIAN/control and md5sums
# -> dpkg-deb --build.
# The version is the binary's own `--version` (one place: SpeakBridgeCommand's configuration).
# DEB_COMPRESS=gzip builds faster (the tests use it); the default, xz, is smaller.
set -euo pipefail
: "${BIN:?}" "${GENMAN:?}" "${OUTDIR:?}"
root=$(cd "$(dirname "$0")/.." && pwd)

die() { printf 'speakbridge: error: %s\n' "$1" >&2; [ -z "${2:-}" ] || printf 'speakbridge: hint: %s\n' "$2" >&2; exit 1; }
for tool in dpkg-deb dpkg-shlibdeps readelf; do
    command -v "$tool" >/dev/null || die "$tool is missing" "apt-get install dpkg-dev"
done

version=$("$BIN" --version)
arch=$(dpkg --print-architecture)
maintainer=${DEB_MAINTAINER:-$(git -C "$root" log -1 --format='%an <%ae>' 2>/dev/null || echo 'SpeakBridge maintainers <root@localhost>')}
stage="$OUTDIR/root"
rm -rf "$stage" "$OUTDIR/shlibs"
mkdir -p "$stage"

DESTDIR="$stage" PREFIX=/usr BINDIR=/usr/bin MANDIR=/usr/share/man USERUNITDIR=/usr/lib/systemd/user \
    BASHCOMPDIR=/usr/share/bash-completion/completions ZSHCOMPDIR=/usr/share/zsh/vendor-completions \
    FISHCOMPDIR=/usr/share/fish/vendor_completions.d VIMDIR=/usr/share/vim/vimfiles NVIMDIR=/usr/share/nvim/site \
    EMACSDIR=/usr/share/emacs/site-lisp MANIFEST= STRIP=yes BIN="$BIN" GENMAN="$GENMAN" \
    MANDATE="${MANDATE:-}" bash "$root/packaging/install.sh" install >/dev/null

# dpkg-shlibdeps wants a debian/control beside it and the DEBIAN directory in the staged tree.
mkdir -p "$stage/DEBIAN" "$OUTDIR/shlibs/debian"
printf 'Source: speakbridge\n\nPackage: speakbridge\nArchitecture: any\n' >"$OUTDIR/shlibs/debian/control"
depends=$(cd "$OUTDIR/shlibs" && dpkg-shlibdeps -O "$stage/usr/bin/speakbridge" 2>"$OUTDIR/shlibdeps.log") ||
    die "dpkg-shlibdeps failed: $(cat "$OUTDIR/shlibdeps.log")"
depends=${depends#shlibs:Depends=}
[ -n "$depends" ] || die "dpkg-shlibdeps found no dependencies"
# libsecret, avahi-client and libqrencode are opened with dlopen on first use (SharedLibrary in SpeakBridgeSupport;
# LibSecret, LibAvahi, LibQREncode), not linked, so dpkg-shlibdeps cannot see them. They stay in Depends, not
# Recommends: the Secret Service is the default secret store, mDNS is on by default in `serve`, `join` and `send`,
# and `pair` shows a QR code; without them those features stop with an error naming the package. Minimum versions:
# the newest symbol SpeakBridge resolves, from the packages' symbols files (libsecret: secret_password_searchv_sync
# and secret_retrievable_get_attributes, 0.19.1; avahi-client and avahi-common: all 0.6.16; libqrencode: 3.2.0).
depends="$depends, libavahi-client3 (>= 0.6.16), libsecret-1-0 (>= 0.19.1), libqrencode4 (>= 3.2.0)"
# `make release` packs relative relocations (DT_RELR): the binary then needs the GLIBC_ABI_DT_RELR version, which
# glibc has since 2.36 and which dpkg-shlibdeps does not count (its libc6 minimum comes from the symbols only).
if readelf -V "$stage/usr/bin/speakbridge" | grep -q 'GLIBC_ABI_DT_RELR'; then
    depends="$depends, libc6 (>= 2.36)"
fi

installed_kb=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat >"$stage/DEBIAN/control" <<EOF
Package: speakbridge
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $installed_kb
Depends: $depends
Recommends: xclip | wl-clipboard | xsel, libxtst6 | wtype | ydotool, avahi-daemon
Suggests: gnome-keyring
Section: utils
Priority: optional
Description: dictation from a phone (or any program) to the Linux desktop
 A desktop daemon (speakbridge serve) receives encrypted dictation from paired
 devices over the LAN and writes it to sinks: stdout, a FIFO read by the Vim,
 Neovim and Emacs plugins, the clipboard, or keystrokes. The same binary is the
 client (speakbridge join, speakbridge send).
 .
 Includes man pages, bash/zsh/fish completions and a systemd user unit
 (systemctl --user enable --now speakbridge).
EOF
(cd "$stage" && find usr -type f -print0 | sort -z | xargs -0 md5sum) >"$stage/DEBIAN/md5sums"
chmod 0644 "$stage/DEBIAN/control" "$stage/DEBIAN/md5sums"

deb="$OUTDIR/speakbridge_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Z"${DEB_COMPRESS:-xz}" --build "$stage" "$deb" >/dev/null
echo "$deb"
