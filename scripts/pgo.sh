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
# but loses its effect where the code moved. `make test` says when that
# has happened (internal/pgostamp: an edit inside one of the profile's hot
# functions, a comment included, since the profile was written).
#
#   scripts/pgo.sh                  # the default scenarios, 1 pair each
#   scripts/pgo.sh -only est-10k    # any fulcrum-bench flag
#
# The runs are scripts/bench.sh's (its checks, its cleanup on error and
# Ctrl-C, its tables on stdout), without the C pipeline, with the daemon
# built without the current profile (GOFLAGS=-pgo=off) so that the new
# profile describes code the compiler laid out by its own rules. Needs
# what `make bench` needs: root, DPDK, dpdk-testpmd (make setup).
set -euo pipefail
cd "$(dirname "$0")/.."

prof=$(mktemp -d /tmp/fulcrum-pgo.XXXXXX)
trap 'rm -rf "$prof"' EXIT

# The mix an LB forwards: established flows in cache and beyond it, IPv6,
# many VIPs and backends, SYNs of known flows and a flood of new ones.
scenarios=est-10k,est-1m,syn-1m,syn-flood,ipv6-10k,vips-100,backends-1000
GOFLAGS="${GOFLAGS:+$GOFLAGS }-pgo=off" CREF=0 scripts/bench.sh \
	-only "$scenarios" -pairs 1 -window 5s -verify=false -profile "$prof" "$@"

shopt -s nullglob
profiles=("$prof"/*.pprof)
if [ ${#profiles[@]} = 0 ]; then
	echo "pgo: the bench wrote no profile" >&2
	exit 1
fi
go tool pprof -proto "${profiles[@]}" >"$prof/default.pgo"
mv "$prof/default.pgo" cmd/fulcrum/default.pgo
# The stamp: a hash of each hot function's source, which make test's
# TestProfileMatchesSource compares with the sources to say when an edit
# has made the profile stale (internal/pgostamp).
FULCRUM_PGO_STAMP=write go test ./internal/pgostamp -run '^TestProfileMatchesSource$' -count=1 >/dev/null
echo "pgo: cmd/fulcrum/default.pgo from ${#profiles[@]} profiles ($(stat -c %s cmd/fulcrum/default.pgo) bytes), and its stamp ($(grep -vc '^#' cmd/fulcrum/default.pgo.stamp) hot functions)"
