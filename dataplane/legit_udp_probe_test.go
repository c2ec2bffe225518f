package dataplane

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/sched"
)

// UDP services operators run behind an L4 balancer, under every scheduler
// and on both paths: DNS (one datagram a query, a new source port each),
// long-lived streams (games, VoIP, VPN keepalives every 25 s), one-way
// syslog/statsd, every-port UDP VIPs, UDP beside TCP on one address. Under
// DSR a datagram that reaches another backend than its flow's is the UDP
// form of a broken connection. Time is the test clock (conntrack.Time, ms).

// upConfig: "web" (TCP 203.0.113.7:80, be1..be4), "game" (UDP :27015,
// g1..gN), "dnsu" (UDP :53, d1..d4), "dnst" (TCP :53, t1..t4), all under
// scheduler k, and "any" (UDP 203.0.113.9, every port, a1..a4) under k and
// hash anyHash (Maglev only when it is not 5-tuple). ct are extra
// [conntrack] keys.
func upConfig(k sched.Kind, capacity, mtu, nGame int, anyHash string, ct ...string) string {
	s := fmt.Sprintf("scheduler = %q", k)
	b := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`, fmt.Sprintf("mtu = %d", mtu)).
		Section("conntrack", append([]string{fmt.Sprintf("capacity = %d", capacity)}, ct...)...).
		Web(4, s).
		VIP("game", configtest.Web, 27015, `protocol = "udp"`, s)
	for i := 1; i <= nGame; i++ {
		b.Backend(fmt.Sprintf("g%d", i), fmt.Sprintf("10.0.2.%d", i))
	}
	b.VIP("dnsu", configtest.Web, 53, `protocol = "udp"`, s)
	for i := 1; i <= 4; i++ {
		b.Backend(fmt.Sprintf("d%d", i), fmt.Sprintf("10.0.3.%d", i))
	}
	b.VIP("dnst", configtest.Web, 53, s)
	for i := 1; i <= 4; i++ {
		b.Backend(fmt.Sprintf("t%d", i), fmt.Sprintf("10.0.5.%d", i))
	}
	anyKeys := []string{`protocol = "udp"`, s}
	if anyHash != "" {
		anyKeys = []string{`protocol = "udp"`, `scheduler = "maglev"`, fmt.Sprintf("hash = %q", anyHash)}
	}
	b.VIP("any", upAny, 0, anyKeys...)
	for i := 1; i <= 4; i++ {
		b.Backend(fmt.Sprintf("a%d", i), fmt.Sprintf("10.0.4.%d", i))
	}
	return b.String()
}

const upAny = "203.0.113.9"

// upRig is newRig with the configuration's own [conntrack] section (the
// daemon's: timeouts included), not only its capacity.
func upRig(t *testing.T, toml string, fused bool) *rig {
	t.Helper()
	cfg, err := config.Parse([]byte(toml), "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	enc, err := encap.New(encap.Config{SrcV4: cfg.Dataplane.LBIPv4.Addr, SrcV6: cfg.Dataplane.LBIPv6.Addr, MTU: cfg.Dataplane.MTU, DF: encap.DFSet})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, cfg: cfg, enc: enc, shared: &Shared{}}
	r.key, _ = flow.ParseKey(cfg.Dataplane.HashKey)
	r.publish(nil)
	r.w, err = NewWorker(0, r.shared, cfg.Conntrack, r.key, portMAC)
	if err != nil {
		t.Fatal(err)
	}
	r.w.generalOnly = !fused
	r.now = 1000
	return r
}

// upEvery runs fn under each scheduler of ks, fused and general.
func upEvery(t *testing.T, ks []sched.Kind, toml func(k sched.Kind) string, fn func(t *testing.T, k sched.Kind, r *rig)) {
	for _, k := range ks {
		t.Run(k.String(), func(t *testing.T) {
			for _, fused := range []bool{true, false} {
				t.Run(fmt.Sprintf("fused=%v", fused), func(t *testing.T) {
					r := upRig(t, toml(k), fused)
					fn(t, k, r)
					wantBalance(t, r)
				})
			}
		})
	}
}

// upDst is the GRE tunnel destination of a forwarded frame and checks that
// the inner packet is the client's, byte for byte; invalid when the packet
// was not tunnelled (dropped, or answered by the LB).
func upDst(t *testing.T, in, out []byte, v Verdict) netip.Addr {
	t.Helper()
	if v != Tx || len(out) < 38 || out[12] != 0x08 || out[13] != 0 || out[23] != 47 {
		return netip.Addr{}
	}
	if netip.AddrFrom4([4]byte(out[26:30])).String() != "192.0.2.10" {
		return netip.Addr{} // an ICMP reply from the VIP
	}
	if want := ipPacket(in); !bytes.Equal(out[38:], want) {
		t.Errorf("inner packet changed: %x, sent %x", out[38:min(len(out), 70)], want[:min(len(want), 32)])
	}
	return netip.AddrFrom4([4]byte(out[30:34]))
}

// upAt runs frames as one burst at time when (then the paced sweep, as the
// engine's loop does after every burst) and returns each packet's tunnel
// destination (invalid if not tunnelled) and verdict.
func upAt(t *testing.T, r *rig, when conntrack.Time, frames ...[]byte) ([]netip.Addr, []Verdict) {
	t.Helper()
	r.now = when - 10 // run adds 10 (wrapping arithmetic: the clock may wrap)
	out, v := r.run(frames...)
	r.w.ct.SweepPaced(when)
	d := make([]netip.Addr, len(frames))
	for i := range frames {
		d[i] = upDst(t, frames[i], out[i], v[i])
	}
	return d, v
}

// upMust is upAt that fails the test for a packet not forwarded.
func upMust(t *testing.T, r *rig, when conntrack.Time, frames ...[]byte) []netip.Addr {
	t.Helper()
	d, v := upAt(t, r, when, frames...)
	for i := range d {
		if !d[i].IsValid() {
			t.Fatalf("packet %d of %d at %d ms: verdict %v, not forwarded (drops %v, encap %v)", i, len(frames), when, v[i], r.w.c.Drops, r.w.c.Encap)
		}
	}
	return d
}

// upDgram is a UDP datagram from src:sport to dst:dport with data bytes
// of payload; df sets DF.
func upDgram(src string, sport uint16, dst string, dport uint16, data int, df bool) []byte {
	ff := uint16(0)
	if df {
		ff = 0x4000
	}
	p := udpDgram(sport, dport, uint16(8+data), data)
	for i := 8; i < len(p); i++ {
		p[i] = byte(i) // not all zeroes: the byte comparison means something
	}
	return raw4(src, dst, 17, sport, ff, p)
}

// upFlood is the i-th spoofed datagram of a flood: a source of its own in
// 100.64.0.0/10 and a new source port each.
func upFlood(i int, dst string, dport uint16) []byte {
	src := fmt.Sprintf("100.%d.%d.%d", 64+(i>>16)&63, (i>>8)&255, i&255)
	return upDgram(src, uint16(1024+(i*7919)%60000), dst, dport, 40, false)
}

// upEach is one datagram of game flow c (lpDgram) for every c of cs.
func upEach(cs []int, data int) [][]byte {
	return lpEach(cs, func(c int) []byte { return lpDgram(c, data) })
}

// upBackends names the tunnel destinations, for messages.
func upCount(ds []netip.Addr) map[string]int {
	m := map[string]int{}
	for _, d := range ds {
		m[d.String()]++
	}
	return m
}

func upPickers() []sched.Kind {
	var ks []sched.Kind
	for _, k := range sched.Kinds() {
		if k.IsPicker() {
			ks = append(ks, k)
		}
	}
	return ks
}

// A WireGuard-style tunnel: the handshake initiation (148 bytes), the
// first data, then a persistent keepalive (32 bytes) every 25 s for 10
// minutes with the default udp timeout (30 s). Then silences: exactly the
// timeout (30 s: the entry lives, idle > timeout expires it), and past it
// (30.001 s, 45 s, 60 s: one or two lost keepalives). Within the timeout
// no flow may move under any scheduler. Past it, the README says a UDP
// flow's next datagram is chosen afresh: under Maglev the table gives the
// same backend (asserted), under a load-based scheduler another one for
// most flows (recorded: a documented limit).
func TestUDPProbeVPNKeepaliveAndPauses(t *testing.T) {
	upEvery(t, sched.Kinds(), func(k sched.Kind) string { return upConfig(k, 4096, 1500, 4, "") }, func(t *testing.T, k sched.Kind, r *rig) {
		cs := lpRange(0, 64)
		now := conntrack.Time(2000)
		be := upMust(t, r, now, upEach(cs, 120)...) // 148-byte initiation: 120 bytes of payload
		now += 30
		if m := lpMoved(be, upMust(t, r, now, upEach(cs, 100)...)); m != 0 {
			t.Fatalf("second datagram: %d of 64 moved", m)
		}
		for step := 1; step <= 24; step++ {
			now += 25_000
			if m := lpMoved(be, upMust(t, r, now, upEach(cs, 4)...)); m != 0 {
				t.Fatalf("%v: keepalive %d (%d s): %d of 64 tunnels moved", k, step, 25*step, m)
			}
		}
		n := 0
		r.w.ct.ForEach(func(e *conntrack.Entry) {
			if e.State() == conntrack.StateOther {
				n++
			}
		})
		if n != 64 || r.w.ct.Len() != 64 {
			t.Errorf("%d entries in state other, %d in all, want 64", n, r.w.ct.Len())
		}
		// Exactly the timeout: still the same entry.
		miss0 := r.w.c.CTMisses
		now += 30_000
		if m := lpMoved(be, upMust(t, r, now, upEach(cs, 4)...)); m != 0 || r.w.c.CTMisses != miss0 {
			t.Errorf("%v: after exactly 30 s of silence %d of 64 moved, misses +%d (want 0, 0)", k, m, r.w.c.CTMisses-miss0)
		}
		for _, gap := range []conntrack.Time{30_001, 45_000, 60_000} {
			miss0 := r.w.c.CTMisses
			now += gap
			got := upMust(t, r, now, upEach(cs, 4)...)
			m := lpMoved(be, got)
			if r.w.c.CTMisses-miss0 != 64 {
				t.Errorf("%v: silence of %d ms: misses +%d, want 64 (entries expired)", k, gap, r.w.c.CTMisses-miss0)
			}
			if !k.IsPicker() && m != 0 {
				t.Errorf("%v: silence of %d ms: %d of 64 tunnels moved under Maglev with an unchanged table", k, gap, m)
			}
			t.Logf("%v: silence of %d ms (udp timeout 30 s): %d of 64 tunnels reached another backend", k, gap, m)
			be = got // the new pin, for the next silence
			// the flow goes on: the next keepalive follows the new pin
			now += 25_000
			if m := lpMoved(be, upMust(t, r, now, upEach(cs, 4)...)); m != 0 {
				t.Errorf("%v: after a re-choice, %d of 64 split again", k, m)
			}
		}
	})
}

// A game or VoIP stream (a datagram every second from each of 64
// clients) while its VIP's backend set changes: a backend added (g5), one
// drained (g1, weight 0), one down under on_down "keep" (g2: weight 0,
// unhealthy), one down under on_down "move" (g3: its flows leave). The
// README: pins hold across table changes, drains and "keep"; "move"
// moves the down backend's flows (counted in moved) and no other.
func TestUDPProbeStreamWhileBackendsChange(t *testing.T) {
	ref := func(b string) BackendRef { return BackendRef{"game", b} }
	upEvery(t, sched.Kinds(), func(k sched.Kind) string { return upConfig(k, 4096, 1500, 5, "") }, func(t *testing.T, k sched.Kind, r *rig) {
		g := func(n int) netip.Addr { return netip.MustParseAddr(fmt.Sprintf("10.0.2.%d", n)) }
		r.publish(Overrides{ref("g5"): {Weight: 0}}) // not yet in service
		cs := lpRange(0, 64)
		now := conntrack.Time(2000)
		be := upMust(t, r, now, upEach(cs, 160)...)
		for _, d := range be {
			if d == g(5) {
				t.Fatalf("a new flow went to g5 at weight 0")
			}
		}
		stream := func(what string) []netip.Addr {
			var got []netip.Addr
			for s := 0; s < 3; s++ {
				now += 1000
				got = upMust(t, r, now, upEach(cs, 160)...)
				if m := lpMoved(be, got); m != 0 {
					t.Errorf("%v: %s: %d of 64 streams moved (%v -> %v)", k, what, m, upCount(be), upCount(got))
					return got
				}
			}
			return got
		}
		r.publish(nil)
		stream("g5 added")
		r.publish(Overrides{ref("g1"): {Weight: 0}})
		stream("g1 drained")
		over := Overrides{ref("g1"): {Weight: 0}, ref("g2"): {Weight: 0, Unhealthy: true}}
		r.publish(over)
		stream("g2 down, on_down keep")
		// g3 down under on_down "move".
		onG3 := 0
		for _, d := range be {
			if d == g(3) {
				onG3++
			}
		}
		over[ref("g3")] = Effective{Weight: 0, Down: true, Unhealthy: true}
		r.publish(over)
		moved0 := r.w.c.Moved
		now += 1000
		got := upMust(t, r, now, upEach(cs, 160)...)
		wrong := 0
		for i := range got {
			switch {
			case be[i] == g(3) && (got[i] == g(3) || got[i] == g(1) || got[i] == g(2)):
				wrong++ // must leave g3 for a serving backend
			case be[i] != g(3) && got[i] != be[i]:
				wrong++ // flows on other backends never move
			}
		}
		if wrong != 0 || r.w.c.Moved-moved0 != uint64(onG3) {
			t.Errorf("%v: g3 down (move): %d flows wrong, moved +%d, want 0 and %d (%v -> %v)", k, wrong, r.w.c.Moved-moved0, onG3, upCount(be), upCount(got))
		}
		be = got
		stream("after the move")
		// New streams now: only g4 and g5 serve.
		fresh := upMust(t, r, now+1000, upEach(lpRange(200, 64), 160)...)
		now += 1000
		for _, d := range fresh {
			if d != g(4) && d != g(5) {
				t.Errorf("%v: a new stream went to %v (drained, or down)", k, d)
				break
			}
		}
	})
}

// A flood of spoofed one-datagram flows (DNS-style: a new source and port
// each) at the UDP :53 VIP fills a 4096-entry table six times over, while
// 256 game streams and 256 TCP connections run beside it and legitimate
// DNS queries keep coming. The README: a one-datagram flow ranks as new,
// so the flood competes with itself and with SYNs, never with UDP flows
// past their second packet or established connections.
func TestUDPProbeDNSFloodKeepsStreams(t *testing.T) {
	upEvery(t, sched.Kinds(), func(k sched.Kind) string { return upConfig(k, 4096, 1500, 4, "") }, func(t *testing.T, k sched.Kind, r *rig) {
		streams := lpRange(0, 256)
		conns := lpRange(1000, 256)
		now := conntrack.Time(2000)
		sb := upMust(t, r, now, upEach(streams[:64], 100)...)
		sb = append(sb, upMust(t, r, now+1, upEach(streams[64:128], 100)...)...)
		sb = append(sb, upMust(t, r, now+2, upEach(streams[128:192], 100)...)...)
		sb = append(sb, upMust(t, r, now+3, upEach(streams[192:], 100)...)...)
		now += 20
		for q := 0; q < 4; q++ {
			got := upMust(t, r, now+conntrack.Time(q), upEach(streams[64*q:64*q+64], 100)...)
			if m := lpMoved(sb[64*q:64*q+64], got); m != 0 {
				t.Fatalf("second datagrams: %d moved", m)
			}
		}
		var tb []netip.Addr
		for q := 0; q < 4; q++ {
			b, at := lpOpen(t, r, now+100+conntrack.Time(100*q), conns[64*q:64*q+64])
			tb = append(tb, b...)
			now = at
		}
		ct0 := r.w.ct.Counters()
		const bursts = 800
		flood, floodFwd, legit, legitFwd := 0, 0, 0, 0
		movedS, movedT := 0, 0
		// Joiners: a game client whose first two datagrams are 20 ms
		// apart, and one 300 ms apart, starting during the flood.
		var j20, j300 []int
		var j20b, j300b, j20g, j300g []netip.Addr
		for b := 0; b < bursts; b++ {
			now++
			fr := make([][]byte, 0, 32)
			for i := 0; i < 31; i++ {
				fr = append(fr, upFlood(b*31+i, configtest.Web, 53))
			}
			fr = append(fr, upDgram(fmt.Sprintf("198.51.120.%d", 1+b%200), uint16(20000+b), configtest.Web, 53, 30, false))
			d, _ := upAt(t, r, now, fr...)
			for i := range d {
				ok := d[i].IsValid() && strings.HasPrefix(d[i].String(), "10.0.3.")
				if i < 31 {
					flood++
					if ok {
						floodFwd++
					}
				} else {
					legit++
					if ok {
						legitFwd++
					}
				}
			}
			if b%100 == 50 {
				now++
				for q := 0; q < 4; q++ {
					movedS += lpMoved(sb[64*q:64*q+64], upMust(t, r, now+conntrack.Time(q), upEach(streams[64*q:64*q+64], 100)...))
					movedT += lpMoved(tb[64*q:64*q+64], upMust(t, r, now+conntrack.Time(4+q), lpEach(conns[64*q:64*q+64], func(c int) []byte { return lpSeg(c, lpA, 0, nil) })...))
				}
				now += 8
			}
			if b%10 == 5 && b < 400 {
				c := 2000 + b
				now++
				j20 = append(j20, c)
				j20b = append(j20b, upMust(t, r, now, lpDgram(c, 80))...)
				j300 = append(j300, c+1000)
				j300b = append(j300b, upMust(t, r, now+1, lpDgram(c+1000, 80))...)
				now++
			}
			if b >= 25 && (b-20)%10 == 5 && b-20 < 400 {
				// the joiner of 20 bursts ago sends its second datagram
				c := 2000 + b - 20
				now++
				j20g = append(j20g, upMust(t, r, now, lpDgram(c, 80))...)
			}
		}
		now += 300
		for _, c := range j300 {
			now++
			j300g = append(j300g, upMust(t, r, now, lpDgram(c, 80))...)
		}
		cs := r.w.ct.Counters()
		t.Logf("%v: flood %d datagrams (%d forwarded), legitimate queries %d (%d forwarded); table len %d; inserts +%d, insert failures +%d, evicted other +%d new +%d established +%d, expired +%d",
			k, flood, floodFwd, legit, legitFwd, r.w.ct.Len(), cs.Inserts-ct0.Inserts, cs.InsertFailed-ct0.InsertFailed,
			cs.Evicted[conntrack.StateOther]-ct0.Evicted[conntrack.StateOther], cs.Evicted[conntrack.StateNew]-ct0.Evicted[conntrack.StateNew],
			cs.Evicted[conntrack.StateEstablished]-ct0.Evicted[conntrack.StateEstablished], cs.Expired-ct0.Expired)
		if floodFwd != flood || legitFwd != legit {
			t.Errorf("%v: forwarded %d of %d flood datagrams and %d of %d queries to the DNS backends", k, floodFwd, flood, legitFwd, legit)
		}
		if movedS != 0 || movedT != 0 {
			t.Errorf("%v: under the flood %d game stream datagrams and %d TCP segments reached another backend", k, movedS, movedT)
		}
		if ev := cs.Evicted[conntrack.StateEstablished] - ct0.Evicted[conntrack.StateEstablished]; ev != 0 {
			t.Errorf("%v: the flood evicted %d established connections", k, ev)
		}
		if cs.Evicted[conntrack.StateOther]-ct0.Evicted[conntrack.StateOther] == 0 {
			t.Errorf("%v: a flood 6x the table evicted no one-datagram entry", k)
		}
		// The streams' entries: 256 UDP (state other) and 256 established.
		var ud, est int
		r.w.ct.ForEach(func(e *conntrack.Entry) {
			key := e.Key()
			switch {
			case key.DstPort == 27015:
				ud++
			case key.DstPort == 80 && e.State() == conntrack.StateEstablished:
				est++
			}
		})
		if ud < 256 || est != 256 {
			t.Errorf("%v: after the flood %d game entries and %d established connections remain, want >= 256 and 256", k, ud, est)
		}
		m20, m300 := lpMoved(j20b[:len(j20g)], j20g), lpMoved(j300b, j300g)
		t.Logf("%v: game clients joining during the flood: %d of %d moved between their first two datagrams 20 ms apart, %d of %d 300+ ms apart", k, m20, len(j20g), m300, len(j300g))
		if !k.IsPicker() && (m20 != 0 || m300 != 0) {
			t.Errorf("%v: joiners moved under Maglev with an unchanged table: %d, %d", k, m20, m300)
		}
	})
}

// A stream that starts while its buckets hold only protected entries: the
// README's "A new flow whose conntrack insert fails (table full, every
// candidate slot protected) is not pinned. Under a load-based scheduler it
// is placed by the VIP's Maglev table instead ...: every packet of the flow
// gets the same answer", and "new connections then work but are
// untracked, and under any scheduler a table change moves them". Here the
// table does not change. The slots are taken by a blind spoofer's
// two-datagram flows (README: two forged packets a tuple buy a protected
// slot; for UDP the second datagram makes it "other"), who then stops: 30
// s later those entries expire, and the legitimate streams, which kept
// sending every 5 s, find a slot.
func TestUDPProbeUntrackedStreamKeepsBackendWhenSlotFrees(t *testing.T) {
	upEvery(t, sched.Kinds(), func(k sched.Kind) string { return upConfig(k, 64, 1500, 4, "") }, func(t *testing.T, k sched.Kind, r *rig) {
		now := conntrack.Time(2000)
		for i := 0; i < 200; i++ {
			f := upFlood(i, configtest.Web, 27015)
			now++
			upMust(t, r, now, f, f) // two datagrams of one forged tuple
		}
		if r.w.ct.Len() != r.w.ct.Slots() {
			t.Fatalf("the spoofer filled %d of %d slots", r.w.ct.Len(), r.w.ct.Slots())
		}
		cs := lpRange(0, 32)
		fail0 := r.w.ct.Counters().InsertFailed
		now += 1000
		be := upMust(t, r, now, upEach(cs, 160)...)
		failed := r.w.ct.Counters().InsertFailed - fail0
		moves, flows := 0, map[int]bool{}
		for s := 0; s < 12; s++ { // a minute, a datagram every 5 s
			now += 5000
			got := upMust(t, r, now, upEach(cs, 160)...)
			for i := range got {
				if got[i] != be[i] {
					moves++
					flows[i] = true
				}
			}
			be = got
		}
		tracked := 0
		r.w.ct.ForEach(func(e *conntrack.Entry) {
			if key := e.Key(); key.SrcPort >= 50000 && key.SrcPort < 50032 {
				tracked++
			}
		})
		t.Logf("%v: 32 streams began with %d insert failures (table full of forged 2-datagram flows); after the spoofer's entries expired %d are tracked; %d streams changed backend mid-stream (%d moves)",
			k, failed, tracked, len(flows), moves)
		if len(flows) != 0 {
			t.Errorf("%v: %d of 32 untracked UDP streams moved to another backend when a slot freed (table unchanged)", k, len(flows))
		}
	})
}

// The same without a spoofer: a table sized too small (capacity 1: one
// bucket of 8 slots) holding 8 live streams; 8 more streams start
// untracked; then the first 8 end (their clients leave). The README's
// promise for untracked flows is the same.
func TestUDPProbeTinyTableLateStreams(t *testing.T) {
	upEvery(t, sched.Kinds(), func(k sched.Kind) string { return upConfig(k, 1, 1500, 4, "") }, func(t *testing.T, k sched.Kind, r *rig) {
		if r.w.ct.Slots() != 8 {
			t.Fatalf("capacity 1: %d slots, want 8", r.w.ct.Slots())
		}
		first, late := lpRange(0, 8), lpRange(8, 8)
		now := conntrack.Time(2000)
		fb := upMust(t, r, now, upEach(first, 100)...)
		now += 20
		upMust(t, r, now, upEach(first, 100)...)
		now += 20
		fail0 := r.w.ct.Counters().InsertFailed
		lb := upMust(t, r, now, upEach(late, 100)...)
		for s := 0; s < 5; s++ {
			now += 5000
			if m := lpMoved(fb, upMust(t, r, now, upEach(first, 100)...)); m != 0 {
				t.Errorf("%v: %d tracked streams moved", k, m)
			}
			if m := lpMoved(lb, upMust(t, r, now+1, upEach(late, 100)...)); m != 0 {
				t.Errorf("%v: %d untracked streams moved while the table is full", k, m)
			}
		}
		failed := r.w.ct.Counters().InsertFailed - fail0
		// The first 8 end; the late 8 go on.
		moved := map[int]bool{}
		for s := 0; s < 10; s++ {
			now += 5000
			got := upMust(t, r, now, upEach(late, 100)...)
			for i := range got {
				if got[i] != lb[i] {
					moved[i] = true
				}
			}
		}
		t.Logf("%v: capacity 1 (8 slots): 8 late streams, %d insert failures while full; %d of 8 moved once the first streams' entries expired", k, failed, len(moved))
		if failed != 6*8 {
			t.Errorf("insert failures %d, want 48 (8 streams, 6 datagrams each)", failed)
		}
		if len(moved) != 0 {
			t.Errorf("%v: %d of 8 untracked streams reached another backend mid-stream when slots freed (table unchanged)", k, len(moved))
		}
	})
}

// Every-port UDP VIP ("any", port 0), 5-tuple hash: one client's flows to
// different ports are placed each on its own; a client behind a NAT that
// rebinds (new source port; then a new public address) is a new flow. With
// hash = "3-tuple" (Maglev) all of a client's ports meet on one backend
// and a port rebinding keeps it. An exact-port VIP at the same address is
// not on it here (203.0.113.9 has only "any"); TCP to it finds no VIP.
func TestUDPProbeEveryPortVIP(t *testing.T) {
	for _, hash := range []string{"", "3-tuple"} {
		ks := sched.Kinds()
		if hash != "" {
			ks = []sched.Kind{sched.Maglev}
		}
		t.Run("hash="+hash, func(t *testing.T) {
			upEvery(t, ks, func(k sched.Kind) string { return upConfig(k, 4096, 1500, 4, hash) }, func(t *testing.T, k sched.Kind, r *rig) {
				now := conntrack.Time(2000)
				// One client, 64 destination ports (a VoIP client's RTP and
				// RTCP pairs, or a game's several services).
				var fr [][]byte
				for p := 0; p < 64; p++ {
					fr = append(fr, upDgram("198.51.100.77", 40000, upAny, uint16(10000+2*p), 172, false))
				}
				b1 := upMust(t, r, now, fr...)
				now += 20
				if m := lpMoved(b1, upMust(t, r, now, fr...)); m != 0 {
					t.Errorf("%v: %d of 64 ports split between datagrams", k, m)
				}
				spread := upCount(b1)
				if hash == "3-tuple" && len(spread) != 1 {
					t.Errorf("3-tuple: one client's ports on %d backends: %v", len(spread), spread)
				}
				if hash == "" && len(spread) < 2 {
					t.Errorf("5-tuple: 64 flows of one client all on %v", spread)
				}
				// NAT rebinding: 64 clients at :51820, then their source
				// port changes, then their address.
				src := func(c int) string { return fmt.Sprintf("198.51.101.%d", 1+c) }
				mk := func(c int, sp uint16, s string) []byte { return upDgram(s, sp, upAny, 51820, 32, false) }
				var old, rebound, readdr [][]byte
				for c := 0; c < 64; c++ {
					old = append(old, mk(c, uint16(40000+c), src(c)))
					rebound = append(rebound, mk(c, uint16(60000+c), src(c)))
					readdr = append(readdr, mk(c, uint16(60000+c), fmt.Sprintf("198.51.102.%d", 1+c)))
				}
				now += 20
				bo := upMust(t, r, now, old...)
				now += 20
				upMust(t, r, now, old...)
				now += 10_000
				br := upMust(t, r, now, rebound...)
				now += 25
				if m := lpMoved(br, upMust(t, r, now, rebound...)); m != 0 {
					t.Errorf("%v: rebound flows split: %d", k, m)
				}
				now += 10_000
				ba := upMust(t, r, now, readdr...)
				mp, ma := lpMoved(bo, br), lpMoved(bo, ba)
				t.Logf("%v hash %q: one client's 64 ports on %d backends; NAT rebinding to a new port: %d of 64 reached another backend, to a new address: %d of 64", k, hash, len(spread), mp, ma)
				if hash == "3-tuple" && mp != 0 {
					t.Errorf("3-tuple: %d of 64 clients moved when only their port changed", mp)
				}
				// The old tuple is still pinned while it lives: a late
				// datagram on it reaches its old backend.
				now += 20
				if m := lpMoved(bo, upMust(t, r, now, old...)); m != 0 {
					t.Errorf("%v: %d late datagrams of the old tuples went elsewhere (entry alive)", k, m)
				}
				// TCP to the every-port UDP address: no VIP.
				drop0 := r.w.c.Drops[DropNoService]
				now += 20
				d, _ := upAt(t, r, now, raw4("198.51.100.77", upAny, 6, 1, 0x4000, tcpSeg(40000, 443, lpS, 0)))
				if d[0].IsValid() || r.w.c.Drops[DropNoService] != drop0+1 {
					t.Errorf("TCP to an every-port UDP VIP: forwarded to %v, no-service +%d", d[0], r.w.c.Drops[DropNoService]-drop0)
				}
			})
		})
	}
}

// UDP and TCP on one address and port (DNS: "dnsu" UDP :53 with d1..d4,
// "dnst" TCP :53 with t1..t4): each protocol reaches its own VIP's
// backends; a client's truncated-answer retry over TCP is its own flow.
// A SYN flood at TCP :53 leaves the UDP :53 flows where they are.
func TestUDPProbeNextToTCP(t *testing.T) {
	upEvery(t, sched.Kinds(), func(k sched.Kind) string { return upConfig(k, 1024, 1500, 4, "") }, func(t *testing.T, k sched.Kind, r *rig) {
		now := conntrack.Time(2000)
		var uq, tq [][]byte
		for c := 0; c < 64; c++ {
			s := fmt.Sprintf("198.51.103.%d", 1+c)
			uq = append(uq, upDgram(s, uint16(30000+c), configtest.Web, 53, 40, false))
			tq = append(tq, raw4(s, configtest.Web, 6, 1, 0x4000, tcpSeg(uint16(30000+c), 53, lpS, 0)))
		}
		ub := upMust(t, r, now, uq...)
		now += 10
		upMust(t, r, now, uq...) // a stream of queries from one socket: established UDP flows
		tb := upMust(t, r, now+10, tq...)
		now += 10
		for i := range ub {
			if !strings.HasPrefix(ub[i].String(), "10.0.3.") || !strings.HasPrefix(tb[i].String(), "10.0.5.") {
				t.Fatalf("%v: UDP :53 to %v, TCP :53 to %v", k, ub[i], tb[i])
			}
		}
		// SYN flood at TCP :53, 20x the table.
		for b := 0; b < 640; b++ {
			now++
			var fr [][]byte
			for i := 0; i < 32; i++ {
				n := b*32 + i
				fr = append(fr, raw4(fmt.Sprintf("100.%d.%d.%d", 64+(n>>16)&63, (n>>8)&255, n&255), configtest.Web, 6, 1, 0x4000, tcpSeg(uint16(1024+n%60000), 53, lpS, 0)))
			}
			upMust(t, r, now, fr...)
		}
		now += 10
		if m := lpMoved(ub, upMust(t, r, now, uq...)); m != 0 {
			t.Errorf("%v: after a SYN flood at TCP :53, %d of 64 UDP :53 flows moved", k, m)
		}
	})
}

// ICMP errors about UDP flows: a client's port unreachable (its socket
// closed) quoting the backend's reply (VIP:port -> client:port), and a
// router's frag-needed about the same reply, reach the backend that owns
// the flow, byte for byte, create no state and refresh nothing; for an
// every-port VIP too.
func TestUDPProbeICMPErrorsAboutUDPFlows(t *testing.T) {
	upEvery(t, sched.Kinds(), func(k sched.Kind) string { return upConfig(k, 4096, 1500, 4, "") }, func(t *testing.T, k sched.Kind, r *rig) {
		now := conntrack.Time(2000)
		cs := lpRange(0, 32)
		be := upMust(t, r, now, upEach(cs, 100)...)
		now += 20
		upMust(t, r, now, upEach(cs, 100)...)
		var ab []netip.Addr
		for c := 0; c < 32; c++ {
			now++
			ab = append(ab, upMust(t, r, now, upDgram(lpSrc(c), uint16(50000+c), upAny, uint16(5004+2*c), 172, false))...)
		}
		reply := func(vip string, vport uint16, c int) []byte {
			return raw4(vip, lpSrc(c), 17, 7, 0x4000, udpDgram(vport, uint16(50000+c), 8+100, 100))[14:]
		}
		last := map[flow.Tuple]conntrack.Time{}
		r.w.ct.ForEach(func(e *conntrack.Entry) { last[e.Key()] = e.LastSeen() })
		len0, err0 := r.w.ct.Len(), r.w.c.ICMPErrors
		now += 1000
		var pu, fn, ap [][]byte
		for c := range cs {
			pu = append(pu, raw4(lpSrc(c), configtest.Web, 1, 9, 0, icmpMsg(3, 3, 0, reply(configtest.Web, 27015, c)[:28])))
			fn = append(fn, raw4("192.0.2.99", configtest.Web, 1, 9, 0, icmpMsg(3, 4, 1400, reply(configtest.Web, 27015, c))))
			ap = append(ap, raw4(lpSrc(c), upAny, 1, 9, 0, icmpMsg(3, 3, 0, reply(upAny, uint16(5004+2*c), c)[:28])))
		}
		gp := upMust(t, r, now, pu...)
		gf := upMust(t, r, now+1, fn...)
		ga := upMust(t, r, now+2, ap...)
		if m1, m2, m3 := lpMoved(be, gp), lpMoved(be, gf), lpMoved(ab, ga); m1+m2+m3 != 0 {
			t.Errorf("%v: ICMP errors elsewhere than the flow's backend: port unreachable %d, frag-needed %d, every-port %d (of 32 each)", k, m1, m2, m3)
		}
		if r.w.ct.Len() != len0 || r.w.c.ICMPErrors-err0 != 96 {
			t.Errorf("conntrack %d entries (was %d), ICMP errors +%d (want 96)", r.w.ct.Len(), len0, r.w.c.ICMPErrors-err0)
		}
		r.w.ct.ForEach(func(e *conntrack.Entry) {
			if last[e.Key()] != e.LastSeen() {
				t.Errorf("an ICMP error refreshed the entry of %v", e.Key())
			}
		})
	})
}

// Datagrams too big for the tunnel (mtu 1500, GRE: 24 bytes): with DF
// the client gets frag-needed with the tunnel's MTU (1476) from the VIP;
// without DF they are dropped (README: not fragmented). A datagram the
// client fragmented (3000 bytes at a 1500 MTU: fragments of 1500 and 1520
// bytes) loses its first fragment. With jumbo frames toward the backends
// (mtu 9000) the fragments pass, but fragments go to the lowest-port VIP
// of their address and protocol (README, "How a packet goes through"):
// the game's fragmented datagram reaches the DNS VIP's backend.
func TestUDPProbeTooBigAndFragmented(t *testing.T) {
	for _, mtu := range []int{1500, 9000} {
		t.Run(fmt.Sprint("mtu=", mtu), func(t *testing.T) {
			upEvery(t, []sched.Kind{sched.Maglev, sched.RoundRobin}, func(k sched.Kind) string { return upConfig(k, 4096, mtu, 4, "") }, func(t *testing.T, k sched.Kind, r *rig) {
				now := conntrack.Time(2000)
				max := mtu - encap.Overhead(encap.GRE, false)
				fits := upDgram(lpSrc(1), 50001, configtest.Web, 27015, max-28, true)
				be := upMust(t, r, now, fits)
				if mtu == 1500 {
					big := upDgram(lpSrc(1), 50001, configtest.Web, 27015, max-27, true)
					now += 10
					out, v := r.run(big)
					if v[0] != Tx || out[0][23] != 1 || out[0][34] != 3 || out[0][35] != 4 || int(binary.BigEndian.Uint16(out[0][40:])) != max ||
						netip.AddrFrom4([4]byte(out[0][26:30])).String() != configtest.Web || netip.AddrFrom4([4]byte(out[0][30:34])) != netip.MustParseAddr(lpSrc(1)) {
						t.Errorf("too big with DF: verdict %v, frame %x", v[0], out[0][:min(len(out[0]), 48)])
					}
					noDF := upDgram(lpSrc(1), 50001, configtest.Web, 27015, max-27, false)
					now += 10
					if d, _ := upAt(t, r, now, noDF); d[0].IsValid() || r.w.c.Encap[encap.DropTooBigNoDF] != 1 {
						t.Errorf("too big without DF: %v, drop-too-big-no-df %d", d[0], r.w.c.Encap[encap.DropTooBigNoDF])
					}
				}
				// The pin holds for the flow's next datagram.
				now += 10
				if got := upMust(t, r, now, fits); got[0] != be[0] {
					t.Errorf("the flow moved after a too-big datagram")
				}
				// A 3000-byte datagram fragmented by the client at 1500:
				// fragments of 1500, 1500 and 40 bytes.
				pl := udpDgram(50001, 27015, 3000-20, 3000-28)
				f1 := raw4(lpSrc(1), configtest.Web, 17, 77, 0x2000, pl[:1480])
				f2 := raw4(lpSrc(1), configtest.Web, 17, 77, 0x2000|1480/8, pl[1480:2960])
				f3 := raw4(lpSrc(1), configtest.Web, 17, 77, 2960/8, pl[2960:])
				now += 10
				enc0 := r.w.c.Encap
				d, _ := upAt(t, r, now, f1, f2, f3)
				t.Logf("%v mtu %d: the game flow's backend %v; its fragmented datagram's 3 fragments reached %v, %v, %v (encap results +%v)",
					k, mtu, be[0], d[0], d[1], d[2], diffEncap(r.w.c.Encap, enc0))
				if mtu == 9000 && (d[0] != d[1] || d[1] != d[2] || !d[0].IsValid()) {
					t.Errorf("fragments of one datagram split: %v", d)
				}
				if mtu == 1500 && (d[0].IsValid() || d[1].IsValid()) {
					t.Errorf("1500-byte fragments passed a 1476-byte tunnel: %v", d)
				}
			})
		})
	}
}

// udp at its limits. The minimum, 1ms: a datagram each ms keeps the
// entry, one each 2 ms makes every datagram a new flow (expected: a
// timeout that short tracks nothing). The maximum, 168h: a flow silent 7
// days keeps its pin, 7 days and 1 ms later it is a new flow; across the
// clock's wrap (2^32 ms) too. Below and above are refused by the config.
func TestUDPProbeTimeoutLimits(t *testing.T) {
	for _, tc := range []struct {
		v  string
		ok bool
	}{{`"1ms"`, true}, {`"999us"`, false}, {`"168h"`, true}, {`"168h0m0.001s"`, false}, {`"1500us"`, true}} {
		_, err := config.Parse([]byte(upConfig(sched.Maglev, 4096, 1500, 4, "", "udp = "+tc.v)), "t.toml")
		if (err == nil) != tc.ok {
			t.Errorf("udp = %s: error %v, want ok=%v", tc.v, err, tc.ok)
		}
	}
	t.Run("1ms", func(t *testing.T) {
		upEvery(t, sched.Kinds(), func(k sched.Kind) string { return upConfig(k, 4096, 1500, 4, "", `udp = "1ms"`) }, func(t *testing.T, k sched.Kind, r *rig) {
			cs := lpRange(0, 32)
			now := conntrack.Time(2000)
			be := upMust(t, r, now, upEach(cs, 50)...)
			nf0 := r.w.c.VIPs[r.shared.Services.Load().LookupVIP(netip.MustParseAddr(configtest.Web), 27015, 17).ID].NewFlows
			for s := 0; s < 50; s++ {
				now++
				if m := lpMoved(be, upMust(t, r, now, upEach(cs, 50)...)); m != 0 {
					t.Fatalf("%v: 1 ms apart with udp 1ms: %d moved", k, m)
				}
			}
			vid := r.shared.Services.Load().LookupVIP(netip.MustParseAddr(configtest.Web), 27015, 17).ID
			if nf := r.w.c.VIPs[vid].NewFlows - nf0; nf != 0 {
				t.Errorf("1 ms apart: %d new flows, want 0", nf)
			}
			moved := 0
			for s := 0; s < 20; s++ {
				now += 2
				moved += lpMoved(be, upMust(t, r, now, upEach(cs, 50)...))
			}
			nf := r.w.c.VIPs[vid].NewFlows - nf0
			t.Logf("%v: udp 1ms, datagrams 2 ms apart: %d new flows for 640 datagrams, %d reached another backend than the first", k, nf, moved)
			if nf != 640 {
				t.Errorf("2 ms apart: %d new flows, want 640", nf)
			}
			if !k.IsPicker() && moved != 0 {
				t.Errorf("Maglev: %d moved", moved)
			}
		})
	})
	t.Run("168h", func(t *testing.T) {
		upEvery(t, sched.Kinds(), func(k sched.Kind) string { return upConfig(k, 4096, 1500, 4, "", `udp = "168h"`) }, func(t *testing.T, k sched.Kind, r *rig) {
			const week = conntrack.Time(7 * 24 * 3600 * 1000)
			cs := lpRange(0, 32)
			for _, start := range []conntrack.Time{2000, ^conntrack.Time(0) - week/2} { // the second pause spans the clock's wrap
				now := start
				be := upMust(t, r, now, upEach(cs, 50)...)
				now += 10
				upMust(t, r, now, upEach(cs, 50)...)
				miss0 := r.w.c.CTMisses
				now += week
				if m := lpMoved(be, upMust(t, r, now, upEach(cs, 50)...)); m != 0 || r.w.c.CTMisses != miss0 {
					t.Errorf("%v (from %d): silent exactly 7 days: %d moved, misses +%d", k, start, m, r.w.c.CTMisses-miss0)
				}
				now += week + 1
				upMust(t, r, now, upEach(cs, 50)...)
				if r.w.c.CTMisses-miss0 != 32 {
					t.Errorf("%v (from %d): silent 7 days and 1 ms: misses +%d, want 32", k, start, r.w.c.CTMisses-miss0)
				}
				cs = lpRange(100, 32)
			}
		})
	})
}

func diffEncap(a, b [encap.NumResults]uint64) map[string]uint64 {
	m := map[string]uint64{}
	for i := range a {
		if a[i] != b[i] {
			m[encap.Result(i).String()] = a[i] - b[i]
		}
	}
	return m
}
