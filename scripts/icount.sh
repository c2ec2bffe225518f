#!/usr/bin/env bash
# Instructions per packet of the forwarding path (`make icount`), counted
# by valgrind's cachegrind: a measure a shared, noisy host cannot disturb,
# where the time per packet moves by 30-50% from one minute to the next
# (docs/benchmarks.md, rounds 16-18). Each scenario runs twice through
# dataplane's TestICountScenario, with P and 5P packets after the same
# warm-up; the difference over 4P is the per-packet count, from which the
# per-burst refill of the frames (measured the same way) is subtracted.
# GOGC=off keeps the garbage collector's work out of the count.
# GODEBUG=cpu.rdtscp=off: valgrind 3.19's CPU claims RDTSCP but cannot run
# it, and Go's runtime.cputicks uses it where the CPU has it (the
# scheduler's spinning locks, sysmon), so about one run in three died of
# SIGILL (the yardstick's almost always); with it off Go reads the clock
# with RDTSC behind a fence, which valgrind runs.
#
#   scripts/icount.sh                       # every scenario
#   scripts/icount.sh est10k flood          # some
#   ICOUNT_BIN=/tmp/dp.test scripts/icount.sh   # a test binary built elsewhere
#   scripts/icount.sh yardstick             # the same pipeline in C and in Go
#
# yardstick counts bench/yardstick's BenchmarkPipeline at 10k flows (the
# C pipeline through one cgo call a burst, its Go transliteration, and
# their refill), on est10k's input, with GOMAXPROCS=1 (an idle P's
# spinning otherwise lands in the count): the instructions the same work
# takes when written without Fulcrum's skeleton and features.
#
# The binary is built with the daemon's profile (cmd/fulcrum/default.pgo),
# as the daemon is. Instructions are not time (a cache miss costs none
# here), so read est1m's count as the work, not the wait; compare counts
# of two builds, never a count with a timing.
set -euo pipefail
# count and per run in command substitutions: without this a failed
# valgrind run's exit there is ignored and the figures come out of an
# empty count.
shopt -s inherit_errexit
cd "$(dirname "$0")/.."

if ! command -v valgrind >/dev/null; then
	echo "icount: needs valgrind (apt-get install valgrind)" >&2
	exit 1
fi
P=${ICOUNT_PACKETS:-32000}
bin=${ICOUNT_BIN:-}
if [ -z "$bin" ] && [ "${1:-}" != yardstick ]; then
	tmp=$(mktemp -d /tmp/fulcrum-icount.XXXXXX)
	trap 'rm -rf "$tmp"' EXIT
	bin=$tmp/dataplane.test
	go test -c -pgo=cmd/fulcrum/default.pgo -o "$bin" ./dataplane
fi

# count SCENARIO PACKETS: the instructions of one run.
count() {
	local out
	out=$(GODEBUG=cpu.rdtscp=off GOGC=off FULCRUM_ICOUNT="$1:$2" valgrind --tool=cachegrind --cache-sim=no \
		--cachegrind-out-file=/dev/null "$bin" -test.run '^TestICountScenario$' -test.count 1 2>&1) || {
		echo "icount: $1 failed:" >&2
		echo "$out" >&2
		exit 1
	}
	out=$(awk '/I *refs:/ {gsub(",", "", $4); print $4}' <<<"$out")
	[[ $out =~ ^[0-9]+$ ]] || { echo "icount: $1: no instruction count in valgrind's output" >&2; exit 1; }
	echo "$out"
}
# per SCENARIO: instructions per packet, from runs of P and 5P packets.
per() {
	local a b
	a=$(count "$1" "$P")
	b=$(count "$1" $((5 * P)))
	echo $(((b - a) / (4 * P)))
}

# ys IMPL PACKETS: the instructions of one run of the yardstick.
ys() {
	local out
	out=$(GODEBUG=cpu.rdtscp=off GOMAXPROCS=1 GOGC=off valgrind --tool=cachegrind --cache-sim=no \
		--cachegrind-out-file=/dev/null "$ysbin" -test.run '^$' \
		-test.bench "Pipeline/flows=10000/impl=$1\$" -test.benchtime="$2x" 2>&1) || {
		echo "icount: yardstick $1 failed:" >&2
		echo "$out" >&2
		exit 1
	}
	awk '/I *refs:/ {gsub(",", "", $4); print $4}' <<<"$out"
}
ysper() {
	local a b
	a=$(ys "$1" "$((2 * P))")
	b=$(ys "$1" "$((10 * P))")
	echo $(((b - a) / (8 * P)))
}

scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(est10k est1m syn10k flood)
if [ "${scenarios[0]}" = yardstick ]; then
	ysbin=${ICOUNT_YS_BIN:-}
	if [ -z "$ysbin" ]; then
		ystmp=$(mktemp -d /tmp/fulcrum-icount-ys.XXXXXX)
		trap 'rm -rf "$ystmp"' EXIT
		ysbin=$ystmp/yardstick.test
		go test -c -o "$ysbin" ./bench/yardstick
	fi
	r=$(ysper refill)
	printf '%-8s %10s %10s %10s\n' impl "Ir/pkt" refill net
	for impl in c go; do
		all=$(ysper "$impl")
		printf '%-8s %10d %10d %10d\n' "$impl" "$all" "$r" $((all - r))
	done
	exit 0
fi
printf '%-8s %10s %10s %10s\n' scenario "Ir/pkt" refill net
declare -A refills
for s in "${scenarios[@]}"; do
	r=refill10k
	[ "$s" = flood ] && r=floodrefill
	[ -n "${refills[$r]:-}" ] || refills[$r]=$(per "$r")
	all=$(per "$s")
	printf '%-8s %10d %10d %10d\n' "$s" "$all" "${refills[$r]}" $((all - refills[$r]))
done
