#!/usr/bin/env bash
# Profile-guided optimization (`make pgo`): profiles the daemon while it
# forwards the bench's scenarios and merges the profiles into
# cmd/fulcrum/default.pgo, which `go build` uses for the daemon from then
# on (Go's -pgo=auto: the main package's default.pgo). With it the compiler
# inlines the hot calls of the per-packet path it would not inline by its
# size rules alone (the parse, the local hash, the conntrack probe, the
# tunnel header) and lays the hot code out together. docs/benchmarks.md
# (round 9) has what it is worth. Regenerate it after a change to the
# forwarding path: a stale profile still builds (Go matches the profile to
# functions by name and line offset, and ignores what no longer matches)
# but loses its effect where the code moved.
#
#   scripts/pgo.sh                  # the default scenarios, 1 pair each
#   scripts/pgo.sh -only est-10k    # any fulcrum-bench flag
#
# Needs what `make bench` needs: root, DPDK, dpdk-testpmd (make setup).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then
	echo "pgo: DPDK needs root" >&2
	exit 1
fi
work=$(mktemp -d /tmp/fulcrum-pgo.XXXXXX)
trap 'rm -rf "$work"' EXIT

# Built without the current profile, so that the new one describes code
# the compiler laid out by its own rules (the profile is of source lines
# either way).
echo "pgo: building fulcrum, fulcrum-gen, fulcrum-bench without a profile"
go build -pgo=off -tags dpdk -o "$work/bin/" ./cmd/fulcrum ./cmd/fulcrum-gen ./cmd/fulcrum-bench

# The mix an LB forwards: established flows in cache and beyond it, IPv6,
# many VIPs and backends, SYNs of known flows and a flood of new ones.
scenarios=est-10k,est-1m,syn-1m,syn-flood,ipv6-10k,vips-100,backends-1000
"$work/bin/fulcrum-bench" -bin "$work/bin" -cache "${BENCH_CACHE:-/var/tmp/fulcrum-bench-cache}" \
	-only "$scenarios" -pairs 1 -window 5s -verify=false -profile "$work/prof" "$@" >"$work/bench.txt"

shopt -s nullglob
profiles=("$work"/prof/*.pprof)
if [ ${#profiles[@]} = 0 ]; then
	echo "pgo: no profile was written; the bench said:" >&2
	cat "$work/bench.txt" >&2
	exit 1
fi
go tool pprof -proto "${profiles[@]}" >"$work/default.pgo"
mv "$work/default.pgo" cmd/fulcrum/default.pgo
echo "pgo: cmd/fulcrum/default.pgo from ${#profiles[@]} profiles ($(stat -c %s cmd/fulcrum/default.pgo) bytes)"
