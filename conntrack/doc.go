// Package conntrack is the dataplane's flow table: it pins each flow to the
// backend Maglev chose for its first packet, so that a later change of the
// backend set (a backend added, a weight changed) does not move connections
// that are already open. A flow the table does not know is not lost: the
// dataplane falls back to the VIP's Maglev table, which gives every instance
// of the fleet the same answer (see the brief and the seed chapter's
// section on connection tracking). The table only has to remember what
// Maglev alone could get wrong.
//
// # Ownership
//
// One Table belongs to one lcore (RSS keeps a flow on one queue, so each
// lcore has its own shard). Nothing is locked and nothing is atomic: every
// method, including the read-only ones (ForEach, Scan, Counters), must run on
// the owning lcore, between or within bursts. The control plane asks the
// lcore to run Drop or Scan for it; it never touches a Table itself.
//
// # Memory and layout
//
// New allocates everything once: an array of 64-byte entries (key included,
// one cache line each) grouped in buckets of 8, and beside it a compact array
// of 8-bit signatures, one 64-bit word per bucket, 8 buckets per cache line
// (4 MiB of signatures for 4M entries, small enough to stay in a large L3).
// A slot whose signature is 0 is free. Each flow has two buckets: its own
// and a second one whose signature word shares the own word's 64-byte line
// (Table.alt). A lookup reads that one line, compares the 8 signatures of
// each bucket at once with SWAR arithmetic, and reads an entry line only for
// a matching signature: a miss reads an entry line with probability at most
// 16/255 (6%), a hit reads one entry line (plus the same share of false
// candidates). An insert into two full buckets reads all 8 entry lines of
// the own bucket (time and state live in the entries, so that a hit writes
// only its own line); that is the cost of a SYN flood on a big table.
//
// On Linux, New asks for transparent huge pages for both arrays and faults
// every page in, so the fast path takes no page faults and fewer TLB misses.
// Entries hold no pointers, so the garbage collector never scans them. The
// per-packet methods (Lookup, LookupBurst, Insert, Touch, Remove, Delete,
// Sweep, Drop) allocate nothing.
//
// The caller passes the flow hash (flow.Hasher, computed once per packet and
// shared with Maglev); the table never hashes. The low bits of the hash pick
// the bucket, the top 8 bits are the signature. The hash is keyed by the
// cluster secret, so an attacker cannot aim a flood at chosen buckets.
//
// A new flow takes a free slot in whichever of its two buckets has more
// free slots (its own on a tie): two choices keep the buckets' loads even.
// With one bucket per flow and uniform hashing (Poisson bucket loads), the
// flows that find their bucket full are 0.8% when flows fill 50% of the
// slots, 4% at 70% and 10% at 90%; with two choices they are none at 50%,
// 0.06% at 70% and 2.4% at 90% (TestOccupancy). Size Capacity at twice the
// flows or more. A flow that finds both buckets full is handled by the
// eviction policy below, in its own bucket, never by an error the dataplane
// must act on. Entries never move between buckets.
//
// # Time
//
// Time is a uint32 count of milliseconds from any monotonic clock the
// dataplane reads once per burst (a TSC divided down, a coarse clock); the
// table never reads a clock. It wraps every 49.7 days: idle times are
// computed as int32(now-lastSeen), exact across the wrap as long as no entry
// stays untouched and unvisited for 24.8 days (2^31 ms; Sweep, called between
// bursts, visits every bucket far more often), and a now slightly behind an
// entry's last-seen time (a stale clock read) counts as idle 0, never as
// expired.
//
// # States and timeouts
//
// The dataplane sees only client-to-server packets (DSR), so the TCP state
// machine is driven by the client's flags alone (State.Next):
//
//	new         first packet seen: a SYN, or a mid-stream packet of a flow
//	            this instance has not seen before (ECMP moved it here)
//	established a non-SYN ACK arrived on a new entry: two packets, so a
//	            lone spoofed SYN or ACK never reaches this state
//	closing     a FIN or RST arrived; sticky until expiry or a new SYN,
//	            except that after an RST alone the client's next segment
//	            (no FIN, RST or SYN) makes it established again: a client
//	            that resets sends nothing more, so that RST was forged;
//	            and after a FIN, such a segment that carries data does
//	            (Table.TouchSegment): a client sends no new data after
//	            its FIN
//	other       UDP and every protocol without a handshake (ranked as
//	            new for eviction until its second packet, below)
//
// A segment with SYN and ACK, FIN or RST changes no state: no client sends
// one to a server, and a forged one must neither reopen a live entry nor
// close it.
//
// A SYN on an established or closing entry is port reuse (or spoofed): the
// entry goes back to new, and Touch reports it. The dataplane decides the
// pin: on a live entry (Entry.Live: established, or closed by an RST
// alone) it keeps its backend, and the entry its state (Table.Keep, not
// Touch), while that backend serves (the backend
// accepts a new SYN on a TIME_WAIT tuple, RFC 6191, and a stray or
// spoofed SYN, or RST then SYN, does not move a live connection); on an
// entry the client's FIN closed, the SYN is a new connection and takes
// the current choice, as IPVS's conn_reuse_mode does. Each state has its
// own idle timeout (Config).
//
// # Eviction
//
// Insert into two full buckets reclaims space in the own bucket, in this
// order:
//
//  1. expired entries (any state): all of them in the bucket are removed;
//  2. otherwise the least valuable live class present, and within it the
//     least recently seen entry. Classes from least to most valuable:
//     closing < new < half-closed in use < other < established, where a
//     half-closed entry in use is a closing one whose client sent two or
//     more segments without FIN, RST, SYN or data after its FIN: it is
//     acknowledging a server that still sends (shutdown(SHUT_WR) clients),
//     where a client that closes after the server sends one such segment,
//     the ACK of the server's FIN. It stays in that class while its
//     client's last segment is under HalfClosedIdle old: the ACK of the
//     server's FIN looks like the others, so a quiet client is taken to
//     be done (the entry keeps its pin until the closing timeout);
//  3. but an insert may only evict an entry of its own class or a less
//     valuable one. If no such entry is in the bucket the insert fails
//     (counted in InsertFailed) and the flow is forwarded by Maglev alone.
//
// So a SYN flood (new entries) can push out only closing and new entries,
// never a half-closed download in progress: a
// bucket holding only live established flows rejects the SYN, and an
// established flow is never evicted while a new or closing entry could go
// instead. UDP (other) outranks new for the same reason: a SYN flood must not
// flush QUIC or DNS flows either. But only from a flow's second packet on:
// a flow of one datagram (inserted as other, not touched since) ranks as
// new, and so does a datagram that inserts one. One packet is what a
// blind spoofer pays for an entry, so a flood of spoofed datagrams competes
// with new TCP connections as a SYN flood does (least recently seen
// first) instead of taking slots that no SYN may take back. Only an
// explicit insert in the established class may evict an established entry
// (least recently seen first).
package conntrack
