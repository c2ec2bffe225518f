#!/usr/bin/env bash
# The side-by-side benchmark (`make bench`): Fulcrum against
# dpdk-testpmd io forwarding on the same virtual ports (net_pcap replaying a
# generated pcap -> net_null), alternated A B A B, one table per scenario and
# a markdown summary. See docs/benchmarks.md for how to read it. Beside them
# it runs the C pipeline (bench/cref/cref.c, Fulcrum's fast path written in
# C, built with `make cref`) on the scenarios it handles (fulcrum-bench
# -cref); if it does not build, the bench runs without it.
#
#   scripts/bench.sh                 # all scenarios, 3 pairs each (~10 min on 2 CPUs)
#   QUICK=1 scripts/bench.sh         # 4 scenarios, 1 pair each (a few minutes)
#   scripts/bench.sh -only est-1m -pairs 5 -window 10s   # any fulcrum-bench flag
#   scripts/bench.sh -list
#
# Environment: QUICK=1; CREF=0 (without the C pipeline); BENCH_CACHE (generated pcaps, kept; default
# /var/tmp/fulcrum-bench-cache); KEEP=1 keeps the configurations and logs;
# BENCH_OUT=FILE also writes the markdown summary there.
#
# Needs root (DPDK), dpdk-testpmd (Debian dpdk-dev) and libdpdk-dev: run
# `make setup` first. No figure is judged: nothing here fails on a timing.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then
	echo "bench: DPDK needs root" >&2
	exit 1
fi
for c in dpdk-testpmd pkg-config stdbuf go; do
	command -v "$c" >/dev/null 2>&1 || { echo "bench: $c not found (make setup)" >&2; exit 1; }
done
pkg-config --exists libdpdk || { echo "bench: libdpdk not found (make setup)" >&2; exit 1; }

prefix="fbench-$$"
work=$(mktemp -d /tmp/fulcrum-bench.XXXXXX)
cache=${BENCH_CACHE:-/var/tmp/fulcrum-bench-cache}
harness=""

# Whatever happens (end, error, Ctrl-C): stop what we started, by PID, and
# remove DPDK's runtime directories of our prefix and the work directory.
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ -n "$harness" ] && kill -0 "$harness" 2>/dev/null; then
		kill -TERM "$harness" 2>/dev/null || true
		for _ in $(seq 250); do kill -0 "$harness" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$harness" 2>/dev/null || true
	fi
	if [ -f "$work/pids" ]; then
		while read -r pid; do
			# Only a process of ours: its command line names our prefix or work dir.
			if [ -n "$pid" ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -e "$prefix" -e "$work"; then
				kill -KILL "$pid" 2>/dev/null || true
			fi
		done <"$work/pids"
	fi
	rm -rf /var/run/dpdk/"$prefix"-*
	if [ "${KEEP:-0}" = 1 ]; then
		echo "bench: configurations and logs kept in $work" >&2
	else
		rm -rf "$work"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "bench: building fulcrum, fulcrum-gen, fulcrum-bench (-tags dpdk)"
go build -tags dpdk -o "$work/bin/" ./cmd/fulcrum ./cmd/fulcrum-gen ./cmd/fulcrum-bench

args=(-bin "$work/bin" -cache "$cache" -work "$work" -prefix "$prefix")

# The C pipeline, into the same directory as the Go binaries (make cref's
# BIN): a failed build (gcc, pkg-config libdpdk) costs only its columns.
# CREF=0 leaves it out (make pgo, which profiles only Fulcrum).
if [ "${CREF:-1}" = 0 ]; then
	echo "bench: CREF=0: without the C pipeline"
else
	echo "bench: building the C pipeline (make cref)"
	if make -s cref BIN="$work/bin" >"$work/cref-build.log" 2>&1; then
		args+=(-cref "$work/bin/cref")
	else
		{
			echo "bench: make cref failed; running without the C pipeline (no C columns):"
			tail -n 20 "$work/cref-build.log"
		} >&2
	fi
fi
[ "${QUICK:-0}" = 1 ] && args+=(-quick)
[ -n "${BENCH_OUT:-}" ] && args+=(-o "$BENCH_OUT")

# In the background so that the INT/TERM trap runs at once; the harness
# handles the signal itself too (Ctrl-C reaches the whole process group).
"$work/bin/fulcrum-bench" "${args[@]}" "$@" &
harness=$!
wait "$harness"
