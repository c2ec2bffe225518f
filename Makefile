# Fulcrum: see README.md.
# DPDK-dependent packages build only with the "dpdk" tag, which is set when
# pkg-config finds libdpdk (scripts/setup.sh installs it).
GO      ?= go
TAGS    := $(shell pkg-config --exists libdpdk 2>/dev/null && echo dpdk)
GOFLAGS_TAGS := $(if $(TAGS),-tags $(TAGS))
BIN     := bin

.PHONY: all setup build test vet unit fuzz bench demo example clean

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

# Micro-benchmarks of the per-packet stages (ns/op, allocs/op).
bench: setup
	$(GO) test $(GOFLAGS_TAGS) -run '^$$' -bench . -benchmem -benchtime=$${BENCHTIME:-1s} ./flow ./packet ./maglev ./conntrack ./encap ./dataplane

# The demo: for now, the chapter's hashing comparison and a Maglev table.
demo: build
	$(BIN)/fulcrum-sim hashing
	$(BIN)/fulcrum-sim table --backends be1,be2,be3:2,be4 --summary

# Forward the example capture through the daemon (needs DPDK and root):
# examples/in.pcap in, /tmp/fulcrum-out.pcap out.
example: build
	$(BIN)/fulcrum run -c examples/pcap.toml --exit-when-idle 1s --stats-interval 0

clean:
	rm -rf $(BIN)
