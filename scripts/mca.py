#!/usr/bin/env python3
"""Helper of scripts/mca.sh: the per-packet instruction trace of a callgrind
run pair, written as assembly for llvm-mca.

    mca.py TRACE BINARY SMALL.callgrind BIG.callgrind PACKETS OUT.s FUNC...

SMALL and BIG are callgrind profiles (--dump-instr=yes) of the same
workload run for N and N+PACKETS packets; their difference, per
instruction, over PACKETS is what one packet executes. The instructions of
the functions named (a suffix of Go's symbol, as `go tool objdump` prints
it, or a C symbol) that run at least half a time a packet are kept, in
address order; a run of consecutive instructions that execute k times a
packet (a loop over a bucket's candidates, say) is repeated k times.
Calls, returns and no-ops are left out (llvm-mca charges a call 100
cycles), and every branch targets one label (llvm-mca ignores where
branches go). The result is a straight-line picture of one packet's work
for a static pipeline model: no cache misses, no mispredictions, no
store-forwarding stalls.
"""
import bisect
import re
import subprocess
import sys


def costs(path):
    """Self instruction counts by address of a callgrind file."""
    counts = {}
    addr = 0
    call = False
    with open(path) as f:
        for line in f:
            if not line or line[0] not in "+-*0123456789c":
                continue
            if line.startswith("calls="):
                call = True
                continue
            if line[0] == "c":  # cob=, cfi=, cfn=
                continue
            parts = line.split()
            a = parts[0]
            if a[0] == "+":
                addr += int(a[1:], 0)
            elif a[0] == "-":
                addr -= int(a[1:], 0)
            elif a != "*":
                addr = int(a, 0)
            if call:  # the call's inclusive cost, not this instruction's
                call = False
                continue
            if len(parts) >= 3:
                counts[addr] = counts.get(addr, 0) + int(parts[2])
    return counts


def functions(binary):
    """Sorted (start, name) of the binary's functions: Go's names as go
    tool objdump prints them (with "(SB)"), and the C ones from nm."""
    starts = {}
    out = subprocess.run(["go", "tool", "objdump", binary], capture_output=True, text=True).stdout
    name = None
    for line in out.splitlines():
        if line.startswith("TEXT "):
            name = line.split()[1]
            continue
        m = re.match(r"^\s+\S+\s+0x([0-9a-f]+)\s", line)
        if m and name:
            starts.setdefault(name, int(m.group(1), 16))
            name = None
    out = subprocess.run(["nm", "-n", binary], capture_output=True, text=True).stdout
    for line in out.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in "tT":
            starts.setdefault(p[2], int(p[0], 16))
    return sorted((a, n) for n, a in starts.items())


def main():
    binary, small, big, packets, out, funcs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6:]
    a, b = costs(small), costs(big)
    per = {x: (n - a.get(x, 0)) / packets for x, n in b.items() if n != a.get(x, 0)}
    syms = functions(binary)
    starts = [s for s, _ in syms]

    def owner(x):
        i = bisect.bisect_right(starts, x) - 1
        return syms[i][1] if i >= 0 else "?"

    def named(x):
        o = owner(x)
        return any(o.endswith(f) or o.removesuffix("(SB)").endswith(f) for f in funcs)

    sel = sorted((x, w) for x, w in per.items() if w >= 0.5 and named(x))
    if not sel:
        sys.exit("mca.py: no instruction of %s runs once a packet" % funcs)
    text = {}
    lo, hi = sel[0][0], sel[-1][0] + 16
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-M", "att", binary,
                          "--start-address=%d" % lo, "--stop-address=%d" % hi], capture_output=True, text=True).stdout
    for line in dis.splitlines():
        m = re.match(r"^\s*([0-9a-f]+):\s+(.*)$", line)
        if m:
            text[int(m.group(1), 16)] = m.group(2).strip()
    lines, run, times = [], [], None
    for x, w in sel + [(None, None)]:
        k = None if w is None else max(1, round(w))
        if k != times:
            lines.extend(run * (times or 0))
            run, times = [], k
        if x is None:
            break
        t = re.sub(r"#.*$", "", re.sub(r"\s*<[^>]*>", "", text.get(x, "nop"))).strip()
        op = t.split()[0] if t else "nop"
        if op.startswith(("call", "ret", "nop")):
            continue
        if op.startswith("j"):
            t = op + " .Lb"
        run.append(t)
    with open(out, "w") as f:
        f.write(".Lb:\n" + "\n".join(lines) + "\n")
    print("%d instructions a packet in the functions named, %d in the trace" % (round(sum(w for _, w in sel)), len(lines)))


if __name__ == "__main__":
    main()
