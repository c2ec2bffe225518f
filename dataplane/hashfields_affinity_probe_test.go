package dataplane

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/packet"
	"github.com/fulcrumlb/fulcrum/sched"
)

// Probes of the per-VIP hash fields (README "Hash fields (source
// affinity)"): reloads that change the setting under established flows,
// fleet agreement after different histories, ICMP errors and fragments,
// spoofed sources, and what one burst of 32 does.

const (
	afVIP4  = "203.0.113.7"
	afVIP6  = "2001:db8:ffff::7"
	afSYN   = packet.TCPSyn
	afACK   = packet.TCPAck
	afPSH   = packet.TCPPsh | packet.TCPAck
	afFIN   = packet.TCPFin | packet.TCPAck
	afPorts = 3
)

// afConfig: "web" (afVIP4:80, GUE, be1..be5 with be5 over IPv6) and
// "web6" (afVIP6:443, GUE, s1..s4, one over IPv4), both under scheduler k
// and the hash lines hash ("" is the 5-tuple default).
func afConfig(k sched.Kind, hash string) string {
	keys := []string{`encap = "gue"`, fmt.Sprintf("scheduler = %q", k)}
	if hash != "" {
		keys = append(keys, strings.Split(hash, "\n")...)
	}
	return configtest.New().
		Dataplane(`lb_ipv6 = "2001:db8:100::10"`, `next_hop_mac = "02:00:00:00:00:fe"`, "mtu = 1500").
		Section("conntrack", "capacity = 65536").
		Web(4, keys...).
		Backend("be5", "2001:db8:1::5").
		VIP("web6", afVIP6, 443, keys...).
		Backend("s1", "2001:db8:1::11").Backend("s2", "2001:db8:1::12").
		Backend("s3", "10.0.5.3").Backend("s4", "2001:db8:1::14").
		String()
}

// afFlow is one TCP connection of a client to web (IPv4) or web6.
type afFlow struct {
	src   string
	sport uint16
}

func (f afFlow) v6() bool { return strings.Contains(f.src, ":") }

func (f afFlow) seg(flags uint8, data int) []byte {
	if f.v6() {
		return raw6(f.src, afVIP6, 6, tcpSeg(f.sport, 443, flags, data))
	}
	return raw4(f.src, afVIP4, 6, f.sport, 0x4000, tcpSeg(f.sport, 80, flags, data))
}

// tuple is the flow's 5-tuple as the dataplane keys it.
func (f afFlow) tuple() flow.Tuple {
	dst, dport := afVIP4, uint16(80)
	if f.v6() {
		dst, dport = afVIP6, 443
	}
	t, _ := flow.TupleFrom(netip.MustParseAddr(f.src), netip.MustParseAddr(dst), f.sport, dport, 6)
	return t
}

// afClients: n4 IPv4 clients (each in its own /24) and n6 IPv6 clients
// (each in its own /48), ports source ports each, the ports starting at base.
func afClients(n4, n6, ports int, base uint16) (fs []afFlow, srcs []string) {
	for c := 0; c < n4+n6; c++ {
		src := fmt.Sprintf("198.51.%d.%d", 100+c, 10+c)
		if c >= n4 {
			src = fmt.Sprintf("2001:db8:%x:%x::%x", 0xa000+c, c, c+1)
		}
		srcs = append(srcs, src)
		for p := 0; p < ports; p++ {
			fs = append(fs, afFlow{src, base + uint16(c*64+p)})
		}
	}
	return fs, srcs
}

// afRun runs frames in bursts of at most MaxBurst and returns copies of
// the output frames and the verdicts.
func afRun(r *rig, frames [][]byte) ([][]byte, []Verdict) {
	var outs [][]byte
	var vs []Verdict
	for len(frames) > 0 {
		n := min(len(frames), MaxBurst)
		o, v := r.run(frames[:n]...)
		for i := range o {
			outs = append(outs, append([]byte(nil), o[i]...))
		}
		vs = append(vs, v...)
		frames = frames[n:]
	}
	return outs, vs
}

func afEach(fs []afFlow, f func(afFlow) []byte) [][]byte {
	out := make([][]byte, len(fs))
	for i, x := range fs {
		out[i] = f(x)
	}
	return out
}

// afDsts is the tunnel destination of each output (invalid: not
// tunnelled).
func afDsts(t *testing.T, outs [][]byte, vs []Verdict) []netip.Addr {
	t.Helper()
	d := make([]netip.Addr, len(outs))
	for i := range outs {
		d[i] = tunnelDst(t, outs[i], vs[i])
	}
	return d
}

// afReload replaces r's configuration by toml, as a reload does.
func afReload(t *testing.T, r *rig, toml string) {
	t.Helper()
	cfg, err := config.Parse([]byte(toml), "reload.toml")
	if err != nil {
		t.Fatal(err)
	}
	r.cfg = cfg
	r.publish(nil)
}

// afFresh is where a fresh instance of toml, which never saw any of
// the flows, sends each flow's SYN: its output frames and destinations.
func afFresh(t *testing.T, toml string, fs []afFlow) ([][]byte, []netip.Addr) {
	t.Helper()
	ref := newRig(t, toml)
	o, v := afRun(ref, afEach(fs, func(f afFlow) []byte { return f.seg(afSYN, 0) }))
	d := afDsts(t, o, v)
	for i := range d {
		if !d[i].IsValid() {
			t.Fatalf("fresh instance: SYN of %v not forwarded (%v)", fs[i], v[i])
		}
	}
	return o, d
}

// A reload that changes a VIP's hash fields (and, since only Maglev may
// hash on fewer fields, its scheduler) while connections are established:
// under every scheduler and on both paths, every established connection
// keeps its backend and its tunnel's bytes (the entropy of its first
// packet), through several changes back and forth; a SYN on a live tuple
// keeps its backend; a SYN on a tuple whose FIN was seen is a new
// connection and gets, byte for byte, what a fresh instance gives it under
// the setting in force.
func TestAffinityReloadHashKeepsEstablished(t *testing.T) {
	srcIP := afConfig(sched.Maglev, `hash = "src-ip"`)
	prefix := afConfig(sched.Maglev, "hash = \"src-ip-prefix\"\nhash_prefix = 16\nhash_prefix6 = 56")
	for _, k := range sched.Kinds() {
		t.Run(k.String(), func(t *testing.T) {
			plain := afConfig(k, "")
			bothPaths(t, plain, func(t *testing.T, r *rig) {
				// E0: established under the 5-tuple and scheduler k.
				e0, _ := afClients(6, 4, afPorts, 20000)
				e1, srcs1 := afClients(6, 4, afPorts, 30000)
				afRun(r, afEach(e0, func(f afFlow) []byte { return f.seg(afSYN, 0) }))
				afRun(r, afEach(e0, func(f afFlow) []byte { return f.seg(afACK, 0) }))
				want0, v := afRun(r, afEach(e0, func(f afFlow) []byte { return f.seg(afPSH, 100) }))
				d0 := afDsts(t, want0, v)
				for i := range d0 {
					if !d0[i].IsValid() {
						t.Fatalf("E0 flow %v: verdict %v", e0[i], v[i])
					}
				}
				keep := func(step string, fs []afFlow, want [][]byte) {
					t.Helper()
					got, _ := afRun(r, afEach(fs, func(f afFlow) []byte { return f.seg(afPSH, 100) }))
					moved := 0
					for i := range got {
						if !bytes.Equal(got[i], want[i]) {
							if moved == 0 {
								t.Errorf("%s: flow %v: output changed\n got %x\nwant %x", step, fs[i], got[i], want[i])
							}
							moved++
						}
					}
					if moved > 0 {
						t.Errorf("%s: %d of %d established flows changed their tunnel output", step, moved, len(fs))
					}
				}

				// P1: src-ip.
				afReload(t, r, srcIP)
				keep("after reload to src-ip", e0, want0)
				// The probe has teeth: under src-ip a fresh instance would
				// put some of E0 elsewhere.
				if _, fresh := afFresh(t, srcIP, e0); lpMoved(d0, fresh) == 0 {
					t.Errorf("src-ip places every E0 flow where %v did: the reload changes nothing to keep", k)
				}
				// ICMP errors about E0 flows follow their pins, not the
				// new hash.
				var errs [][]byte
				for _, f := range e0 {
					if f.v6() {
						q := raw6(afVIP6, f.src, 6, tcpSeg(443, f.sport, afACK, 1300))[14:]
						errs = append(errs, raw6("2001:db8:99::1", afVIP6, 58, icmpMsg(2, 0, 1280, q[:1200])))
					} else {
						q := raw4(afVIP4, f.src, 6, 1, 0x4000, tcpSeg(80, f.sport, afACK, 0))[14:]
						errs = append(errs, raw4("192.0.2.99", afVIP4, 1, 9, 0, icmpMsg(3, 4, 1400, q)))
					}
				}
				eo, ev := afRun(r, errs)
				for i, d := range afDsts(t, eo, ev) {
					if d != d0[i] {
						t.Errorf("ICMP error about %v after the reload went to %v, its flow is on %v", e0[i], d, d0[i])
					}
				}
				afRun(r, afEach(e1, func(f afFlow) []byte { return f.seg(afSYN, 0) }))
				afRun(r, afEach(e1, func(f afFlow) []byte { return f.seg(afACK, 0) }))
				want1, v1 := afRun(r, afEach(e1, func(f afFlow) []byte { return f.seg(afPSH, 100) }))
				d1 := afDsts(t, want1, v1)
				_, ref1 := afFresh(t, srcIP, e1)
				for i := range d1 {
					if d1[i] != ref1[i] {
						t.Errorf("src-ip: new flow %v went to %v, a fresh instance sends it to %v", e1[i], d1[i], ref1[i])
					}
					if i%afPorts != 0 && d1[i] != d1[i-i%afPorts] {
						t.Errorf("src-ip: client %s's connections on %v and %v", e1[i].src, d1[i-i%afPorts], d1[i])
					}
				}
				_ = srcs1

				// SYNs on live E0 tuples (a retransmission or a forged
				// SYN): kept, on the old backend.
				kept := r.w.c.SYNKept
				o, v := afRun(r, afEach(e0, func(f afFlow) []byte { return f.seg(afSYN, 0) }))
				for i, d := range afDsts(t, o, v) {
					if d != d0[i] {
						t.Errorf("SYN on live tuple %v went to %v, its connection is on %v", e0[i], d, d0[i])
					}
				}
				if got := r.w.c.SYNKept - kept; got != uint64(len(e0)) {
					t.Errorf("SYNKept rose by %d, want %d", got, len(e0))
				}
				keep("after SYNs on live tuples", e0, want0)

				// P2: back to scheduler k and the 5-tuple, then to
				// src-ip-prefix: nothing established moves.
				afReload(t, r, plain)
				keep("E0 after reload back to "+k.String(), e0, want0)
				keep("E1 after reload back to "+k.String(), e1, want1)
				afReload(t, r, prefix)
				keep("E0 after reload to src-ip-prefix", e0, want0)
				keep("E1 after reload to src-ip-prefix", e1, want1)

				// Close the first connection of each client (FIN), then
				// reuse its tuple: a new connection, which must be
				// placed, byte for byte, as a fresh instance of the
				// configuration in force places it, and whose next
				// segment follows.
				var closed []afFlow
				for i := 0; i < len(e0); i += afPorts {
					closed = append(closed, e0[i], e1[i])
				}
				afRun(r, afEach(closed, func(f afFlow) []byte { return f.seg(afFIN, 0) }))
				got, gv := afRun(r, afEach(closed, func(f afFlow) []byte { return f.seg(afSYN, 0) }))
				wantSYN, _ := afFresh(t, prefix, closed)
				for i := range got {
					if !bytes.Equal(got[i], wantSYN[i]) {
						t.Errorf("SYN on closed tuple %v: went to %v, a fresh instance sends it to %v (bytes differ: %v)",
							closed[i], tunnelDst(t, got[i], gv[i]), tunnelDst(t, wantSYN[i], Tx), !bytes.Equal(got[i], wantSYN[i]))
					}
				}
				ref := newRig(t, prefix)
				ref.w.generalOnly = r.w.generalOnly
				afRun(ref, afEach(closed, func(f afFlow) []byte { return f.seg(afSYN, 0) }))
				wantACK, _ := afRun(ref, afEach(closed, func(f afFlow) []byte { return f.seg(afPSH, 10) }))
				gotACK, _ := afRun(r, afEach(closed, func(f afFlow) []byte { return f.seg(afPSH, 10) }))
				for i := range gotACK {
					if !bytes.Equal(gotACK[i], wantACK[i]) {
						t.Errorf("data after the reused tuple's SYN %v: output differs from a fresh instance's\n got %x\nwant %x", closed[i], gotACK[i], wantACK[i])
					}
				}
				// The re-chosen entries hold the new setting's hash.
				h := flow.NewHasher(r.key)
				fields := r.shared.Services.Load().LookupVIP(netip.MustParseAddr(afVIP4), 80, 6).Hash
				fields6 := r.shared.Services.Load().LookupVIP(netip.MustParseAddr(afVIP6), 443, 6).Hash
				for _, f := range closed {
					tu := f.tuple()
					e := r.w.ct.Lookup(r.w.local.Hash(&tu), &tu, r.now)
					if e == nil {
						t.Errorf("%v: no entry after its new connection", f)
						continue
					}
					fl := fields
					if f.v6() {
						fl = fields6
					}
					if e.FlowHash() != h.HashFields(&tu, fl) {
						t.Errorf("%v: stored hash %x, want the %v hash %x", f, e.FlowHash(), fl, h.HashFields(&tu, fl))
					}
				}
			})
		})
	}
}

// One burst of 32 under src-ip and src-ip-prefix, both paths, both
// families: SYNs and their ACKs of 16 connections of one client,
// interleaved or SYNs first; all 32 packets reach the backend a fresh
// instance gives the client, 16 entries are made, all established, each
// with the setting's hash; and 32 SYNs of 32 clients of one /24 (IPv4) or
// /56 (IPv6) under src-ip-prefix share one backend.
func TestAffinityOneBurst(t *testing.T) {
	for _, hash := range []string{`hash = "src-ip"`, "hash = \"src-ip-prefix\"\nhash_prefix6 = 56"} {
		cfg := afConfig(sched.Maglev, hash)
		for _, src := range []string{"198.51.100.77", "2001:db8:77:1::9"} {
			for _, order := range []string{"interleaved", "syns-first"} {
				name := fmt.Sprintf("%s/%s/%s", strings.Split(strings.Split(hash, "\n")[0], `"`)[1], src, order)
				t.Run(name, func(t *testing.T) {
					var fs []afFlow
					for p := 0; p < 16; p++ {
						fs = append(fs, afFlow{src, uint16(41000 + 97*p)})
					}
					var frames [][]byte
					if order == "interleaved" {
						for _, f := range fs {
							frames = append(frames, f.seg(afSYN, 0), f.seg(afACK, 0))
						}
					} else {
						frames = append(afEach(fs, func(f afFlow) []byte { return f.seg(afSYN, 0) }),
							afEach(fs, func(f afFlow) []byte { return f.seg(afACK, 0) })...)
					}
					_, ref := afFresh(t, cfg, fs[:1])
					bothPaths(t, cfg, func(t *testing.T, r *rig) {
						o, v := r.run(frames...)
						for i := range o {
							if d := tunnelDst(t, o[i], v[i]); d != ref[0] {
								t.Errorf("packet %d of the burst went to %v (verdict %v), want the client's backend %v", i, d, v[i], ref[0])
							}
						}
						if n := r.w.ct.Len(); n != 16 {
							t.Errorf("%d conntrack entries after 16 connections, want 16", n)
						}
						h := flow.NewHasher(r.key)
						tu := fs[0].tuple()
						want := h.HashFields(&tu, r.shared.Services.Load().LookupVIP(netip.AddrFrom16(tu.Dst).Unmap(), tu.DstPort, 6).Hash)
						est := 0
						r.w.ct.ForEach(func(e *conntrack.Entry) {
							if e.State() == conntrack.StateEstablished {
								est++
							}
							if e.FlowHash() != want {
								t.Errorf("entry hash %x, want %x", e.FlowHash(), want)
							}
						})
						if est != 16 {
							t.Errorf("%d entries established after SYN and ACK, want 16", est)
						}
						var nf uint64
						for _, bc := range r.w.c.Backends {
							nf += bc.NewFlows
						}
						if nf != 16 {
							t.Errorf("%d new flows counted, want 16", nf)
						}
					})
				})
			}
		}
	}
	// 32 clients of one prefix in one burst.
	cfg := afConfig(sched.Maglev, "hash = \"src-ip-prefix\"\nhash_prefix6 = 56")
	for _, fam := range []string{"v4", "v6"} {
		var fs []afFlow
		for c := 0; c < MaxBurst; c++ {
			src := fmt.Sprintf("198.51.100.%d", 1+c*7%250)
			if fam == "v6" {
				src = fmt.Sprintf("2001:db8:77:%x::%x", c, c*1001+1) // one /56: 2001:db8:77:00xx::
			}
			fs = append(fs, afFlow{src, uint16(50000 + c)})
		}
		t.Run("prefix-burst-"+fam, func(t *testing.T) {
			bothPaths(t, cfg, func(t *testing.T, r *rig) {
				o, v := r.run(afEach(fs, func(f afFlow) []byte { return f.seg(afSYN, 0) })...)
				ds := afDsts(t, o, v)
				for i := range ds {
					if !ds[i].IsValid() || ds[i] != ds[0] {
						t.Errorf("client %s of the prefix went to %v, the first to %v", fs[i].src, ds[i], ds[0])
					}
				}
			})
		})
	}
}

// ICMP errors (frag-needed, packet-too-big) quoting the backend's reply
// to a client, and the client's fragments (first and later), for a
// 3-tuple, src-ip and src-ip-prefix VIP, both families, both paths: on the
// instance that tracks the flow and on one that never saw it, each reaches
// the flow's backend.
func TestAffinityICMPAndFragmentsFollow(t *testing.T) {
	for _, hash := range []string{`hash = "3-tuple"`, `hash = "src-ip"`, "hash = \"src-ip-prefix\"\nhash_prefix = 20\nhash_prefix6 = 60"} {
		cfg := afConfig(sched.Maglev, hash)
		t.Run(strings.Split(strings.Split(hash, "\n")[0], `"`)[1], func(t *testing.T) {
			fs, _ := afClients(12, 12, 2, 33000)
			bothPaths(t, cfg, func(t *testing.T, a *rig) {
				b := newRig(t, cfg)
				b.w.generalOnly = a.w.generalOnly
				afRun(a, afEach(fs, func(f afFlow) []byte { return f.seg(afSYN, 0) }))
				o, v := afRun(a, afEach(fs, func(f afFlow) []byte { return f.seg(afACK, 0) }))
				owner := afDsts(t, o, v)
				for i, f := range fs {
					var msgs [][]byte
					var names []string
					if f.v6() {
						quote := raw6(afVIP6, f.src, 6, tcpSeg(443, f.sport, afACK, 1300))[14:]
						msgs = append(msgs,
							raw6("2001:db8:99::1", afVIP6, 58, icmpMsg(2, 0, 1280, quote[:1200])),
							raw6(f.src, afVIP6, 44, cat(frag6(6, 0, true, uint32(i)), tcpSeg(f.sport, 443, afPSH, 64))),
							raw6(f.src, afVIP6, 44, cat(frag6(6, 72, false, uint32(i)), make([]byte, 40))))
						names = append(names, "packet too big", "first fragment", "later fragment")
					} else {
						quote := raw4(afVIP4, f.src, 6, 1, 0x4000, tcpSeg(80, f.sport, afACK, 0))[14:]
						msgs = append(msgs,
							raw4("192.0.2.99", afVIP4, 1, 9, 0, icmpMsg(3, 4, 1400, quote)),
							raw4(f.src, afVIP4, 6, uint16(i), 0x2000, tcpSeg(f.sport, 80, afPSH, 64)),
							raw4(f.src, afVIP4, 6, uint16(i), 9, make([]byte, 40)))
						names = append(names, "frag-needed", "first fragment", "later fragment")
					}
					for _, r := range []*rig{a, b} {
						o, v := r.run(msgs...)
						for j := range o {
							if d := tunnelDst(t, o[j], v[j]); d != owner[i] {
								who := "tracking"
								if r == b {
									who = "other"
								}
								t.Errorf("%s instance: %s of %v went to %v (verdict %v, drops %v), its flow is on %v", who, names[j], f, d, v[j], r.w.c.Drops, owner[i])
							}
						}
					}
				}
				if n := b.w.ct.Len(); n != 0 {
					t.Errorf("ICMP errors and fragments made %d entries on the other instance", n)
				}
			})
		})
	}
}

// Two instances with the same final configuration and backend state,
// one fresh, one with a history: reloads turning the hash from src-ip to
// the 5-tuple, src-ip-prefix, 3-tuple and back, backends flapping down and
// up, drains, traffic all along (entries of every setting, some closed).
// Every new flow and every reused closed tuple of an IPv4 or IPv6 client
// must get the same tunnel bytes on both, on both paths.
func TestAffinityFleetHistory(t *testing.T) {
	final := afConfig(sched.Maglev, `hash = "src-ip"`)
	history := []struct {
		toml string
		over Overrides
	}{
		{afConfig(sched.Maglev, ""), nil},
		{final, Overrides{{"web", "be2"}: {Down: true}, {"web6", "s1"}: {Down: true}}},
		{afConfig(sched.Maglev, "hash = \"src-ip-prefix\"\nhash_prefix = 8\nhash_prefix6 = 8"), nil},
		{afConfig(sched.RoundRobin, ""), Overrides{{"web", "be1"}: {Down: true}}},
		{afConfig(sched.Maglev, `hash = "3-tuple"`), Overrides{{"web", "be3"}: {Weight: 0}, {"web6", "s4"}: {Weight: 3}}},
		{final, Overrides{{"web", "be4"}: {Down: true}}},
		{final, nil},
	}
	for _, fused := range []bool{true, false} {
		t.Run(fmt.Sprintf("fused=%v", fused), func(t *testing.T) {
			b := newRig(t, history[0].toml)
			b.w.generalOnly = !fused
			var closed []afFlow
			for step, h := range history {
				cfg, err := config.Parse([]byte(h.toml), "h.toml")
				if err != nil {
					t.Fatal(err)
				}
				b.cfg = cfg
				b.publish(h.over)
				fs, _ := afClients(10, 10, 2, uint16(1000+step*3000))
				afRun(b, afEach(fs, func(f afFlow) []byte { return f.seg(afSYN, 0) }))
				afRun(b, afEach(fs, func(f afFlow) []byte { return f.seg(afACK, 0) }))
				for i := 0; i < len(fs); i += 2 {
					closed = append(closed, fs[i])
				}
				var fins [][]byte
				for i := 0; i < len(fs); i += 2 {
					fins = append(fins, fs[i].seg(afFIN, 0))
				}
				afRun(b, fins)
			}
			a := newRig(t, final)
			a.w.generalOnly = !fused
			fresh, _ := afClients(30, 30, 4, 60000)
			probe := append(append([]afFlow(nil), fresh...), closed...)
			oa, va := afRun(a, afEach(probe, func(f afFlow) []byte { return f.seg(afSYN, 0) }))
			ob, vb := afRun(b, afEach(probe, func(f afFlow) []byte { return f.seg(afSYN, 0) }))
			differ := map[string]int{}
			for i := range probe {
				if va[i] != Tx || !bytes.Equal(oa[i], ob[i]) {
					kind := "new"
					if i >= len(fresh) {
						kind = "reused"
					}
					if probe[i].v6() {
						kind += "-v6"
					}
					if differ[kind] == 0 {
						t.Errorf("%s flow %v: fresh instance -> %v (%v), instance with history -> %v (%v)", kind, probe[i], tunnelDst(t, oa[i], va[i]), va[i], tunnelDst(t, ob[i], vb[i]), vb[i])
					}
					differ[kind]++
				}
			}
			for k, n := range differ {
				t.Errorf("%s flows: %d differ between the instances", k, n)
			}
		})
	}
}

// Spoofed sources against src-ip / src-ip-prefix VIPs. What the design
// allows: an attacker's forged sources land wherever their own hash puts
// them (under src-ip-prefix, every source of one prefix on one backend: a
// NAT pool is one backend's load, README). What it must not allow: moving
// another client's affinity: the client's established connections and
// its new connections keep their backend whatever a flood of forged
// packets from its own address, its prefix, or its own tuples does
// (conntrack is per 5-tuple; the affinity is a pure function of the
// source and the table).
func TestAffinitySpoofDoesNotMoveOthers(t *testing.T) {
	for _, hash := range []string{`hash = "src-ip"`, "hash = \"src-ip-prefix\"\nhash_prefix6 = 56"} {
		cfg := afConfig(sched.Maglev, hash)
		t.Run(strings.Split(strings.Split(hash, "\n")[0], `"`)[1], func(t *testing.T) {
			bothPaths(t, cfg, func(t *testing.T, r *rig) {
				victims, _ := afClients(4, 4, 4, 10000)
				afRun(r, afEach(victims, func(f afFlow) []byte { return f.seg(afSYN, 0) }))
				afRun(r, afEach(victims, func(f afFlow) []byte { return f.seg(afACK, 0) }))
				want, v := afRun(r, afEach(victims, func(f afFlow) []byte { return f.seg(afPSH, 50) }))
				home := afDsts(t, want, v)
				// The flood: from each victim's own address and from its
				// prefix, every port but its own, SYNs, ACKs, RSTs, FINs;
				// then forged SYN, FIN and RST on the victims' live tuples.
				var flood [][]byte
				for _, f := range victims {
					for p := 0; p < 40; p++ {
						g := afFlow{f.src, uint16(20000 + p)}
						flood = append(flood, g.seg(afSYN, 0), g.seg(afACK, 0), g.seg(packet.TCPRst, 0), g.seg(afFIN, 0))
						// A neighbour in the victim's /24 or /56.
						a := netip.MustParseAddr(f.src).AsSlice()
						a[len(a)-1] = byte(200 + p%50)
						if f.v6() {
							a[7], a[8] = byte(p), byte(p*3)
						}
						nb, _ := netip.AddrFromSlice(a)
						n := nb.String()
						flood = append(flood, afFlow{n, uint16(30000 + p)}.seg(afSYN, 0))
					}
					flood = append(flood, f.seg(afSYN, 0), f.seg(afSYN, 0), f.seg(packet.TCPRst|packet.TCPAck, 0))
				}
				fo, fv := afRun(r, flood)
				for i := range fo {
					if fv[i] == Tx && !tunnelDst(t, fo[i], fv[i]).IsValid() {
						t.Errorf("flood packet %d answered by the LB", i)
					}
				}
				// The victims' next data (which shows the RST forged).
				got, gv := afRun(r, afEach(victims, func(f afFlow) []byte { return f.seg(afPSH, 50) }))
				for i := range got {
					if !bytes.Equal(got[i], want[i]) {
						t.Errorf("victim %v: after the flood its data went to %v, before to %v", victims[i], tunnelDst(t, got[i], gv[i]), home[i])
					}
				}
				// The victims' new connections still meet on their backend.
				fresh := make([]afFlow, len(victims))
				for i, f := range victims {
					fresh[i] = afFlow{f.src, f.sport + 5000}
				}
				o, nv := afRun(r, afEach(fresh, func(f afFlow) []byte { return f.seg(afSYN, 0) }))
				for i, d := range afDsts(t, o, nv) {
					if d != home[i] {
						t.Errorf("victim %s's new connection went to %v, its others are on %v", fresh[i].src, d, home[i])
					}
				}
			})
		})
	}
}

// Where can a source-spoofing attacker put load? Under src-ip each
// forged address is one client: 4096 forged sources spread over the
// backends by their weights as 4096 clients do (no backend above twice its
// share), and every forged port of one address lands on one backend.
func TestAffinitySpoofedSourcesSpread(t *testing.T) {
	cfg := afConfig(sched.Maglev, `hash = "src-ip"`)
	r := newRig(t, cfg)
	r.w.generalOnly = false
	count := map[netip.Addr]int{}
	var frames [][]byte
	for i := 0; i < 4096; i++ {
		src := fmt.Sprintf("100.%d.%d.%d", 64+i%64, (i/64)%256, 1+i%250)
		frames = append(frames, afFlow{src, uint16(1024 + i)}.seg(afSYN, 0))
	}
	o, v := afRun(r, frames)
	for i, d := range afDsts(t, o, v) {
		if !d.IsValid() {
			t.Fatalf("SYN %d: %v", i, v[i])
		}
		count[d]++
	}
	if len(count) != 5 {
		t.Errorf("4096 sources reached %d backends, want 5: %v", len(count), count)
	}
	for d, n := range count {
		if n > 2*4096/5 {
			t.Errorf("backend %v got %d of 4096 sources", d, n)
		}
	}
	// One address, 300 ports: one backend.
	frames = frames[:0]
	for p := 0; p < 300; p++ {
		frames = append(frames, afFlow{"100.99.1.1", uint16(2000 + p)}.seg(afSYN, 0))
	}
	o, v = afRun(r, frames)
	ds := afDsts(t, o, v)
	for i := range ds {
		if ds[i] != ds[0] {
			t.Fatalf("port %d of one source went to %v, port 0 to %v", i, ds[i], ds[0])
		}
	}
}

// "src-ip: a client's connections to every src-ip VIP with the same
// backends" (README) meet on one backend; package flow: "tables depend
// only on the backends' names and weights". Three src-ip VIPs (another
// address, another port of the same address, other tunnel kinds) listing
// the same weighted backends in other orders: every client's connections
// to the three meet on one backend.
func TestAffinityAcrossVIPs(t *testing.T) {
	cfg := configtest.New().
		Dataplane(`lb_ipv6 = "2001:db8:100::10"`, `next_hop_mac = "02:00:00:00:00:fe"`, "mtu = 1500").
		Section("conntrack", "capacity = 65536").
		Web(4, `hash = "src-ip"`).
		Backend("be5", "2001:db8:1::5", "weight = 3").
		VIP("api", "203.0.113.9", 8443, `hash = "src-ip"`, `encap = "gue"`).
		Backend("be5", "2001:db8:1::5", "weight = 3").
		Backend("be3", "10.0.1.3").Backend("be1", "10.0.1.1").Backend("be4", "10.0.1.4").Backend("be2", "10.0.1.2").
		VIP("alt", configtest.Web, 8080, `hash = "src-ip"`, `encap = "ipip"`).
		Backend("be2", "10.0.1.2").Backend("be4", "10.0.1.4").Backend("be5", "2001:db8:1::5", "weight = 3").
		Backend("be1", "10.0.1.1").Backend("be3", "10.0.1.3").
		String()
	bothPaths(t, cfg, func(t *testing.T, r *rig) {
		split := 0
		for c := 0; c < 200; c++ {
			src := fmt.Sprintf("198.51.%d.%d", 100+c/100, 1+c%100)
			o, v := r.run(
				raw4(src, configtest.Web, 6, 1, 0x4000, tcpSeg(uint16(1000+c), 80, afSYN, 0)),
				raw4(src, "203.0.113.9", 6, 1, 0x4000, tcpSeg(uint16(2000+c), 8443, afSYN, 0)),
				raw4(src, configtest.Web, 6, 1, 0x4000, tcpSeg(uint16(3000+c), 8080, afSYN, 0)))
			d := afDsts(t, o, v)
			if !d[0].IsValid() || d[0] != d[1] || d[0] != d[2] {
				if split == 0 {
					t.Errorf("client %s: web -> %v, api -> %v, alt -> %v", src, d[0], d[1], d[2])
				}
				split++
			}
		}
		if split > 0 {
			t.Errorf("%d of 200 clients split over src-ip VIPs with the same backends", split)
		}
	})
}

// Fragments of a src-ip VIP's flows when another VIP with a lower port
// shares its address and protocol: by the fragment policy (README "How a
// packet goes through", step 5) they go to the lowest-port VIP and are
// hashed under its setting and table, not the src-ip VIP's: this probe
// records that (the hash-fields section's "Fragments of a src-ip VIP's
// flows hash exactly as the flows do" holds only for the VIP fragments go
// to). Counted, not failed.
func TestAffinityFragmentsOfNonLowestPortVIP(t *testing.T) {
	cfg := configtest.New().
		Dataplane(`lb_ipv6 = "2001:db8:100::10"`, `next_hop_mac = "02:00:00:00:00:fe"`, "mtu = 1500").
		Web(3). // port 80, 5-tuple, be1..be3
		VIP("tls", configtest.Web, 443, `hash = "src-ip"`).
		Backend("t1", "10.0.7.1").Backend("t2", "10.0.7.2").Backend("t3", "10.0.7.3").
		String()
	r := newRig(t, cfg)
	tls := map[netip.Addr]bool{}
	for _, n := range []string{"t1", "t2", "t3"} {
		tls[backendAddr(r, "tls", n)] = true
	}
	lost := 0
	for c := 0; c < 64; c++ {
		src := fmt.Sprintf("198.51.100.%d", 1+c)
		o, v := r.run(
			raw4(src, configtest.Web, 6, 1, 0x4000, tcpSeg(uint16(5000+c), 443, afSYN, 0)),
			raw4(src, configtest.Web, 6, uint16(c), 9, make([]byte, 40)))
		d := afDsts(t, o, v)
		if !tls[d[0]] {
			t.Fatalf("SYN to tls went to %v", d[0])
		}
		if d[1] != d[0] {
			lost++
		}
	}
	t.Logf("fragments of the src-ip VIP on port 443 that missed their flow's backend: %d of 64 (the port-80 VIP takes them)", lost)
	if lost != 64 {
		t.Errorf("%d of 64 fragments missed their flow's backend; the documented policy sends all 64 to the port-80 VIP's backends", lost)
	}
}
