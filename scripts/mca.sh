#!/usr/bin/env bash
# A static pipeline model of one packet's work (`scripts/mca.sh`): how many
# cycles Fulcrum's forwarding path, the same pipeline in C and its Go
# transliteration (bench/yardstick) would take on a core that never
# misses a cache, never mispredicts a branch and never waits for a store
# to forward, from llvm-mca's model of an AMD Zen core. Beside the
# measured times it tells how much of the gap between the programs lies
# in the instruction stream itself (more instructions, more memory
# operations, longer dependency chains) and how much is dynamic (what the
# model leaves out: cache and TLB misses, mispredictions, store
# forwarding), which only the CPU's counters can split further; the
# development VMs expose none (docs/benchmarks.md, rounds 19 and 23).
#
#   scripts/mca.sh                 # est10k's input: 54-byte ACKs, 10k flows
#   MCA_CPU=znver2 scripts/mca.sh  # another model (llvm-mca -mcpu=help)
#
# Each program runs twice under callgrind (P and 5P packets after the same
# warm-up, as scripts/icount.sh); the difference is one packet's
# instructions, which scripts/mca.py writes out in address order for
# llvm-mca. Needs valgrind, llvm (llvm-mca), binutils (objdump) and python3.
set -euo pipefail
cd "$(dirname "$0")/.."

mca=$(command -v llvm-mca || command -v llvm-mca-14 || command -v llvm-mca-15 || true)
for tool in valgrind objdump python3; do
	command -v "$tool" >/dev/null || { echo "mca: needs $tool" >&2; exit 1; }
done
[ -n "$mca" ] || { echo "mca: needs llvm-mca (apt-get install llvm)" >&2; exit 1; }
CPU=${MCA_CPU:-znver3}
P=${MCA_PACKETS:-32000}
tmp=$(mktemp -d /tmp/fulcrum-mca.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
go test -c -pgo=cmd/fulcrum/default.pgo -o "$tmp/dp.test" ./dataplane
go test -c -o "$tmp/ys.test" ./bench/yardstick

# grind OUT ARGS...: callgrind one run. RDTSCP off: valgrind cannot run it;
# asynchronous preemption off: callgrind asserts on Go's preemption signal.
grind() {
	local out=$1
	shift
	GODEBUG=cpu.rdtscp=off,asyncpreemptoff=1 GOGC=off valgrind --tool=callgrind --dump-instr=yes \
		--callgrind-out-file="$out" "$@" >"$out.log" 2>&1 || { echo "mca: $* failed:" >&2; tail -20 "$out.log" >&2; exit 1; }
}
# model NAME BINARY SMALL BIG PACKETS FUNC...: the trace and llvm-mca's figures.
model() {
	local name=$1 bin=$2 small=$3 big=$4 n=$5
	shift 5
	local note
	note=$(python3 scripts/mca.py "$bin" "$small" "$big" "$n" "$tmp/$name.s" "$@")
	"$mca" -mtriple=x86_64-linux-gnu -mcpu="$CPU" -iterations=100 "$tmp/$name.s" 2>/dev/null |
		awk -v name="$name" -v note="$note" '
			/^Instructions:/ {i = $2} /^Total Cycles:/ {c = $3} /^IPC:/ {ipc = $2}
			/^Block RThroughput:/ {rt = $3}
			END {printf "%-12s %8.0f %8.1f %6.2f %8.1f   (%s)\n", name, i / 100, c / 100, ipc, rt, note}'
}

FULCRUM_ICOUNT="est10k:$P" grind "$tmp/f1" "$tmp/dp.test" -test.run '^TestICountScenario$' -test.count 1
FULCRUM_ICOUNT="est10k:$((5 * P))" grind "$tmp/f5" "$tmp/dp.test" -test.run '^TestICountScenario$' -test.count 1
for impl in go c; do
	GOMAXPROCS=1 grind "$tmp/$impl.1" "$tmp/ys.test" -test.run '^$' -test.bench "Pipeline/flows=10000/impl=$impl\$" -test.benchtime="$((2 * P))x"
	GOMAXPROCS=1 grind "$tmp/$impl.5" "$tmp/ys.test" -test.run '^$' -test.bench "Pipeline/flows=10000/impl=$impl\$" -test.benchtime="$((10 * P))x"
done

echo "llvm-mca -mcpu=$CPU, est10k's input, per packet (the trace: instructions run at least half a time a packet)"
printf "%-12s %8s %8s %6s %8s\n" program instr cycles IPC "bound"
model fulcrum "$tmp/dp.test" "$tmp/f1" "$tmp/f5" $((4 * P)) \
	'dataplane.(*Worker).fuse(SB)' 'dataplane.(*Worker).fastBurst(SB)' 'dataplane.(*Worker).Process(SB)' \
	'packet.parseFlow4(SB)' 'conntrack.(*Table).candidates(SB)' 'conntrack.(*candidates).find(SB)' \
	'conntrack.sameKey(SB)' 'prefetch.Lines.abi0(SB)'
model yardstick-go "$tmp/ys.test" "$tmp/go.1" "$tmp/go.5" $((8 * P)) \
	'yardstick.(*Pipeline).Burst(SB)' 'prefetch.Lines.abi0(SB)'
model yardstick-c "$tmp/ys.test" "$tmp/c.1" "$tmp/c.5" $((8 * P)) yard_burst
echo "bound: llvm-mca's block reciprocal throughput (cycles a packet if only the busiest execution resource limited it)"
