# Fulcrum: see README.md.
# DPDK-dependent packages build only with the "dpdk" tag, which is set when
# pkg-config finds libdpdk (scripts/setup.sh installs it).
SHELL   := /bin/bash
GO      ?= go
TAGS    := $(shell pkg-config --exists libdpdk 2>/dev/null && echo dpdk)
GOFLAGS_TAGS := $(if $(TAGS),-tags $(TAGS))
BIN     := bin

.PHONY: all setup build test lab-test vet unit fuzz bench microbench demo example clean

all: build

setup:
	@scripts/setup.sh

build: setup
	$(GO) build $(GOFLAGS_TAGS) -o $(BIN)/ ./cmd/...

vet:
	$(GO) vet $(GOFLAGS_TAGS) ./...

# The README's test command. Unit, DPDK and alloc tests, then every fuzz
# target briefly.
test: setup vet
	$(GO) test $(GOFLAGS_TAGS) -count=1 ./...
	GOTAGS="$(TAGS)" FUZZTIME=$${FUZZTIME:-4s} scripts/fuzz.sh
	$(MAKE) lab-test

# The fleet lab (scripts/lab): network namespaces, bird2, two Fulcrum
# instances, four backends, real clients and real failures. Needs DPDK and
# root; runs on its own so nothing else competes for the two cores.
lab-test: setup
	@if [ -n "$(TAGS)" ] && [ "$$(id -u)" = 0 ]; then \
		$(GO) test -tags dpdk,lab -count=1 -v -timeout 15m ./scripts/lab/ 2>&1 | grep -v '^time=' ; exit $${PIPESTATUS[0]}; \
	else echo "lab-test: skipped (needs DPDK and root)"; fi

# The side-by-side benchmark (issue 6): Fulcrum against dpdk-testpmd io
# forwarding on the same virtual ports, one table per scenario (needs DPDK
# and root; ~10 minutes, QUICK=1 under 2). See docs/benchmarks.md.
bench: setup
	scripts/bench.sh

# Micro-benchmarks of the per-packet stages (ns/op, allocs/op).
microbench: setup
	$(GO) test $(GOFLAGS_TAGS) -run '^$$' -bench . -benchmem -benchtime=$${BENCHTIME:-1s} ./flow ./packet ./maglev ./conntrack ./encap ./dataplane

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

clean:
	rm -rf $(BIN)
