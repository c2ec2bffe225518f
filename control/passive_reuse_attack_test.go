package control

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

// README "Passive health checks": "forged SYNs from random sources are
// spread by the keyed hash over every backend alike, so nobody stands out
// and nobody is ejected, at any rate"; only an attacker who knows
// dataplane.hash_key (or drops one backend's ACKs on the path) can single
// a backend out. But a SYN on a live connection (README: "keeps its
// backend", SYNKept) is counted as a handshake attempt (SYNs) while its
// entry keeps its established state (conntrack.Table.Keep), so its ACK can
// never count the handshake as completed. A blind spoofer needs no key:
// one forged SYN and one forged ACK make a live entry on one 5-tuple, and
// every further forged SYN on that same tuple lands, by the pin, on one
// backend as a failed handshake. Real traffic through a worker (80
// clients a second completing handshakes over 4 backends), plus one
// established forged tuple on which 60 forged SYNs a second are sent,
// folded once a second for 30 s: nobody may be ejected.
//
// The second case needs no live entry: a forged FIN on the tuple's new
// entry closes it, and the next forged SYN is "a new connection on a
// reused tuple", counted as tried on the tuple's one backend, where it
// never completes; FIN, SYN, FIN, SYN... 60 such pairs a second.
func TestPassiveEjectionBySYNsOnOneSpoofedTuple(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup string   // flags sent once on the tuple
		each  []string // flags sent 60 times a second, in order
	}{
		{"SYNs on a live entry", "A", []string{"S"}},
		{"FIN then SYN", "", []string{"F", "S"}},
	} {
		t.Run(tc.name, func(t *testing.T) { passiveOneTuple(t, tc.setup, tc.each) })
	}
}

func passiveOneTuple(t *testing.T, setup string, each []string) {
	f := newFixture(t, passiveConfig)
	w := newAFWorker(t, f)
	web := netip.MustParseAddr("203.0.113.7")
	forged := afConn{netip.MustParseAddr("100.64.7.9"), web, 4242, 80}
	w.run([][]byte{forged.seg(t, "S")})
	if setup != "" {
		w.run([][]byte{forged.seg(t, setup)}) // "A": the "handshake" completes, a live entry
	}
	var timeline []string
	for sec := 0; sec < 30; sec++ {
		var legit []afConn
		for c := 0; c < 80; c++ {
			legit = append(legit, afConn{netip.AddrFrom4([4]byte{198, 51, byte(c), byte(1 + sec)}), web, uint16(20000 + sec*100 + c), 80})
		}
		w.run(afSegs(t, legit, "S"))
		w.run(afSegs(t, legit, "A"))
		var flood [][]byte
		for i := 0; i < 60; i++ {
			for _, fl := range each {
				flood = append(flood, forged.seg(t, fl))
			}
		}
		w.run(flood)
		f.advance(time.Second)
		f.plane.mu.Lock()
		if f.plane.foldSignals([]dataplane.Counters{*w.w.Local()}, f.plane.now()) {
			if err := f.plane.rebuildLocked(); err != nil {
				f.plane.mu.Unlock()
				t.Fatal(err)
			}
		}
		f.plane.mu.Unlock()
		var ej []string
		for _, b := range f.plane.Status(false).VIPs[0].Backends {
			if b.Outlier {
				ej = append(ej, b.Name)
			}
		}
		timeline = append(timeline, strings.Join(ej, "+"))
	}
	if out, n := ejections(f); n != 0 {
		var reason string
		for _, b := range f.plane.Status(false).VIPs[0].Backends {
			if b.Outlier {
				reason = b.Name + ": " + b.Reason
			}
		}
		t.Errorf("SYNs forged on ONE 5-tuple (no hash key, 60 SYNs/s) caused %d ejection(s), %d outlier(s) now (%s); outliers by second %q", n, out, reason, timeline)
	}
}
