# SpeakBridge — two commands do all the set-up on a fresh Debian machine:
#   make run    install what the daemon needs, build a release binary, start the daemon (stdout sink, pairing QR)
#   make test   install what the tests need, build, run the whole suite (unit, end-to-end, network namespaces)
# `make bench` measures latency, throughput, idle CPU and memory, reconnect after a desktop restart, 100 devices at
# once against one, and `discover` on a namespaced LAN (figures go in the README).
# `make fuzz` runs the libFuzzer targets (Fuzz/README.md), `make sanitize` the suite under ASan and TSan,
# `make load` 100 paired devices x 10,000 lines against one release daemon.
# `make torture` 1,000 SIGKILL/restart cycles of a streaming daemon, then of the client; counts lost and repeated
# lines per sink.

SWIFT      ?= swift
SCRATCH    ?= .build
RUN_ARGS   ?=
BIN_DEBUG   = $(SCRATCH)/debug/speakbridge
BIN_RELEASE = $(SCRATCH)/release/speakbridge

# Debian packages: building and running / testing (Xvfb and xclip for the clipboard sink, libX11/libXtst for typing
# on X11 (loaded at run time), xterm, sway, foot, wtype and weston for the typing tests (wl-clipboard for the copy to a
# compositor of ours, not another user's), avahi and iproute2 for
# the namespaced mDNS LAN, socat as the benchmark floor, python3-venv for the independent Python client; neovim, vim,
# emacs-nox and python3-pynvim for the editor plugins' tests; chromium, chromium-driver and python3-selenium for the
# browser page's tests; libfuse3-dev, fuse3 and gcc (/usr/bin/cc) for the failing disk of the fsync-failure tests, Tests/fuse/failfs.c,
# compiled by the tests: libfuse3 because fuse-python 1.0.5 crashes in fsyncdir, so it could not fail a directory fsync).
DEB_BUILD = libsodium-dev libwebsockets-dev libqrencode-dev libavahi-client-dev libsecret-1-dev libssl-dev pkg-config
DEB_RUN   = xclip libx11-6 libxtst6
DEB_TEST  = xvfb xclip xsel xdotool xterm x11-xkb-utils sway foot wtype weston wl-clipboard libxtst6 zbar-tools gnome-keyring libsecret-tools socat avahi-daemon avahi-utils dbus iproute2 python3 python3-venv procps \
            dpkg-dev man-db systemd zsh fish chromium chromium-driver python3-selenium curl openssl \
            neovim vim emacs-nox python3-pynvim libfuse3-dev fuse3 gcc

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test bench build release deps-build deps-run deps-test deps-bench unit e2e netns clean vectors \
        fuzz fuzz-short fuzz-merge fuzz-seeds sanitize load torture

define apt_install
	@missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
	fi
endef

deps-build:
	$(call apt_install,$(DEB_BUILD))

deps-run: deps-build
	$(call apt_install,$(DEB_RUN))

deps-test: deps-build
	$(call apt_install,$(DEB_TEST))

# The release binary links the Swift runtime statically (a smaller idle RSS than with the toolchain's shared
# libraries, figures in the README's Benchmarks; runs without them). lld, because gold prints a "mktemp is dangerous" warning for the static
# FoundationEssentials archive (the toolchain's code, not ours; lld does not print .gnu.warning notes).
# Each function in its own section, and the ones the daemon runs first (packaging/speakbridge.order, regenerated
# by packaging/order-symbols.sh; stale names are ignored): that code then spans a few 64 KiB fault-around windows
# instead of most of the text segment (idle RSS with a client 17.8 -> 14.5 MiB). A release build dir made before
# -function-sections keeps its objects (the driver does not recompile for a -Xfrontend change): rm -rf .build/release/
# once. Relative relocations packed (DT_RELR, glibc >= 2.36): 8 KB instead of a 1 MB table that the loader reads at
# every start (-> 13.6 MiB). Full RELRO (-z now): every symbol bound at start, so the GOT is read-only with the rest
# of the relocated data (a network daemon's hardening; +0.4 M instructions and +13 page faults at a start, README).
# libstdc++ linked statically (packaging/static-libstdc++/libstdc++.so, a linker script naming the archive): the
# Swift runtime's C++ code is static already, and the shared libstdc++ cost every start ~4,300 symbol bindings.
# --no-export-dynamic undoes the toolchain's -export-dynamic: nothing looks our symbols up at run time, and the
# loader then searches 496 dynamic symbols of ours instead of 6,974 for every symbol of every library.
# --disable-local-rpath: no RUNPATH $ORIGIN. With it the loader first looked for every library beside the binary
# (about 25 failed openat/stat calls at each start), and a libsodium.so.23 or libcrypto.so.3 that another user could
# drop beside a binary run from a shared directory would have been loaded; the static runtime needs none there.
RELEASE_FLAGS = -c release --static-swift-stdlib -Xswiftc -use-ld=lld -Xswiftc -Xfrontend -Xswiftc -function-sections \
                -Xlinker --symbol-ordering-file=$(CURDIR)/packaging/speakbridge.order -Xlinker --no-warn-symbol-ordering -Xlinker -z -Xlinker pack-relative-relocs -Xlinker -z -Xlinker now \
                -Xswiftc -L$(CURDIR)/packaging/static-libstdc++ -Xlinker --no-export-dynamic --disable-local-rpath
release: deps-build
	$(SWIFT) build $(RELEASE_FLAGS) --scratch-path $(SCRATCH)

build: deps-build
	$(SWIFT) build --scratch-path $(SCRATCH)

run: deps-run release
	$(BIN_RELEASE) serve $(RUN_ARGS)

# The whole suite: unit and end-to-end tests (real processes, real sockets on loopback, Xvfb), then the tests that
# need network namespaces (skipped with a one-line reason when they cannot be created).
test: deps-test
	$(SWIFT) build --build-tests --scratch-path $(SCRATCH)
	bash Tests/packaging/no-foundation.sh $(BIN_DEBUG)
	SPEAKBRIDGE_BIN=$(CURDIR)/$(BIN_DEBUG) SPEAKBRIDGE_VECTORS_BIN=$(CURDIR)/$(SCRATCH)/debug/speakbridge-vectors \
	  SWIFT=$(SWIFT) bash Tests/swift-test.sh --scratch-path $(SCRATCH)
	@$(MAKE) --no-print-directory fuzz-short
	SPEAKBRIDGE_BIN=$(CURDIR)/$(BIN_DEBUG) bash Tests/python/run.sh
	bash Tests/python/smoke-examples.sh
	SPEAKBRIDGE_BIN=$(CURDIR)/$(BIN_DEBUG) bash Tests/web/run.sh
	SCRATCH=$(SCRATCH) bash Tests/packaging/run.sh
	SPEAKBRIDGE_BIN=$(CURDIR)/$(BIN_DEBUG) bash Tests/editors/run.sh
	SPEAKBRIDGE_BIN=$(CURDIR)/$(BIN_DEBUG) CYCLES=$(TORTURE_SHORT_CYCLES) bash Tests/torture/run.sh
	@$(MAKE) --no-print-directory netns

# SIGKILL/restart cycles of the daemon, then of the client, during a stream: lost and duplicated chunks on the
# transcript file, the jsonl FIFO as read by the Neovim plugin and the raw fifo: sink, against what the docs promise
# (Tests/torture/README.md). `test` runs TORTURE_SHORT_CYCLES of each on the debug binary.
TORTURE_CYCLES       ?= 1000
TORTURE_SHORT_CYCLES ?= 10
torture: deps-test release
	SPEAKBRIDGE_BIN=$(CURDIR)/$(BIN_RELEASE) CYCLES=$(TORTURE_CYCLES) bash Tests/torture/run.sh

# Regenerates Pairing/vectors/ (make test checks they are current).
vectors:
	$(SWIFT) run --scratch-path $(SCRATCH) speakbridge-vectors Pairing/vectors

# Exit status 77 = "cannot create namespaces here": the script has said why in one line; not a failure.
netns:
	@bash Tests/netns/run-discovery-tests.sh; rc=$$?; [ $$rc = 0 ] || [ $$rc = 77 ]
	@SPEAKBRIDGE_BIN=$(CURDIR)/$(BIN_DEBUG) bash Tests/netns/run-lan-e2e.sh; rc=$$?; [ $$rc = 0 ] || [ $$rc = 77 ]

# The comparison rows: a private sshd on loopback (its own host key and config in a temp dir), strace for syscall counts.
DEB_BENCH = openssh-server openssh-client strace util-linux

deps-bench:
	$(call apt_install,$(DEB_BENCH))

bench: deps-test deps-bench release
	BIN=$(CURDIR)/$(BIN_RELEASE) bash Tests/bench/run.sh
	BIN=$(CURDIR)/$(BIN_RELEASE) bash Tests/bench/flood.sh

# libFuzzer targets (Fuzz/README.md), built with -sanitize=fuzzer,address in their own scratch dir (.build-fuzz).
# fuzz: at least 10 million executions in total (FUZZ_TOTAL_RUNS), a summary table, fails on any crash or broken
# invariant (reproducer in .build-fuzz/artifacts/). fuzz-short: every target for FUZZ_SECONDS (3) s, run by `test`.
# fuzz-merge: rewrite Fuzz/corpus/ as the fewest inputs covering every edge so far (commit it); fuzz-seeds: add the
# seeds from Pairing/vectors/.
FUZZ_TOTAL_RUNS ?= 10000000
FUZZ_SECONDS    ?= 3
fuzz: deps-build
	FUZZ_TOTAL_RUNS=$(FUZZ_TOTAL_RUNS) bash Fuzz/run.sh long

fuzz-short: deps-build
	FUZZ_SECONDS=$(FUZZ_SECONDS) bash Fuzz/run.sh short

fuzz-merge:
	bash Fuzz/run.sh merge

fuzz-seeds:
	bash Fuzz/run.sh seeds

# The Swift suite under AddressSanitizer (.build-asan) and ThreadSanitizer (.build-tsan), end-to-end tests on the
# instrumented binary; fails on any report of any process (Tests/sanitize/run.sh).
sanitize: deps-test
	bash Tests/sanitize/run.sh address thread

# 100 paired devices x 10,000 lines at once against one release daemon: 0 lost, 0 duplicated, order kept; prints
# the daemon's peak RSS and the ack latency of a probe device under that load (Tests/load/load.py).
load: deps-test release
	BIN=$(CURDIR)/$(BIN_RELEASE) bash Tests/load/run.sh

clean:
	rm -rf $(SCRATCH) .build-fuzz .build-asan .build-tsan

# ---- install, uninstall, Debian package (packaging/) -------------------------------------------------------------
#   make install                          /usr/local as root (sudo make install)
#   make install PREFIX=$HOME/.local      this user only, no root (~/.local/bin must be on PATH)
#   make uninstall [PREFIX=...]           removes exactly what install put (its manifest lists every path)
#   make deb                              $(SCRATCH)/deb/speakbridge_VERSION_ARCH.deb (PREFIX=/usr, dpkg-deb)
# DESTDIR stages (DESTDIR=/tmp/stage make install). Man pages and completions are generated at install time from
# the binary being installed (generate-manual is argument-parser's manual tool, built from the local checkout),
# so they always describe that binary; `make man` / `make completions` write them to $(SCRATCH) to look at.
PREFIX      ?= /usr/local
DESTDIR     ?=
BINDIR      ?= $(PREFIX)/bin
DATADIR     ?= $(PREFIX)/share
MANDIR      ?= $(DATADIR)/man
# The systemd user manager reads ~/.local/share/systemd/user, /usr/local/lib/systemd/user, /usr/lib/systemd/user.
USERUNITDIR ?= $(if $(filter $(HOME)/%,$(PREFIX)),$(DATADIR)/systemd/user,$(PREFIX)/lib/systemd/user)
BASHCOMPDIR ?= $(DATADIR)/bash-completion/completions
ZSHCOMPDIR  ?= $(DATADIR)/zsh/site-functions
FISHCOMPDIR ?= $(DATADIR)/fish/vendor_completions.d
VIMDIR      ?= $(DATADIR)/vim/vimfiles
NVIMDIR     ?= $(DATADIR)/nvim/site
EMACSDIR    ?= $(DATADIR)/emacs/site-lisp
MANIFEST    ?= $(DATADIR)/speakbridge/install-manifest.txt
GENMAN       = $(SCRATCH)/release/generate-manual
DEB_COMPRESS ?= xz
# The man pages' date: the last commit's (reproducible), else today.
MANDATE     ?= $(or $(shell git log -1 --format=%cs 2>/dev/null),$(shell date -u +%F))
PKG_ENV      = DESTDIR="$(DESTDIR)" PREFIX="$(PREFIX)" BINDIR="$(BINDIR)" MANDIR="$(MANDIR)" USERUNITDIR="$(USERUNITDIR)" \
               BASHCOMPDIR="$(BASHCOMPDIR)" ZSHCOMPDIR="$(ZSHCOMPDIR)" FISHCOMPDIR="$(FISHCOMPDIR)" VIMDIR="$(VIMDIR)" \
               NVIMDIR="$(NVIMDIR)" EMACSDIR="$(EMACSDIR)" MANIFEST="$(MANIFEST)" MANDATE="$(MANDATE)" \
               BIN="$(CURDIR)/$(BIN_RELEASE)" GENMAN="$(CURDIR)/$(GENMAN)"

.PHONY: install uninstall deb deps-deb man completions generate-manual

# Same flags as `release`, so the release build is reused (about 10 s the first time, then nothing).
generate-manual:
	$(SWIFT) build $(RELEASE_FLAGS) --scratch-path $(SCRATCH) --product generate-manual

install: release generate-manual
	@$(PKG_ENV) bash packaging/install.sh install

uninstall:
	@$(PKG_ENV) bash packaging/install.sh uninstall

# dpkg-shlibdeps (the Depends line) is in dpkg-dev.
deps-deb:
	$(call apt_install,dpkg-dev)

deb: deps-deb release generate-manual
	@BIN="$(CURDIR)/$(BIN_RELEASE)" GENMAN="$(CURDIR)/$(GENMAN)" OUTDIR="$(CURDIR)/$(SCRATCH)/deb" MANDATE="$(MANDATE)" \
	  DEB_COMPRESS="$(DEB_COMPRESS)" bash packaging/deb.sh

man: release generate-manual
	@rm -rf $(SCRATCH)/man && mkdir -p $(SCRATCH)/man
	$(GENMAN) $(BIN_RELEASE) --multi-page --date "$(MANDATE)" --output-directory $(SCRATCH)/man
	@echo "man pages in $(SCRATCH)/man (read one: man -l $(SCRATCH)/man/speakbridge.serve.1)"

completions: release
	@mkdir -p $(SCRATCH)/completions
	$(BIN_RELEASE) --generate-completion-script bash >$(SCRATCH)/completions/speakbridge.bash
	$(BIN_RELEASE) --generate-completion-script zsh >$(SCRATCH)/completions/_speakbridge
	$(BIN_RELEASE) --generate-completion-script fish >$(SCRATCH)/completions/speakbridge.fish
