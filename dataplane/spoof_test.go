package dataplane

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/sched"
)

// Spoofed packets against live connections. The LB sees no sequence
// numbers and only the client's side (DSR): a blind attacker who knows or
// guesses a connection's 5-tuple can send it anything. What such packets
// must not do is move the connection to another backend.

// tunnelDst is the tunnel destination of a forwarded frame, or an invalid
// address when the packet was not tunnelled (dropped, or answered by the
// LB itself).
func tunnelDst(t *testing.T, out []byte, v Verdict) netip.Addr {
	t.Helper()
	if v != Tx || len(out) < 54 {
		return netip.Addr{}
	}
	switch {
	case out[12] == 0x08 && out[13] == 0 && netip.AddrFrom4([4]byte(out[26:30])).String() != lb4:
		return netip.Addr{} // an ICMP reply from the VIP, or an echo reply
	case out[12] == 0x86 && out[13] == 0xdd && netip.AddrFrom16([16]byte(out[22:38])).String() != "2001:db8:100::10":
		return netip.Addr{}
	}
	d, _, _ := decodeTunnel(t, out)
	return d
}

// wantBalance checks that every received packet is accounted for once:
// an encapsulation result (forwarded, too-big reply, or an encapsulation
// drop), a drop or parse drop, a punt or an echo reply.
func wantBalance(t *testing.T, r *rig) {
	t.Helper()
	c := &r.w.c
	var n uint64
	for _, k := range c.Drops {
		n += k
	}
	for _, k := range c.Parse {
		n += k
	}
	for _, k := range c.Encap {
		n += k
	}
	if n += c.Punted + c.EchoReplies; n != c.RxPackets {
		t.Errorf("counters do not add up: %d received, %d accounted for (drops %v, parse %v, encap %v, punted %d, echo %d)",
			c.RxPackets, n, c.Drops, c.Parse, c.Encap, c.Punted, c.EchoReplies)
	}
}

// A spoofed SYN with a live connection's 5-tuple does not move it, under
// every scheduler: a load-based scheduler would pick afresh, and under
// Maglev a drain leaves pins that differ from the table. After the flow's
// FIN a SYN is a new connection on a reused tuple and takes the current
// choice (the drained backend gets no new connection).
func TestSpoofedSYNKeepsEstablishedFlow(t *testing.T) {
	for _, k := range sched.Kinds() {
		t.Run(k.String(), func(t *testing.T) {
			r := newRig(t, withScheduler(k))
			const n = 60
			client := "198.51.100.90"
			seg := func(sp uint16, flags string, payload int) []byte {
				return frame(t, client, "203.0.113.7", sp, 80, layers.IPProtocolTCP, flags, payload, true)
			}
			owner := handshakes(t, r, seg, 20000, n)
			be1 := backendAddr(r, "web", "be1")
			on1 := 0
			for _, o := range owner {
				if o == be1 {
					on1++
				}
			}
			if on1 == 0 {
				t.Fatal("no connection on be1: the drain below would show nothing")
			}
			// Drain be1: its connections must stay, new ones go elsewhere.
			r.publish(Overrides{{"web", "be1"}: {Weight: 0}})
			// Another client opens a connection (round-robin's turn).
			r.run(frame(t, "198.51.100.99", "203.0.113.7", 1, 80, layers.IPProtocolTCP, "S", 0, true))
			kept0 := r.w.c.SYNKept
			moved := 0
			for i := range n {
				sp := uint16(20000 + i)
				// The attacker's SYN (alone, and in one burst with the
				// victim's next segment), then the victim's segment.
				out, v := r.run(seg(sp, "S", 0), seg(sp, "PA", 100))
				out2, v2 := r.run(seg(sp, "PA", 100))
				if tunnelDst(t, out[0], v[0]) != owner[i] || tunnelDst(t, out[1], v[1]) != owner[i] || tunnelDst(t, out2[0], v2[0]) != owner[i] {
					moved++
				}
			}
			if moved > 0 {
				t.Errorf("%d of %d established connections moved by a spoofed SYN", moved, n)
			}
			if got := r.w.c.SYNKept - kept0; got != n {
				t.Errorf("SYNKept counted %d, want %d", got, n)
			}
			// A SYN after the connection's FIN: a new connection, which
			// the drained be1 must not take.
			for i := range n {
				sp := uint16(20000 + i)
				out, v := r.run(seg(sp, "FA", 0), seg(sp, "S", 0))
				if d := tunnelDst(t, out[1], v[1]); d == be1 || !d.IsValid() {
					t.Errorf("port %d: a SYN after FIN went to %v (be1 is drained)", sp, d)
				}
			}
			wantBalance(t, r)
		})
	}
}

// A blind spoofer can fill the table with entries that look established
// (two packets a tuple: the LB cannot tell a handshake it never sees the
// SYN-ACK of from a forged one). Under a load-based scheduler the new
// connections that then find no slot must still reach one backend with
// every packet: an untracked flow, and a segment of a connection the LB
// does not know, follow the VIP's Maglev table.
func TestUntrackedConnectionsKeepOneBackend(t *testing.T) {
	for _, k := range []sched.Kind{sched.Maglev, sched.RoundRobin, sched.LeastConn} {
		t.Run(k.String(), func(t *testing.T) {
			r := newRig(t, withScheduler(k))
			slots := r.w.ct.Slots()
			ack := frame(t, "100.64.0.1", "203.0.113.7", 1, 80, layers.IPProtocolTCP, "A", 0, true)
			var frames [][]byte
			for i := range 3 * slots {
				f := append([]byte(nil), ack...)
				f[27], f[28], f[29] = byte(64+i>>16&63), byte(i>>8), byte(i)
				sp := uint16(1024 + i%50000)
				f[34], f[35] = byte(sp>>8), byte(sp)
				frames = append(frames, f, f)
			}
			for len(frames) > 0 {
				n := min(MaxBurst, len(frames))
				r.run(frames[:n]...)
				frames = frames[n:]
			}
			failed0 := r.w.ct.Counters().InsertFailed
			const n = 200
			split := 0
			for i := range n {
				sp := uint16(30000 + i)
				syn := frame(t, "198.51.100.91", "203.0.113.7", sp, 80, layers.IPProtocolTCP, "S", 0, true)
				ack := frame(t, "198.51.100.91", "203.0.113.7", sp, 80, layers.IPProtocolTCP, "A", 0, true)
				data := frame(t, "198.51.100.91", "203.0.113.7", sp, 80, layers.IPProtocolTCP, "PA", 100, true)
				out, v := r.run(syn)
				first := tunnelDst(t, out[0], v[0])
				out, v = r.run(ack, data)
				if !first.IsValid() || tunnelDst(t, out[0], v[0]) != first || tunnelDst(t, out[1], v[1]) != first {
					split++
				}
			}
			if failed := r.w.ct.Counters().InsertFailed - failed0; failed < n {
				t.Fatalf("only %d inserts failed: the table is not full, the test shows nothing", failed)
			}
			if split > 0 {
				t.Errorf("%d of %d untracked connections had packets on more than one backend", split, n)
			}
			wantBalance(t, r)
		})
	}
}

// VIP traffic from a source no client has is dropped and counted, never
// tunnelled (the backend's SYN-ACK would go to that address: a
// reflection through the LB; for a link-local source, to a host on the
// backend's own link), and takes no conntrack slot; a new flow from
// a VIP or the LB's own address too. A backend may be a client of a VIP.
// Both paths, the fused one included.
func TestMartianSourcesDropped(t *testing.T) {
	for _, fused := range []bool{true, false} {
		r := newRig(t, testConfig)
		r.w.generalOnly = !fused
		cases := []struct {
			src  string
			dst  string
			port uint16
			drop bool
		}{
			{"0.0.0.0", "203.0.113.7", 80, true},
			{"0.1.2.3", "203.0.113.7", 80, true},
			{"127.0.0.1", "203.0.113.7", 80, true},
			{"224.0.0.1", "203.0.113.7", 80, true},
			{"240.1.2.3", "203.0.113.7", 80, true},
			{"255.255.255.255", "203.0.113.7", 80, true},
			{"203.0.113.7", "203.0.113.7", 80, true}, // the VIP
			{lb4, "203.0.113.7", 80, true},           // the LB
			{"::", "2001:db8:ffff::7", 443, true},
			{"::1", "2001:db8:ffff::7", 443, true},
			{"ff02::1", "2001:db8:ffff::7", 443, true},
			{"2001:db8:ffff::7", "2001:db8:ffff::7", 443, true},
			{"2001:db8:100::10", "2001:db8:ffff::7", 443, true},
			{"169.254.169.254", "203.0.113.7", 80, true}, // link-local: no router forwards it
			{"169.254.0.1", "203.0.113.7", 80, true},
			{"fe80::1", "2001:db8:ffff::7", 443, true},
			{"febf::1", "2001:db8:ffff::7", 443, true},
			{"169.253.255.255", "203.0.113.7", 80, false},
			{"169.255.0.1", "203.0.113.7", 80, false},
			{"fec0::1", "2001:db8:ffff::7", 443, false},
			{"fe7f::1", "2001:db8:ffff::7", 443, false},
			{"10.0.1.1", "203.0.113.7", 80, false}, // a backend, as a client
			{"198.51.100.1", "203.0.113.7", 80, false},
			{"223.255.255.254", "203.0.113.7", 80, false},
			{"2001:db8:aaaa::1", "2001:db8:ffff::7", 443, false},
		}
		for _, tc := range cases {
			for _, flags := range []string{"S", "A"} {
				before := r.w.c.Drops[DropMartianSource]
				entries := r.w.ct.Len()
				out, v := r.run(frame(t, tc.src, tc.dst, 4000, tc.port, layers.IPProtocolTCP, flags, 0, true))
				dropped := r.w.c.Drops[DropMartianSource] - before
				switch {
				case tc.drop && (v[0] != Drop || dropped != 1 || r.w.ct.Len() != entries):
					t.Errorf("fused %v: %s %q: verdict %v, martian-source +%d, entries %d -> %d; want Drop, +1, no new entry",
						fused, tc.src, flags, v[0], dropped, entries, r.w.ct.Len())
				case !tc.drop && (!tunnelDst(t, out[0], v[0]).IsValid() || dropped != 0):
					t.Errorf("fused %v: %s %q: verdict %v, martian-source +%d; want it forwarded", fused, tc.src, flags, v[0], dropped)
				}
			}
		}
		wantBalance(t, r)
	}
}

// RFC 6946: an IPv6 atomic fragment (a Fragment header with offset 0 and
// M clear, as hosts send after a Packet Too Big below 1280) is processed
// as the whole packet it is, so it stays with its connection's backend
// instead of being routed like a fragment.
func TestAtomicFragmentStaysWithItsConnection(t *testing.T) {
	r := newRig(t, testConfig)
	const n = 40
	for i := range n {
		sp := uint16(6000 + i)
		out, v := r.run(frame(t, "2001:db8:aaaa::9", "2001:db8:ffff::7", sp, 443, layers.IPProtocolTCP, "S", 0, true))
		home := tunnelDst(t, out[0], v[0])
		f := frame(t, "2001:db8:aaaa::9", "2001:db8:ffff::7", sp, 443, layers.IPProtocolTCP, "A", 20, true)
		fh := []byte{6, 0, 0, 0, 0, 0, 0x12, byte(i)} // next header TCP, offset 0, M 0
		g := append(append(append([]byte(nil), f[:54]...), fh...), f[54:]...)
		g[20] = 44 // IPv6 next header: Fragment
		pl := len(g) - 54
		g[18], g[19] = byte(pl>>8), byte(pl)
		out, v = r.run(g)
		if d := tunnelDst(t, out[0], v[0]); d != home {
			t.Errorf("port %d: the atomic fragment went to %v, its connection is on %v", sp, d, home)
		}
	}
	if r.w.c.Fragments != 0 {
		t.Errorf("%d atomic fragments counted as fragments", r.w.c.Fragments)
	}
	var est int
	r.w.ct.ForEach(func(e *conntrack.Entry) {
		if e.State() == conntrack.StateEstablished {
			est++
		}
	})
	if est != n {
		t.Errorf("%d established entries, want %d: the atomic fragments are the connections' ACKs", est, n)
	}
	wantBalance(t, r)
}

// A forged RST, then a forged SYN, with a live connection's 5-tuple: the
// RST alone cannot be told from the client's, but a SYN after it keeps
// the pin (conntrack.Entry.Live), and the client's next segment makes the
// entry established again (its timeout, and its rank against a SYN
// flood). On the fused path and the general one, under every scheduler,
// after a drain that leaves pins different from the table.
func TestSpoofedRSTThenSYNKeepsFlow(t *testing.T) {
	for _, k := range sched.Kinds() {
		for _, fused := range []bool{true, false} {
			r := newRig(t, withScheduler(k))
			r.w.generalOnly = !fused
			const n = 40
			seg := func(sp uint16, flags string, payload int) []byte {
				return frame(t, "198.51.100.92", "203.0.113.7", sp, 80, layers.IPProtocolTCP, flags, payload, true)
			}
			owner := handshakes(t, r, seg, 21000, n)
			r.publish(Overrides{{"web", "be1"}: {Weight: 0}})
			moved := 0
			for i := range n {
				sp := uint16(21000 + i)
				r.run(seg(sp, "R", 0))
				out, v := r.run(seg(sp, "S", 0), seg(sp, "PA", 100))
				if tunnelDst(t, out[0], v[0]) != owner[i] || tunnelDst(t, out[1], v[1]) != owner[i] {
					moved++
				}
			}
			if moved > 0 {
				t.Errorf("%v, fused %v: %d of %d connections moved by a forged RST and SYN", k, fused, moved, n)
			}
			// Forged RST alone, then the client: established again.
			for i := range n {
				sp := uint16(21000 + i)
				r.run(seg(sp, "R", 0))
				r.run(seg(sp, "PA", 100))
			}
			est := entriesIn(r, 21000, n, conntrack.StateEstablished)
			if est != n {
				t.Errorf("%v, fused %v: %d of %d entries established after a forged RST and the client's segment", k, fused, est, n)
			}
			wantBalance(t, r)
		}
	}
}

// A SYN on a live flow whose backend its checks call down (on_down
// "keep": the backend takes no new flows, its tracked ones stay) starts
// the new connection elsewhere: the backend may be dead, and a client
// reusing a dead connection's port must not follow its pin there (the
// lab saw one such request of 200 fail). The flows that stay keep it.
func TestSYNDoesNotFollowAPinToAnUnhealthyBackend(t *testing.T) {
	for _, fused := range []bool{true, false} {
		r := newRig(t, testConfig)
		r.w.generalOnly = !fused
		be1 := backendAddr(r, "web", "be1")
		seg := func(sp uint16, flags string) []byte {
			return frame(t, "198.51.100.93", "203.0.113.7", sp, 80, layers.IPProtocolTCP, flags, 0, true)
		}
		var on1 []uint16
		for sp := uint16(22000); len(on1) < 4 && sp < 23000; sp++ {
			out, v := r.run(seg(sp, "S"))
			r.run(seg(sp, "A"))
			if tunnelDst(t, out[0], v[0]) == be1 {
				on1 = append(on1, sp)
			}
		}
		if len(on1) < 4 {
			t.Fatal("too few flows on be1")
		}
		r.publish(Overrides{{"web", "be1"}: {Weight: 0, Unhealthy: true}})
		kept0 := r.w.c.SYNKept
		// Its established flows stay on it (keep)...
		out, v := r.run(seg(on1[0], "PA"), seg(on1[1], "PA"))
		if tunnelDst(t, out[0], v[0]) != be1 || tunnelDst(t, out[1], v[1]) != be1 {
			t.Errorf("fused %v: an established flow left be1 under on_down keep", fused)
		}
		// ...but a SYN on one of them goes where the table says now.
		out, v = r.run(seg(on1[2], "S"), seg(on1[3], "S"))
		for i := range 2 {
			if d := tunnelDst(t, out[i], v[i]); d == be1 || !d.IsValid() {
				t.Errorf("fused %v: a SYN on a flow pinned to the unhealthy be1 went to %v", fused, d)
			}
		}
		if r.w.c.SYNKept != kept0 {
			t.Errorf("fused %v: SYNKept moved by %d for SYNs that did not keep their pin", fused, r.w.c.SYNKept-kept0)
		}
		wantBalance(t, r)
	}
}

// Two forged SYNs on a live connection, in one burst or two: the first is
// kept, and it must not leave the entry in a state in which the second is
// taken for a retransmission of a new connection's SYN and rechosen. The
// entry stays established (a kept SYN changes no state), so its timeout
// and eviction rank stay those of a live connection too. The same for a
// SYN after a forged SYN-ACK, SYN-FIN or SYN-RST, which no client sends.
func TestRepeatedSpoofedSYNsKeepFlow(t *testing.T) {
	for _, first := range []string{"S", "SA", "FS", "RS"} {
		for _, k := range sched.Kinds() {
			for _, fused := range []bool{true, false} {
				r := newRig(t, withScheduler(k))
				r.w.generalOnly = !fused
				const n = 40
				seg := func(sp uint16, flags string, payload int) []byte {
					return frame(t, "198.51.100.94", "203.0.113.7", sp, 80, layers.IPProtocolTCP, flags, payload, true)
				}
				owner := handshakes(t, r, seg, 24000, n)
				r.publish(Overrides{{"web", "be1"}: {Weight: 0}})
				kept0 := r.w.c.SYNKept
				moved := 0
				for i := range n {
					sp := uint16(24000 + i)
					var outs [][]byte
					var vs []Verdict
					if i%2 == 0 { // two bursts
						o1, v1 := r.run(seg(sp, first, 0))
						o2, v2 := r.run(seg(sp, "S", 0))
						outs, vs = append(o1, o2...), append(v1, v2...)
					} else { // one burst
						outs, vs = r.run(seg(sp, first, 0), seg(sp, "S", 0))
					}
					o3, v3 := r.run(seg(sp, "PA", 100))
					outs, vs = append(outs, o3...), append(vs, v3...)
					for j := range outs {
						if j == 0 && first != "S" && first != "SA" && vs[0] == Drop {
							continue // the parser drops SYN-FIN and SYN-RST (bad-tcp-flags)
						}
						if tunnelDst(t, outs[j], vs[j]) != owner[i] {
							moved++
							break
						}
					}
				}
				if moved > 0 {
					t.Errorf("%s then S, %v, fused %v: %d of %d connections moved", first, k, fused, moved, n)
				}
				want := uint64(2 * n)
				if first != "S" {
					want = n // a SYN-ACK is no SYN to keep; SYN-FIN and SYN-RST are dropped
				}
				if got := r.w.c.SYNKept - kept0; got != want {
					t.Errorf("%s then S, %v, fused %v: SYNKept counted %d, want %d", first, k, fused, got, want)
				}
				est := entriesIn(r, 24000, n, conntrack.StateEstablished)
				if est != n {
					t.Errorf("%s then S, %v, fused %v: %d of %d entries established after forged SYNs", first, k, fused, est, n)
				}
				wantBalance(t, r)
			}
		}
	}
}

// A forged FIN, then the client's next data segment: the FIN was not the
// client's (no client sends data after its FIN), so the entry is
// established again, on both paths, and a forged SYN after it is kept.
// Without the client's data in between, a SYN after a FIN is a new
// connection (README, known limits).
func TestForgedFINUndoneByData(t *testing.T) {
	for _, k := range sched.Kinds() {
		for _, fused := range []bool{true, false} {
			r := newRig(t, withScheduler(k))
			r.w.generalOnly = !fused
			const n = 40
			seg := func(sp uint16, flags string, payload int) []byte {
				return frame(t, "198.51.100.95", "203.0.113.7", sp, 80, layers.IPProtocolTCP, flags, payload, true)
			}
			owner := handshakes(t, r, seg, 25000, n)
			r.publish(Overrides{{"web", "be1"}: {Weight: 0}})
			moved := 0
			for i := range n {
				sp := uint16(25000 + i)
				r.run(seg(sp, "FA", 0))                              // the attacker's FIN
				o1, v1 := r.run(seg(sp, "PA", 100))                  // the client goes on
				o2, v2 := r.run(seg(sp, "S", 0), seg(sp, "PA", 100)) // the attacker's SYN
				o3, v3 := r.run(seg(sp, "A", 0))                     // a pure ACK does not close it
				if tunnelDst(t, o1[0], v1[0]) != owner[i] || tunnelDst(t, o2[0], v2[0]) != owner[i] ||
					tunnelDst(t, o2[1], v2[1]) != owner[i] || tunnelDst(t, o3[0], v3[0]) != owner[i] {
					moved++
				}
			}
			if moved > 0 {
				t.Errorf("%v, fused %v: %d of %d connections moved by a forged FIN and SYN after the client's data", k, fused, moved, n)
			}
			est := entriesIn(r, 25000, n, conntrack.StateEstablished)
			if est != n {
				t.Errorf("%v, fused %v: %d of %d entries established after a forged FIN and the client's data", k, fused, est, n)
			}
			// The client's real close: FIN, then its last ACK (no data).
			for i := range n {
				sp := uint16(25000 + i)
				r.run(seg(sp, "FA", 0))
				r.run(seg(sp, "A", 0))
			}
			closing := entriesIn(r, 25000, n, conntrack.StateClosing)
			if closing != n {
				t.Errorf("%v, fused %v: %d of %d entries closing after the client's FIN and ACK", k, fused, closing, n)
			}
			wantBalance(t, r)
		}
	}
}

// handshakes opens n connections from ports base.. with seg (SYN, then the
// handshake's ACK and a data segment) and returns the backend each went to.
func handshakes(t *testing.T, r *rig, seg func(sp uint16, flags string, payload int) []byte, base uint16, n int) []netip.Addr {
	t.Helper()
	owner := make([]netip.Addr, n)
	for i := range n {
		sp := base + uint16(i)
		out, v := r.run(seg(sp, "S", 0))
		owner[i] = tunnelDst(t, out[0], v[0])
		r.run(seg(sp, "A", 0), seg(sp, "PA", 100))
	}
	return owner
}

// entriesIn counts the conntrack entries of source ports base..base+n-1
// in state st.
func entriesIn(r *rig, base uint16, n int, st conntrack.State) int {
	c := 0
	r.w.ct.ForEach(func(e *conntrack.Entry) {
		if k := e.Key(); k.SrcPort >= base && int(k.SrcPort) < int(base)+n && e.State() == st {
			c++
		}
	})
	return c
}

// A flood of spoofed datagrams at a UDP VIP, one per forged source, fills
// the flow table, and new TCP connections of another VIP must still be
// tracked: a flow of one datagram ranks as new (conntrack's entryOnce), so
// a SYN takes the oldest such slot, as it would a SYN flood's. Were the
// flood's entries other, no SYN could evict them: the connections would
// be untracked, and a drain afterwards would move them. Under a
// load-based scheduler and Maglev, on both paths.
func TestUDPFloodLeavesTCPTracked(t *testing.T) {
	for _, k := range []sched.Kind{sched.Maglev, sched.P2C} {
		for _, fused := range []bool{true, false} {
			cfg := configtest.New().
				Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`).
				Section("conntrack", "capacity = 1024").
				Web(3, fmt.Sprintf("scheduler = %q", k)).
				VIP("dns", "203.0.113.8", 53, `protocol = "udp"`).
				Backend("d1", "10.0.2.1").
				String()
			r := newRig(t, cfg)
			r.w.generalOnly = !fused
			for b := 0; b < 4*1024/32; b++ {
				fs := make([][]byte, 32)
				for i := range fs {
					n := b*32 + i
					fs[i] = frame(t, fmt.Sprintf("198.18.%d.%d", n/250, 1+n%250), "203.0.113.8", uint16(1024+n), 53, layers.IPProtocolUDP, "", 20, false)
				}
				r.run(fs...)
			}
			failed := r.w.ct.Counters().InsertFailed
			const n = 200
			seg := func(sp uint16, flags string, payload int) []byte {
				return frame(t, "198.51.100.94", configtest.Web, sp, 80, layers.IPProtocolTCP, flags, payload, true)
			}
			owner := handshakes(t, r, seg, 23000, n)
			if f := r.w.ct.Counters().InsertFailed - failed; f != 0 {
				t.Errorf("%v, fused %v: %d inserts failed for %d new connections after the datagram flood", k, fused, f, n)
			}
			r.publish(Overrides{{"web", "be1"}: {Weight: 0}})
			moved := 0
			for i := range n {
				sp := uint16(23000 + i)
				out, v := r.run(seg(sp, "PA", 100))
				if tunnelDst(t, out[0], v[0]) != owner[i] {
					moved++
				}
			}
			if moved > 0 {
				t.Errorf("%v, fused %v: %d of %d connections moved by a drain after the datagram flood", k, fused, moved, n)
			}
			wantBalance(t, r)
		}
	}
}

// A flow picked up mid-stream (its first packet here is an ACK: ECMP
// moved it from another instance) becomes established with its next ACK,
// but completes no handshake: the gap between its first two packets here
// is no handshake time, and must not reach the peak-EWMA latency signal
// (one such flow 9 s apart pinned a backend's latency at 9 s) or the
// passive checks' completions. A SYN and its ACK still count, as does a
// SYN on the picked-up flow (port reuse) and its ACK. Both paths.
func TestMidStreamPickupIsNoHandshake(t *testing.T) {
	for _, fused := range []bool{true, false} {
		r := newRig(t, testConfig)
		r.w.generalOnly = !fused
		seg := func(sp uint16, flags string) []byte {
			return frame(t, "198.51.100.95", configtest.Web, sp, 80, layers.IPProtocolTCP, flags, 0, true)
		}
		r.run(seg(24000, "A"))
		r.now += 9000
		r.run(seg(24000, "PA"))
		if got := entriesIn(r, 24000, 1, conntrack.StateEstablished); got != 1 {
			t.Fatalf("fused %v: the picked-up flow is not established (%d)", fused, got)
		}
		if p := sumBackends(&r.w.c); p.Established != 0 || p.HandshakeMs != 0 {
			t.Errorf("fused %v: a flow picked up mid-stream counted %d handshakes, %d ms", fused, p.Established, p.HandshakeMs)
		}
		r.run(seg(24001, "S"))
		r.now += 40
		r.run(seg(24001, "A"))
		if p := sumBackends(&r.w.c); p.Established != 1 || p.HandshakeMs != 50 {
			t.Errorf("fused %v: SYN then ACK 50 ms later: %d handshakes, %d ms; want 1, 50", fused, p.Established, p.HandshakeMs)
		}
		r.run(seg(24000, "F"))
		r.run(seg(24000, "S")) // port reuse on the picked-up flow's tuple
		r.now += 20
		r.run(seg(24000, "A"))
		if p := sumBackends(&r.w.c); p.Established != 2 || p.HandshakeMs != 80 {
			t.Errorf("fused %v: then a new connection on the picked-up tuple: %d handshakes, %d ms; want 2, 80", fused, p.Established, p.HandshakeMs)
		}
		wantBalance(t, r)
	}
}
