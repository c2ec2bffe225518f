package conntrack

import "github.com/fulcrumlb/fulcrum/flow"

// ProbeBurst is LookupBurst without the counts, for the dataplane's fused
// path, which decides per packet whether to handle it or leave it to the
// general path (whose LookupBurst then counts it): out[i] is the live
// entry of keys[i] or nil. Like LookupBurst it reclaims (and counts) the
// expired entries it finds, before the burst's inserts, so that they
// see the slots free as they would after LookupBurst; it counts no hit
// and no miss: call CountHits for the hits the caller used. It handles
// min(len(hashes), len(keys), len(out), MaxBurst) packets, with
// LookupBurst's passes but the first: the caller has prefetched each
// hash's bucket already (BucketLine), as early as it could (the fused path
// does while it parses the burst), and a second prefetch of the same line
// would only cost the call. It returns the number of live entries found.
// lookupBurst runs it as its passes 1 and 2, then counts.
func (t *Table) ProbeBurst(hashes []uint64, keys []*flow.Tuple, now Time, out []*Entry) (found int) {
	n := min(len(hashes), len(keys), len(out), MaxBurst)
	hashes, keys, out = hashes[:n], keys[:n], out[:n]
	t.candidates(hashes)
	for i, k := range keys {
		out[i] = nil
		if s := t.cs.find(t, i, k); s >= 0 {
			if e := t.at(s); idle(e, now) <= t.timeout[e.state&3] {
				out[i] = e
				found++
			} else if t.used(s) { // the same flow twice in a burst: free once
				t.free(s)
				t.c.Expired++
			}
		}
	}
	return found
}

// Peek is ProbeBurst for one flow: its live entry, or nil. It counts
// nothing and removes nothing.
func (t *Table) Peek(hash uint64, key *flow.Tuple, now Time) *Entry {
	if s := t.find(hash, key); s >= 0 {
		if e := t.at(s); idle(e, now) <= t.timeout[e.state&3] {
			return e
		}
	}
	return nil
}

// CountMiss counts one lookup, made with ProbeBurst (which reclaimed an
// expired entry of the flow, if it found one), that missed.
func (t *Table) CountMiss() { t.c.Misses++ }

// CountHits counts n lookups, made with ProbeBurst, that hit.
func (t *Table) CountHits(n int) { t.c.Hits += uint64(n) }

// InsertLines puts in lines the addresses of the entry lines an Insert of
// hash will touch beyond the signature word, and returns how many (lines
// must have room for bucketSlots): a free slot's line, which the insert
// writes (of the flow's own bucket, or its second), or, when both are
// full, the lines of all the own bucket's slots (the eviction policy
// compares them all). The dataplane gathers these for the
// burst's misses and prefetches them (prefetch.Lines) before it inserts
// any, so that under a SYN flood the lines arrive together. The lookup that
// missed has read the signature word.
func (t *Table) InsertLines(hash uint64, lines []uintptr) int {
	own, second, wOwn, wSecond, _ := t.twoBuckets(hash)
	if s := freeIn(own, second, wOwn, wSecond); s >= 0 {
		lines[0] = t.line(s)
		return 1
	}
	lines = lines[:bucketSlots]
	for s := range lines {
		lines[s] = t.line(int(own) + s)
	}
	return bucketSlots
}
