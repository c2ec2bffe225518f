package dataplane

import (
	"bytes"
	"github.com/fulcrumlb/fulcrum/conntrack"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"testing"

	"github.com/google/gopacket/layers"
)

// TestCaptureVIPFilterKeepsICMPErrorsOfItsFlows: an ICMP error a router
// sends to the VIP about a backend's direct reply (frag-needed / packet
// too big quoting VIP:80 -> client) is VIP traffic: the dataplane sends it
// to the flow's backend. A capture of the VIP (control sets VIPPort and
// VIPProto from the VIP) must keep it, received and sent, as it keeps the
// VIP's non-first fragments; an error quoting another port of the address
// is not this VIP's.
func TestCaptureVIPFilterKeepsICMPErrorsOfItsFlows(t *testing.T) {
	r := newRig(t, testConfig)
	// v4: the flow, then the error about its SYN-ACK.
	syn := frame(t, "198.51.100.10", "203.0.113.7", 40000, 80, layers.IPProtocolTCP, "S", 0, true)
	if _, v := r.run(syn); v[0] != Tx {
		t.Fatalf("SYN verdict %v", v[0])
	}
	reply := ipPacket(frame(t, "203.0.113.7", "198.51.100.10", 80, 40000, layers.IPProtocolTCP, "SA", 0, true))
	err4 := raw4("192.0.2.99", "203.0.113.7", 1, 9, 0, icmpMsg(3, 4, 1400, reply[:28]))
	// v6: the same for the IPv6 VIP.
	syn6 := frame(t, "2001:db8:2::1", "2001:db8:ffff::7", 40001, 443, layers.IPProtocolTCP, "S", 0, true)
	if _, v := r.run(syn6); v[0] != Tx {
		t.Fatalf("SYN6 verdict %v", v[0])
	}
	reply6 := ipPacket(frame(t, "2001:db8:ffff::7", "2001:db8:2::1", 443, 40001, layers.IPProtocolTCP, "SA", 0, true))
	err6 := raw6("2001:db8:9::1", "2001:db8:ffff::7", 58, icmpMsg(2, 0, 1280, reply6[:48]))

	// An error quoting another port of the address is not the VIP's.
	other := ipPacket(frame(t, "203.0.113.7", "198.51.100.10", 81, 40000, layers.IPProtocolTCP, "SA", 0, true))
	cp, err := StartCapture([]*Worker{r.w}, CaptureFilter{Rx: true, Tx: true, Drops: true,
		VIP: netip.MustParseAddr("203.0.113.7"), VIPPort: 80, VIPProto: 6})
	if err != nil {
		t.Fatal(err)
	}
	r.run(raw4("192.0.2.99", "203.0.113.7", 1, 9, 0, icmpMsg(3, 4, 1400, other[:28])))
	if got := cp.Drain(nil); len(got) != 0 {
		t.Errorf("an ICMP error quoting port 81 in the capture of 203.0.113.7:80: %d frames", len(got))
	}
	cp.Stop()

	for _, tc := range []struct {
		name  string
		vip   string
		port  uint16
		frame []byte
	}{{"v4", "203.0.113.7", 80, err4}, {"v6", "2001:db8:ffff::7", 443, err6}} {
		cp, err := StartCapture([]*Worker{r.w}, CaptureFilter{Rx: true, Tx: true, Drops: true,
			VIP: netip.MustParseAddr(tc.vip), VIPPort: tc.port, VIPProto: 6})
		if err != nil {
			t.Fatal(err)
		}
		out, v := r.run(tc.frame)
		got := cp.Drain(nil)
		cp.Stop()
		if v[0] != Tx {
			t.Fatalf("%s: ICMP error verdict %v (the test needs it forwarded to the flow's backend)", tc.name, v[0])
		}
		if len(got) != 2 || !bytes.Equal(got[0].Data, tc.frame) || got[0].Kind != CaptureRx ||
			!bytes.Equal(got[1].Data, out[0]) || got[1].Kind != CaptureTx {
			t.Errorf("%s: capture of the VIP kept %d frames of the ICMP error about its flow, want 2 (rx, tx)", tc.name, len(got))
		}
	}
}

// TestCaptureMatchesVerdictsRandomBursts: over the differential probe's
// random bursts (every kind of traffic, snapshot changes between bursts),
// a capture of everything holds, for each packet, its frame as received,
// then what the worker did to it: its bytes as sent for Tx, punt for
// Punt, and for Drop the name of the counter the drop grew (the burst's
// drop reasons, as a multiset, are the counters' growth).
func TestCaptureMatchesVerdictsRandomBursts(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		tw := newBDTwin(t, 1<<10)
		rng := rand.New(rand.NewPCG(seed, 77))
		g := &bdGen{t: t, rng: rng}
		r := tw.fast
		cp, err := StartCapture([]*Worker{r.w}, CaptureFilter{Rx: true, Tx: true, Drops: true})
		if err != nil {
			t.Fatal(err)
		}
		bad := 0
		for step := 0; step < 300 && bad < 5; step++ {
			if rng.IntN(6) == 0 {
				tw.event(rng)
			}
			n := 1 + rng.IntN(MaxBurst)
			var frames [][]byte
			for len(frames) < n {
				frames = g.packet(frames)
			}
			frames = frames[:min(len(frames), MaxBurst)]
			r.now += conntrack.Time(rng.IntN(200))
			before := map[string]uint64{}
			ForEachDrop(r.w.Local(), func(name string, n uint64) { before[name] = n })
			r.now -= 10 // run adds 10
			out, v := r.run(frames...)
			grew := map[string]int{}
			ForEachDrop(r.w.Local(), func(name string, n uint64) {
				if n != before[name] {
					grew[name] = int(n - before[name])
				}
			})
			got := cp.Drain(nil)
			k := 0
			captured := map[string]int{}
			for i := range frames {
				if k >= len(got) || got[k].Kind != CaptureRx || !bytes.Equal(got[k].Data, frames[i]) {
					t.Errorf("seed %d step %d packet %d: no rx frame", seed, step, i)
					bad++
					break
				}
				k++
				if k >= len(got) {
					t.Errorf("seed %d step %d packet %d (%v): no frame after rx", seed, step, i, v[i])
					bad++
					break
				}
				g := got[k]
				k++
				switch v[i] {
				case Tx:
					if g.Kind != CaptureTx || !bytes.Equal(g.Data, out[i]) {
						t.Errorf("seed %d step %d packet %d: Tx verdict, captured %v (bytes equal %v)", seed, step, i, g.Kind, bytes.Equal(g.Data, out[i]))
						bad++
					}
				case Punt:
					if g.Kind != CapturePunt {
						t.Errorf("seed %d step %d packet %d: Punt verdict, captured %v", seed, step, i, g.Kind)
						bad++
					}
				default:
					if g.Kind != CaptureDrop {
						t.Errorf("seed %d step %d packet %d: Drop verdict, captured %v", seed, step, i, g.Kind)
						bad++
					}
					captured[g.Reason]++
				}
			}
			if k != len(got) {
				t.Errorf("seed %d step %d: %d frames captured, %d accounted", seed, step, len(got), k)
				bad++
			}
			if !reflect.DeepEqual(grew, captured) && !(len(grew) == 0 && len(captured) == 0) {
				t.Errorf("seed %d step %d: drop counters grew %v, captured drop reasons %v", seed, step, grew, captured)
				bad++
			}
		}
		cp.Stop()
		if cp.Missed() != 0 {
			t.Errorf("missed %d", cp.Missed())
		}
	}
}
