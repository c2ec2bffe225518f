package dataplane

import (
	"fmt"
	"testing"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/punt"
)

// Probes of the exception path's budgets by an attacker on the internet
// and on the LAN.

// icmpFrame is an IP packet of protocol proto (ICMP or ICMPv6, whichever
// the address family) from src to dst carrying an ICMP header of type
// typ and code, hop limit (TTL) hop, and 20 bytes of body.
func icmpFrame(t *testing.T, src, dst string, proto layers.IPProtocol, typ, code, hop uint8) []byte {
	t.Helper()
	f := frame(t, src, dst, 0, 0, proto, "", 24, true)
	l3, l4 := 14, 14+20
	if f[12] == 0x86 { // IPv6
		l4 = 14 + 40
		f[l3+7] = hop
	} else {
		f[l3+8] = hop
	}
	f[l4], f[l4+1] = typ, code
	return f
}

// An attacker on the internet cannot put a packet into the neighbour
// class: the kernel takes neighbour discovery only as ICMPv6 (not IPv4
// protocol 58), with code 0 and a hop limit of 255, which no router
// forwards (RFC 4861 7.1.1 and its siblings; Linux's ndisc_rcv drops
// anything else). A flood of lookalikes from the internet spends the
// other class's budget, and the LAN's real neighbour solicitations still
// reach the kernel. So does a flood from the link of what a host's kernel
// drops or needs not: router solicitations, other hosts' listener reports.
func TestPuntNeighbourLookalikesFromTheInternet(t *testing.T) {
	const lb6 = "2001:db8:100::10"
	r := newRig(t, testConfig)
	_, ns, _, _, _ := puntFrames(t)
	floods := map[string]func(i int) []byte{
		"ipv4 protocol 58 type 135": func(i int) []byte {
			return icmpFrame(t, fmt.Sprintf("198.51.%d.%d", 100+i/250, 1+i%250), lb4, layers.IPProtocolICMPv6, 135, 0, 255)
		},
		"ipv6 ns hop limit 64": func(i int) []byte {
			return icmpFrame(t, fmt.Sprintf("2001:db8:c::%x", i+1), lb6, layers.IPProtocolICMPv6, 135, 0, 64)
		},
		"ipv6 na hop limit 254": func(i int) []byte {
			return icmpFrame(t, fmt.Sprintf("2001:db8:c::%x", i+1), lb6, layers.IPProtocolICMPv6, 136, 0, 254)
		},
		"ipv6 ns code 1": func(i int) []byte {
			return icmpFrame(t, fmt.Sprintf("fe80::%x", i+1), lb6, layers.IPProtocolICMPv6, 135, 1, 255)
		},
		// From the link, but nothing a host acts on: Linux drops a
		// router solicitation unless it forwards, and needs no other
		// host's listener report.
		"router solicitation from the link": func(i int) []byte {
			return icmpFrame(t, fmt.Sprintf("fe80::%x", i+1), "ff02::2", layers.IPProtocolICMPv6, 133, 0, 255)
		},
		"listener reports from the link": func(i int) []byte {
			return icmpFrame(t, fmt.Sprintf("fe80::%x", i+1), "ff02::16", layers.IPProtocolICMPv6, 143, 0, 1)
		},
	}
	for name, f := range floods {
		for b := 0; b < 20; b++ {
			fs := make([][]byte, 32)
			for i := range fs {
				fs[i] = f(b*32 + i)
			}
			r.runAt(fs...)
		}
		if got := r.w.c.PuntLimited[punt.Neighbour]; got != 0 {
			t.Errorf("%s: 640 packets spent the neighbour budget (%d limited)", name, got)
		}
	}
	if v := r.runAt(ns(1)); v[0] != Punt {
		t.Errorf("a real neighbour solicitation after the floods: verdict %v, want punt", v[0])
	}
	if r.w.c.PuntLimited[punt.Other] == 0 {
		t.Errorf("the floods were not limited as other: %v", r.w.c.PuntLimited)
	}
	wantBalance(t, r)
}

// The clock is milliseconds since the engine started, in 32 bits: a
// class idle on an lcore for 2^31 ms (24.8 days; e.g. the bgp class on
// every lcore but the session's, until the session reconnects and RSS
// puts it on another) must refill again at its rate, not see the clock
// as gone back and refill nothing for another 24.8 days.
func TestPuntBudgetAfterLongIdle(t *testing.T) {
	r := newRig(t, testConfig)
	_, _, _, _, other := puntFrames(t)
	rate := punt.Default.Other
	for b := 0; b < 4; b++ { // spend the burst
		fs := make([][]byte, 32)
		for i := range fs {
			fs[i] = other(b*32 + i)
		}
		r.runAt(fs...)
	}
	for _, idle := range []conntrack.Time{1 << 31, 1<<31 + 12345, 1<<32 - 1000} {
		r.now += idle
		got := 0
		for ms := 0; ms < 1000; ms++ { // two packets a millisecond for a second
			r.now++
			got += count(r.runAt(other(2*ms), other(2*ms+1)), Punt)
		}
		if got < rate-punt.Burst(rate) || got > rate+punt.Burst(rate) {
			t.Errorf("idle %d ms, then a second at 2000 a second: punted %d, want about %d", idle, got, rate)
		}
	}
	wantBalance(t, r)
}

// The budgets at their limits: rate 1 (the smallest burst, then one a
// second), MaxRate (a tenth of a second's burst: no overflow), a reload
// lowering the rate mid-flood (the next refill caps the budget at the new
// burst), and no snapshot yet (the default budgets).
func TestPuntBudgetLimits(t *testing.T) {
	r := newRig(t, testConfig)
	_, _, _, _, other := puntFrames(t)
	flood := func(n int) int {
		p := 0
		for b := 0; b < n; b++ {
			fs := make([][]byte, 32)
			for i := range fs {
				fs[i] = other((b*32 + i) % 5000)
			}
			p += count(r.runAt(fs...), Punt)
		}
		return p
	}
	r.shared.Services.Load().SetPunt(punt.Config{Other: 1}, nil)
	r.w.puntBudget[punt.Other] = fullBucket(punt.Burst(1))
	if got := flood(4); got != punt.MinBurst {
		t.Errorf("rate 1: punted %d at once, want %d", got, punt.MinBurst)
	}
	r.now += 2500
	if got := flood(1); got != 2 {
		t.Errorf("rate 1, 2.5 s later: punted %d, want 2", got)
	}
	r.shared.Services.Load().SetPunt(punt.Config{Other: punt.MaxRate}, nil)
	r.now += 1 << 30 // a long idle: the budget holds a burst, no more
	if got := flood(punt.Burst(punt.MaxRate)/32 + 10); got != punt.Burst(punt.MaxRate) {
		t.Errorf("rate %d: punted %d at once, want the burst %d", punt.MaxRate, got, punt.Burst(punt.MaxRate))
	}
	r.now += 100 // refill to the full burst
	if got := flood(1); got != 32 {
		t.Errorf("rate %d, 100 ms later: punted %d of 32", punt.MaxRate, got)
	}
	// A reload to rate 10 mid-flood: the budget is capped at the new
	// burst at the next millisecond.
	r.shared.Services.Load().SetPunt(punt.Config{Other: 10}, nil)
	r.now++
	if got := flood(10); got != punt.MinBurst {
		t.Errorf("after the reload to 10 a second: punted %d at once, want %d", got, punt.MinBurst)
	}
	wantBalance(t, r)
	var sum uint64
	for _, n := range r.w.c.PuntLimited {
		sum += n
	}
	if sum != r.w.c.Drops[DropPuntRateLimited] {
		t.Errorf("punt-limited by class %v sum %d, drops %d", r.w.c.PuntLimited, sum, r.w.c.Drops[DropPuntRateLimited])
	}

	// No snapshot: every packet for the kernel, within the defaults.
	r2 := newRig(t, testConfig)
	r2.shared.Services.Store(nil)
	r = r2
	if got := flood(20); got != punt.Burst(punt.Default.Other) {
		t.Errorf("no snapshot: punted %d of 640, want %d", got, punt.Burst(punt.Default.Other))
	}
	wantBalance(t, r)
}

// A multicast listener query from the link (link-local source, hop limit
// 1) is the neighbour class's: a flood of other traffic must not starve
// it, or a snooping switch stops sending the LB the solicitations for its
// address. The same query from a global source or with another hop
// limit, which the kernel drops, is other.
func TestPuntMLDFromTheLinkIsNeighbour(t *testing.T) {
	const lb6 = "2001:db8:100::10"
	r := newRig(t, testConfig)
	_, _, _, _, other := puntFrames(t)
	for b := 0; b < 20; b++ {
		fs := make([][]byte, 32)
		for i := range fs {
			fs[i] = other(b*32 + i)
		}
		r.runAt(fs...)
	}
	query := icmpFrame(t, "fe80::1", "ff02::1", layers.IPProtocolICMPv6, 130, 0, 1)
	report := icmpFrame(t, "fe80::2", "ff02::16", layers.IPProtocolICMPv6, 143, 0, 1)
	global := icmpFrame(t, "2001:db8:c::9", lb6, layers.IPProtocolICMPv6, 130, 0, 1)
	hop2 := icmpFrame(t, "fe80::1", "ff02::1", layers.IPProtocolICMPv6, 130, 0, 2)
	v := r.runAt(query, report, global, hop2)
	// Another host's report is other: a host needs none, and a link busy
	// with them must not spend the budget ARP needs.
	want := []Verdict{Punt, Drop, Drop, Drop}
	for i := range want {
		if v[i] != want[i] {
			t.Errorf("packet %d after a flood of other: verdict %v, want %v", i, v[i], want[i])
		}
	}
	if r.w.c.PuntLimited[punt.Neighbour] != 0 {
		t.Errorf("neighbour limited %d", r.w.c.PuntLimited[punt.Neighbour])
	}
	wantBalance(t, r)
}
