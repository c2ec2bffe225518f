# Fulcrum: see README.md.
# DPDK-dependent packages build only with the "dpdk" tag, which is set when
# pkg-config finds libdpdk (scripts/setup.sh installs it).
SHELL   := /bin/bash
GO      ?= go
# TAGS is expanded when a recipe runs, not when this file is read: every
# target that builds depends on setup, so on a fresh machine the tag is
# decided after setup has installed DPDK (":=" here built the first run
# without DPDK).
TAGS     = $(shell pkg-config --exists libdpdk 2>/dev/null && echo dpdk)
GOFLAGS_TAGS = $(if $(TAGS),-tags $(TAGS))
BIN     := bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
# make install: PREFIX for the binaries, man page and shared files;
# the configuration and the unit go where the system looks for them.
PREFIX  ?= /usr/local
DESTDIR ?=
SYSCONFDIR ?= /etc
UNITDIR ?= /lib/systemd/system
# The commands an operator runs on an LB host (the others are lab and
# benchmark tools).
INSTALL_CMDS := fulcrum fulcrumctl fulcrum-decap fulcrum-conncheck fulcrum-gen

.PHONY: all setup build test lab-test deb-test vet unit fuzz bench pgo cref microbench icount demo example install deb clean

all: build

setup:
	@scripts/setup.sh

build: setup
	$(GO) build $(GOFLAGS_TAGS) -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/...

vet: setup
	$(GO) vet $(GOFLAGS_TAGS) ./...

unit: setup
	@echo "unit: go test $(GOFLAGS_TAGS)"
	$(GO) test $(GOFLAGS_TAGS) -count=1 ./...

fuzz: setup
	GOTAGS="$(TAGS)" FUZZTIME=$${FUZZTIME:-2s} scripts/fuzz.sh

# The README's test command: setup first, then vet, the unit tests (with
# the DPDK ones wherever libdpdk is installed: a binary built without them
# there fails TestDPDKTestsCompiledIn), every fuzz target briefly, the
# package test and the fleet lab. The lab runs first, on a machine nothing
# has loaded yet (it is the suite's most load-sensitive part; its
# LB-killed failures of round 20 turned out to be a reused-tuple race in
# the LB, not the order: docs/benchmarks.md, rounds 20 and 21).
test: setup
	$(MAKE) lab-test
	$(MAKE) vet unit fuzz
	$(MAKE) deb-test

# The fleet lab (scripts/lab): network namespaces, bird2, two Fulcrum
# instances, four backends, real clients and real failures; then the
# IPv6-only lab (scripts/lab6: one instance, two backends), one after the
# other (-p 1). Needs DPDK and
# root; runs on its own so nothing else competes for the two cores.
# Skipped only where it cannot run (not root: setup could not install
# DPDK either); as root without libdpdk after setup it fails.
lab-test: setup
	@if [ "$$(id -u)" != 0 ]; then echo "lab-test: skipped (needs root: network namespaces, DPDK)"; \
	elif [ -z "$(TAGS)" ]; then echo "lab-test: FAILED: running as root but pkg-config finds no libdpdk after scripts/setup.sh" >&2; exit 1; \
	else $(GO) test -tags dpdk,lab -count=1 -v -p 1 -timeout 15m ./scripts/lab/ ./scripts/lab6/ 2>&1 | grep -v '^time=' ; exit $${PIPESTATUS[0]}; fi

# The Debian package installed into a fresh Debian 12 root (debootstrap,
# cached): dpkg -i, fulcrum check on the conffile, fulcrum run on a
# capture with the unit's ExecStart line, systemd-analyze verify on the
# unit. Needs root and DPDK, like the lab.
deb-test: setup
	@if [ "$$(id -u)" != 0 ]; then echo "deb-test: skipped (needs root: debootstrap, chroot)"; \
	elif [ -z "$(TAGS)" ]; then echo "deb-test: FAILED: running as root but pkg-config finds no libdpdk after scripts/setup.sh" >&2; exit 1; \
	else $(MAKE) deb && scripts/deb-test.sh $(BIN)/fulcrum_$(DEB_VERSION)_$(DEB_ARCH).deb; fi

# The side-by-side benchmark (docs/benchmarks.md): Fulcrum against dpdk-testpmd io
# forwarding on the same virtual ports, one table per scenario (needs DPDK
# and root; 15-20 minutes, QUICK=1 about 5). See docs/benchmarks.md.
bench: setup
	scripts/bench.sh

# Profile-guided optimization: profile the daemon forwarding the bench's
# scenarios and write cmd/fulcrum/default.pgo, which every later build of
# the daemon uses (needs what bench needs; see scripts/pgo.sh).
pgo: setup
	scripts/pgo.sh

# The yardstick: Fulcrum's fused fast path written in C (bench/cref/cref.c),
# which fulcrum-bench runs beside testpmd and Fulcrum (-cref bin/cref).
cref: setup
	@mkdir -p $(BIN)
	gcc -O2 -Wall -Wextra -o $(BIN)/cref bench/cref/cref.c $$(pkg-config --cflags --libs libdpdk)

# Micro-benchmarks of the per-packet stages (ns/op, allocs/op).
microbench: setup
	$(GO) test $(GOFLAGS_TAGS) -run '^$$' -bench . -benchmem -benchtime=$${BENCHTIME:-1s} ./flow ./packet ./maglev ./conntrack ./encap ./dataplane ./bench/yardstick

# Instructions per packet of the forwarding path, counted by valgrind
# (scripts/icount.sh; ICOUNT_BIN, ICOUNT_PACKETS). Needs valgrind.
icount:
	scripts/icount.sh

# The demo: the chapter's hashing comparison, a Maglev table, and (with
# DPDK, as root) the fleet lab: requests over two instances, an instance
# killed, a backend killed, with a summary. The lab is torn down at the end,
# also on Ctrl-C.
demo: build
	$(BIN)/fulcrum-sim hashing
	$(BIN)/fulcrum-sim table --backends be1,be2,be3:2,be4 --summary
	@if [ -n "$(TAGS)" ] && [ "$$(id -u)" = 0 ]; then scripts/lab/demo.sh; \
	else echo "demo: the fleet lab needs DPDK and root (scripts/setup.sh installs DPDK)"; fi

# Forward the example capture through the daemon (needs DPDK and root):
# examples/in.pcap in, /tmp/fulcrum-out.pcap out.
example: build
	$(BIN)/fulcrum run -c examples/pcap.toml --exit-when-idle 1s --stats-interval 0

# Installs what an operator needs on an LB host: the commands, the
# configuration (kept if present), the systemd unit, the man page and the
# hardware scripts. DESTDIR stages it (make deb does).
install: build
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man8 \
		$(DESTDIR)$(PREFIX)/share/fulcrum/hw \
		$(DESTDIR)$(SYSCONFDIR)/fulcrum $(DESTDIR)$(UNITDIR) $(DESTDIR)$(PREFIX)/share/doc/fulcrum
	install -m 0755 $(addprefix $(BIN)/,$(INSTALL_CMDS)) $(DESTDIR)$(PREFIX)/bin/
	cp -r scripts/hw/. $(DESTDIR)$(PREFIX)/share/fulcrum/hw/
	chmod -R u+rwX,go+rX,go-w $(DESTDIR)$(PREFIX)/share/fulcrum/hw
	install -m 0644 examples/fulcrum.toml examples/pcap.toml $(DESTDIR)$(PREFIX)/share/doc/fulcrum/
	[ -e $(DESTDIR)$(SYSCONFDIR)/fulcrum/fulcrum.toml ] || install -m 0640 examples/fulcrum.toml $(DESTDIR)$(SYSCONFDIR)/fulcrum/fulcrum.toml
	gzip -9n < packaging/fulcrum.8 > $(DESTDIR)$(PREFIX)/share/man/man8/fulcrum.8.gz
	chmod 0644 $(DESTDIR)$(PREFIX)/share/man/man8/fulcrum.8.gz
	sed 's|@PREFIX@|$(PREFIX)|g; s|@SYSCONFDIR@|$(SYSCONFDIR)|g' packaging/fulcrum.service > $(DESTDIR)$(UNITDIR)/fulcrum.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/fulcrum.service

# The Debian package, with dpkg-deb alone (no debhelper): make install
# into a staging root with PREFIX=/usr, a control file whose Depends are
# the packages of the shared libraries bin/fulcrum links (ldd + dpkg -S).
# A tag v1.2.3 gives 1.2.3, v1.2.3-rc1 1.2.3~rc1 (below 1.2.3); an
# untagged commit 0.0~git<date>.<commits>.<hash>: date and count order the builds,
# which the hash alone does not (a later build must be a newer package,
# or installing it is a downgrade); "-" is not allowed in a Debian
# version without a revision.
# The commit's date (UTC) first: a shallow clone (CI's usual checkout)
# counts 1 commit at every commit, so the count alone orders nothing there.
DEB_GITCOUNT = $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S 2>/dev/null || echo 0).$(shell git rev-list --count HEAD 2>/dev/null || echo 0)
DEB_VERSION = $(shell echo $(VERSION) | sed -E -e 's/^v([0-9]+\.)/\1/' -e 's/^([0-9]+\.[0-9][0-9.]*)-((alpha|beta|rc|pre)[0-9.]*)/\1~\2/' -e '/^[0-9]+\.[0-9]/!s/^/0.0~git$(DEB_GITCOUNT)./' -e 's/-/+/g')
DEB_ARCH    = $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
deb: setup
	rm -rf $(BIN)/deb
	$(MAKE) install DESTDIR=$(CURDIR)/$(BIN)/deb PREFIX=/usr
	scripts/deb-control.sh $(BIN)/deb "$(DEB_VERSION)" "$(DEB_ARCH)"
	dpkg-deb --root-owner-group -Zxz --build $(BIN)/deb $(BIN)/fulcrum_$(DEB_VERSION)_$(DEB_ARCH).deb

clean:
	rm -rf $(BIN)
