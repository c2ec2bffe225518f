package dataplane

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/packet"
	"github.com/fulcrumlb/fulcrum/sched"
)

// Legitimate but unusual client behaviour, under every scheduler and on
// both paths: does any of it move a connection to another backend (a
// broken connection under DSR: the other backend has no socket and
// resets it)? Time is the test clock (conntrack.Time, ms); the default
// timeouts are 10 s (new), 300 s (established), 120 s (closing), 30 s
// (UDP).

const (
	lpECE = 0x40
	lpCWR = 0x80
	lpA   = packet.TCPAck
	lpPA  = packet.TCPPsh | packet.TCPAck
	lpFA  = packet.TCPFin | packet.TCPAck
	lpRA  = packet.TCPRst | packet.TCPAck
	lpS   = packet.TCPSyn
)

// lpConfig: "web" (TCP 203.0.113.7:80) with be1..be4 and be5 (which tests
// may drain), and "game" (UDP 203.0.113.7:27015) with g1..g4, both under
// scheduler k.
func lpConfig(k sched.Kind, capacity int) string {
	s := fmt.Sprintf("scheduler = %q", k)
	return configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`, "mtu = 1500").
		Section("conntrack", fmt.Sprintf("capacity = %d", capacity)).
		Web(5, s).
		VIP("game", configtest.Web, 27015, `protocol = "udp"`, s).
		Backend("g1", "10.0.2.1").Backend("g2", "10.0.2.2").Backend("g3", "10.0.2.3").Backend("g4", "10.0.2.4").
		String()
}

// lpEvery runs fn under every scheduler, fused and general.
func lpEvery(t *testing.T, capacity int, fn func(t *testing.T, k sched.Kind, r *rig)) {
	for _, k := range sched.Kinds() {
		t.Run(k.String(), func(t *testing.T) {
			bothPaths(t, lpConfig(k, capacity), func(t *testing.T, r *rig) { fn(t, k, r) })
		})
	}
}

// lpSeg is a client TCP segment to web (port 80) with TCP options opts (a
// multiple of 4 bytes) and data bytes of payload.
func lpSeg(c int, flags uint8, data int, opts []byte) []byte {
	h := make([]byte, 20+len(opts))
	binary.BigEndian.PutUint16(h[0:], uint16(40000+c))
	binary.BigEndian.PutUint16(h[2:], 80)
	h[12], h[13] = byte((20+len(opts))/4)<<4, flags
	binary.BigEndian.PutUint16(h[14:], 65535)
	copy(h[20:], opts)
	return raw4(lpSrc(c), configtest.Web, 6, uint16(c), 0x4000, cat(h, make([]byte, data)))
}

func lpSrc(c int) string { return fmt.Sprintf("198.51.%d.%d", 100+c/200, 1+c%200) }

// lpDgram is a client datagram of flow c to the game VIP.
func lpDgram(c int, data int) []byte {
	return raw4(lpSrc(c), configtest.Web, 17, uint16(c), 0x4000, cat(udpDgram(uint16(50000+c), 27015, uint16(8+data), data)))
}

// lpAt runs frames as one burst at time when and returns each packet's
// tunnel destination (invalid if not forwarded).
func lpAt(t *testing.T, r *rig, when conntrack.Time, frames ...[]byte) []netip.Addr {
	t.Helper()
	if when <= r.now {
		t.Fatalf("clock going back: %d after %d", when, r.now)
	}
	r.now = when - 10 // run adds 10
	out, v := r.run(frames...)
	d := make([]netip.Addr, len(frames))
	for i := range frames {
		d[i] = tunnelDst(t, out[i], v[i])
		if !d[i].IsValid() {
			t.Errorf("packet %d of %d at %d ms: verdict %v, not forwarded (drops %v)", i, len(frames), when, v[i], r.w.c.Drops)
		}
	}
	return d
}

// lpEach builds one frame per flow in cs.
func lpEach(cs []int, f func(c int) []byte) [][]byte {
	fr := make([][]byte, len(cs))
	for i, c := range cs {
		fr[i] = f(c)
	}
	return fr
}

func lpRange(from, n int) []int {
	cs := make([]int, n)
	for i := range cs {
		cs[i] = from + i
	}
	return cs
}

// lpMoved counts the flows whose packet went elsewhere than want.
func lpMoved(want, got []netip.Addr) int {
	n := 0
	for i := range want {
		if got[i] != want[i] {
			n++
		}
	}
	return n
}

// lpOpen sends the handshake and a request for flows cs from time at and
// returns their backends (the SYN's), failing if one packet of a flow
// went elsewhere. It returns the time of the last burst.
func lpOpen(t *testing.T, r *rig, at conntrack.Time, cs []int) ([]netip.Addr, conntrack.Time) {
	t.Helper()
	be := lpAt(t, r, at, lpEach(cs, func(c int) []byte { return lpSeg(c, lpS, 0, nil) })...)
	for k, fl := range []uint8{lpA, lpPA} {
		got := lpAt(t, r, at+conntrack.Time(20*(k+1)), lpEach(cs, func(c int) []byte { return lpSeg(c, fl, 100*k, nil) })...)
		if m := lpMoved(be, got); m > 0 {
			t.Fatalf("handshake: %d of %d flows split", m, len(cs))
		}
	}
	return be, at + 40
}

// A client that half-closes (request, then FIN: shutdown(SHUT_WR), as
// nc -N, whois, some RPC and HTTP/1.0 clients do) while the server sends a
// long response. After its FIN the client sends only pure ACKs. While the
// data flows they come every few ms and refresh the closing entry (that
// holds, checked over 3 minutes at one ACK every 5 s); and when the server
// pauses (15 s here: computing a report, streaming events, a stalled
// disk). With the closing timeout at its old 10 s the entry expired, and the client's
// next ACK is a segment of an unknown connection: under a load-based
// scheduler it is placed by the Maglev table, which is not the backend the
// scheduler chose, and that backend resets the connection. A connection
// that did not half-close survives the same pause (300 s). Under Maglev
// the table names the same backend and the connection survives.
func TestLegitHalfCloseServerPause(t *testing.T) {
	lpEvery(t, 4096, func(t *testing.T, k sched.Kind, r *rig) {
		half := lpRange(0, 32)
		open := lpRange(32, 32)
		all := append(append([]int(nil), half...), open...)
		be, now := lpOpen(t, r, 2000, all)
		// The request's end: FIN from the half-closing clients, an ACK from the others.
		now += 20
		got := lpAt(t, r, now, lpEach(all, func(c int) []byte {
			if c < 32 {
				return lpSeg(c, lpFA, 0, nil)
			}
			return lpSeg(c, lpA, 0, nil)
		})...)
		if m := lpMoved(be, got); m > 0 {
			t.Fatalf("FIN: %d flows moved", m)
		}
		// A download of 3 minutes: an ACK every 5 s from every client.
		for step := 0; step < 36; step++ {
			now += 5000
			got = lpAt(t, r, now, lpEach(all, func(c int) []byte { return lpSeg(c, lpA, 0, nil) })...)
			if m := lpMoved(be, got); m > 0 {
				t.Fatalf("download, %d s in: %d flows moved", 5*(step+1), m)
			}
		}
		// The server pauses 15 s, then sends again: the clients ACK.
		miss0, moved0 := r.w.c.CTMisses, r.w.c.Moved
		now += 15000
		got = lpAt(t, r, now, lpEach(all, func(c int) []byte { return lpSeg(c, lpA, 0, nil) })...)
		mHalf, mOpen := lpMoved(be[:32], got[:32]), lpMoved(be[32:], got[32:])
		t.Logf("%v: after a 15 s server pause, %d of 32 half-closed downloads moved backend, %d of 32 open ones; misses +%d, moved counter +%d",
			k, mHalf, mOpen, r.w.c.CTMisses-miss0, r.w.c.Moved-moved0)
		if mOpen != 0 {
			t.Errorf("%d open connections moved after a 15 s pause", mOpen)
		}
		if mHalf != 0 {
			t.Errorf("%v: %d of 32 half-closed downloads reached another backend after a 15 s server pause (entry expired at the 10 s closing timeout)", k, mHalf)
		}
	})
}

// An idle connection whose entry expires while the backend set changes
// (be5 added). Recorded, not asserted past the timeout: Maglev moves the
// flows whose slot changed (documented at DefaultTCPEstablishedTimeout).
// Within the timeout the pin must hold under every scheduler.
func TestLegitIdleAcrossBackendAdded(t *testing.T) {
	lpEvery(t, 4096, func(t *testing.T, k sched.Kind, r *rig) {
		r.publish(Overrides{{"web", "be5"}: {Weight: 0}})
		cs := lpRange(0, 64)
		be, now := lpOpen(t, r, 2000, cs)
		r.publish(nil) // be5 joins
		now += 200_000
		got := lpAt(t, r, now, lpEach(cs, func(c int) []byte { return lpSeg(c, lpA, 0, nil) })...)
		if m := lpMoved(be, got); m != 0 {
			t.Errorf("%v: %d of 64 pinned flows moved within the timeout", k, m)
		}
		now += 2 * 3_600_000
		got = lpAt(t, r, now, lpEach(cs, func(c int) []byte { return lpSeg(c, lpA, 0, nil) })...)
		t.Logf("%v: be5 added, then idle 2 h: %d of 64 connections moved backend", k, lpMoved(be, got))
	})
}

// Handshakes clients really send, each on its own flow: ECN setup (SYN
// with ECE and CWR, retransmitted without them and with other options, as
// RFC 3168 6.1.1.1 allows); TCP Fast Open (SYN carrying data and a cookie,
// retransmitted without data); the final ACK sent twice in one burst and
// again in the next; a SYN retransmitted after the new timeout (the 6th
// try, 16 s after the 5th). Every packet of a connection reaches one
// backend, and each handshake is counted once.
func TestLegitHandshakeVariants(t *testing.T) {
	mss := []byte{2, 4, 0x05, 0xb4}
	full := []byte{2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 1, 3, 3, 7} // MSS, SACK-ok, TS, NOP, WS
	tfo := []byte{2, 4, 0x05, 0xb4, 34, 10, 1, 2, 3, 4, 5, 6, 7, 8, 1, 1}             // MSS, Fast Open cookie, NOP NOP
	type step struct {
		dt    conntrack.Time
		flags uint8
		data  int
		opts  []byte
		twice bool
	}
	cases := []struct {
		name  string
		steps []step
		est   uint64 // handshakes counted
	}{
		{"ECN SYN, retransmitted without ECN", []step{{0, lpS | lpECE | lpCWR, 0, full, false}, {1000, lpS, 0, mss, false}, {30, lpA, 0, nil, false}, {10, lpPA, 200, nil, false}}, 1},
		{"TFO SYN with data, retransmitted without", []step{{0, lpS, 300, tfo, false}, {1000, lpS, 0, mss, false}, {30, lpA, 0, nil, false}, {10, lpPA, 200, nil, false}}, 1},
		{"TFO SYN with data, accepted", []step{{0, lpS, 300, tfo, false}, {30, lpA, 0, nil, false}, {10, lpPA, 200, nil, false}}, 1},
		{"final ACK twice in a burst, then again", []step{{0, lpS, 0, full, false}, {30, lpA, 0, nil, true}, {30, lpA, 0, nil, false}, {10, lpPA, 200, nil, false}}, 1},
		{"SYN retried 1,3,7,15,31 s", []step{{0, lpS, 0, full, false}, {1000, lpS, 0, full, false}, {2000, lpS, 0, full, false}, {4000, lpS, 0, full, false}, {8000, lpS, 0, full, false}, {16000, lpS, 0, mss, false}, {30, lpA, 0, nil, false}, {10, lpPA, 200, nil, false}}, 1},
	}
	lpEvery(t, 4096, func(t *testing.T, k sched.Kind, r *rig) {
		now := conntrack.Time(2000)
		for n, tc := range cases {
			c := n
			est0 := sumBackends(&r.w.c).Established
			var first netip.Addr
			var dsts []netip.Addr
			for _, s := range tc.steps {
				now += s.dt + 10
				fr := [][]byte{lpSeg(c, s.flags, s.data, s.opts)}
				if s.twice {
					fr = append(fr, fr[0])
				}
				d := lpAt(t, r, now, fr...)
				dsts = append(dsts, d...)
				if !first.IsValid() {
					first = d[0]
				}
			}
			last := dsts[len(dsts)-1]
			split := 0
			for _, d := range dsts {
				if d != first {
					split++
				}
			}
			est := sumBackends(&r.w.c).Established - est0
			t.Logf("%v: %s: backends %v, handshakes counted %d", k, tc.name, dsts, est)
			if tc.name == "SYN retried 1,3,7,15,31 s" {
				// The 6th SYN came 16 s after the 5th: the new entry had
				// expired and it was chosen afresh (no harm: no backend
				// answered the earlier ones). Only the connection's own
				// packets must agree.
				for _, d := range dsts[5:] {
					if d != last {
						t.Errorf("%s: the connection split: %v", tc.name, dsts)
					}
				}
			} else if split != 0 {
				t.Errorf("%v: %s: packets split over backends: %v", k, tc.name, dsts)
			}
			if est != tc.est {
				t.Errorf("%v: %s: %d handshakes counted, want %d", k, tc.name, est, tc.est)
			}
		}
	})
}

// Endings and port reuse: an RST ends a connection and the client opens a
// new one on the same tuple 2 s later (the backend's socket may be in
// TIME_WAIT: RFC 6191 lets it accept); a FIN exchange ends one and the
// port is reused 1 s later. Each new connection's packets all reach one
// backend; after an RST the pin is kept (SYNKept).
func TestLegitEndAndReuse(t *testing.T) {
	lpEvery(t, 4096, func(t *testing.T, k sched.Kind, r *rig) {
		now := conntrack.Time(2000)
		// RST, then a new SYN within the closing timeout.
		rst := lpRange(0, 16)
		be, now := lpOpen(t, r, now, rst)
		now += 20
		lpAt(t, r, now, lpEach(rst, func(c int) []byte { return lpSeg(c, lpRA, 0, nil) })...)
		kept0 := r.w.c.SYNKept
		now += 2000
		got := lpAt(t, r, now, lpEach(rst, func(c int) []byte { return lpSeg(c, lpS, 0, nil) })...)
		if m := lpMoved(be, got); m != 0 {
			t.Errorf("%v: RST then SYN: %d of 16 new connections moved (kept %d)", k, m, r.w.c.SYNKept-kept0)
		}
		for k2, fl := range []uint8{lpA, lpPA, lpFA} {
			now += 20
			g := lpAt(t, r, now, lpEach(rst, func(c int) []byte { return lpSeg(c, fl, 50*k2, nil) })...)
			if m := lpMoved(got, g); m != 0 {
				t.Errorf("%v: RST then SYN: %d of 16 new connections split", k, m)
			}
		}
		if r.w.c.SYNKept-kept0 != 16 {
			t.Errorf("SYNKept +%d, want 16", r.w.c.SYNKept-kept0)
		}
		// FIN exchange (client FIN, final ACK sent twice), then port reuse.
		fin := lpRange(100, 16)
		be, now = lpOpen(t, r, now+20, fin)
		now += 20
		lpAt(t, r, now, lpEach(fin, func(c int) []byte { return lpSeg(c, lpFA, 0, nil) })...)
		for rep := 0; rep < 2; rep++ {
			now += 20
			g := lpAt(t, r, now, lpEach(fin, func(c int) []byte { return lpSeg(c, lpA, 0, nil) })...)
			if m := lpMoved(be, g); m != 0 {
				t.Errorf("%v: final ACK: %d of 16 moved", k, m)
			}
		}
		now += 1000
		got = lpAt(t, r, now, lpEach(fin, func(c int) []byte { return lpSeg(c, lpS, 0, nil) })...)
		for k2, fl := range []uint8{lpA, lpPA} {
			now += 20
			g := lpAt(t, r, now, lpEach(fin, func(c int) []byte { return lpSeg(c, fl, 50*k2, nil) })...)
			if m := lpMoved(got, g); m != 0 {
				t.Errorf("%v: port reuse after FIN: %d of 16 new connections split", k, m)
			}
		}
		t.Logf("%v: port reuse 1 s after FIN: %d of 16 new connections on another backend than the old (a new connection: allowed)", k, lpMoved(be, got))
	})
}
