"""Reference Maglev tables for maglev's tests.

h() and maglev() are the seed chapter's section 3.4 code, unchanged: the
independent expectation the Go builder is checked against slot for slot.
maglev_weighted() transcribes Envoy's weighted turn-taking (maglev_lb.cc)
in exact rational arithmetic; with equal weights it is the chapter's loop.

usage: python3 reference.py M NAME[:WEIGHT] ...  (the last ":" starts WEIGHT)
Backends are used in the order given (the Go test passes them sorted by key
bytes, the builder's canonical order). Prints one backend name per slot,
slot 0 first.
"""
import hashlib
import sys
from fractions import Fraction


def h(name, seed):
    d = hashlib.blake2b(f"{name}/{seed}".encode(), digest_size=8).digest()
    return int.from_bytes(d, "big")


def maglev(backends, M=65537):
    offset = {b: h(b, 1) % M for b in backends}
    skip   = {b: h(b, 2) % (M - 1) + 1 for b in backends}
    nxt = {b: 0 for b in backends}; table = [None] * M; filled = 0
    while True:
        for b in backends:                      # Pseudocode 1 in the Maglev paper
            c = (offset[b] + nxt[b] * skip[b]) % M
            while table[c] is not None:
                nxt[b] += 1; c = (offset[b] + nxt[b] * skip[b]) % M
            table[c] = b; nxt[b] += 1; filled += 1
            if filled == M: return lambda k: table[k % M]


def maglev_weighted(backends, weights, M=65537):
    # Envoy: normalized weight w/sum, a host takes its turn in an iteration
    # unless iteration*weight < target_weight, and target_weight grows by the
    # largest normalized weight per slot taken. Weight 0 takes no turns.
    total = sum(weights.values())
    norm = {b: Fraction(weights[b], total) for b in backends}
    wmax = max(norm.values())
    live = [b for b in backends if weights[b] > 0]
    offset = {b: h(b, 1) % M for b in live}
    skip = {b: h(b, 2) % (M - 1) + 1 for b in live}
    nxt = {b: 0 for b in live}; target = {b: Fraction(0) for b in live}
    table = [None] * M; filled = 0; iteration = 1
    while True:
        for b in live:
            if iteration * norm[b] < target[b]:
                continue
            target[b] += wmax
            c = (offset[b] + nxt[b] * skip[b]) % M
            while table[c] is not None:
                nxt[b] += 1; c = (offset[b] + nxt[b] * skip[b]) % M
            table[c] = b; nxt[b] += 1; filled += 1
            if filled == M: return lambda k: table[k % M]
        iteration += 1


def main():
    M = int(sys.argv[1])
    backends, weights = [], {}
    for arg in sys.argv[2:]:
        name, colon, w = arg.rpartition(":")
        if not colon:
            name, w = w, ""
        backends.append(name)
        weights[name] = int(w) if w else 1
    if len(set(weights.values())) == 1:
        pick = maglev(backends, M)
    else:
        pick = maglev_weighted(backends, weights, M)
    sys.stdout.write("".join(pick(k) + "\n" for k in range(M)))


if __name__ == "__main__":
    main()
