package dataplane

import (
	"testing"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/sched"
)

// fuzzTemplates are the frames FuzzFastPathMatchesGeneral edits: each
// path's entry points (handFrames, plus a SYN-ACK from a client, a second
// IPv4 flow, UDP, a frame too big with DF, traffic to no VIP).
func fuzzTemplates(t *testing.T) [][]byte {
	tcp, udp := layers.IPProtocolTCP, layers.IPProtocolUDP
	return append(handFrames(t),
		frame(t, "198.51.100.200", "203.0.113.7", 4000, 80, tcp, "SA", 0, true),
		frame(t, "198.51.100.201", "203.0.113.7", 4100, 80, tcp, "S", 0, true),
		frame(t, "198.51.100.201", "203.0.113.7", 4100, 80, tcp, "A", 0, true),
		frame(t, "198.51.100.202", "203.0.113.7", 5353, 53, udp, "", 30, true),
		frame(t, "192.0.2.98", "203.0.113.7", 4002, 80, tcp, "PA", 1480, true), // too big with DF: an ICMP reply
		frame(t, "198.51.100.203", "192.0.2.1", 4004, 80, tcp, "A", 0, true),   // no VIP
	)
}

// FuzzFastPathMatchesGeneral is TestFastPathMatchesGeneral with the
// bursts chosen by the fuzzer: hostile frames (any byte of a template
// changed, cut short or grown), several events inside one burst and
// between bursts (a backend down, a reload that changes the VIPs' hash
// fields, the clock past every timeout), under every scheduler. Both
// workers must produce the same frames, verdicts, counters and conntrack
// tables, and neither may panic.
//
// The input, byte by byte: the scheduler; then records of one frame each
// (template, edits, then 2 bytes an edit: offset and XOR value; a
// template byte of 0xF0 and above is an event instead: 0xF0 ends the
// burst, 0xF1 advances the clock by the next byte in seconds, 0xF2 puts
// backend be1 down, 0xF3 brings it back, 0xF4 cuts the last frame to the
// next byte's length, 0xF5 reloads to the hash setting the next byte
// chooses).
func FuzzFastPathMatchesGeneral(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 0, 2, 0, 0xF0, 1, 0, 1, 1, 40, 0x10})
	f.Add([]byte{1, 6, 0, 7, 0, 0xF0, 7, 0, 0xF2, 7, 0, 1, 0, 0xF1, 200, 1, 0})
	f.Add([]byte{2, 8, 0, 9, 0, 9, 1, 60, 0xff, 10, 0, 0xF4, 30, 14, 0, 15, 0})
	f.Add([]byte{3, 0, 0, 1, 0, 3, 0, 1, 0, 0xF2, 2, 0, 0xF3, 2, 0, 4, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 1, 0, 6, 0, 0xF5, 1, 0, 0, 1, 0, 6, 0, 5, 0, 0xF5, 3, 0, 0, 12, 0, 13, 0})
	// Every reload target must be a configuration the daemon accepts.
	for _, k := range sched.Kinds() {
		for i, c := range fuzzHashConfigs(k, fastConfig(k)) {
			if _, err := config.Parse([]byte(c), "reload.toml"); err != nil {
				f.Fatalf("%v, hash setting %d: %v", k, i, err)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 || len(data) > 1024 {
			return
		}
		kinds := sched.Kinds()
		k := kinds[int(data[0])%len(kinds)]
		cfg := fastConfig(k)
		configs := fuzzHashConfigs(k, cfg)
		tw := newTwin(t, cfg)
		var over Overrides
		tmpl := fuzzTemplates(t)
		var frames [][]byte
		publishes := 0
		flush := func() {
			if len(frames) > 0 {
				tw.burst("fuzz", frames)
				tw.same("fuzz")
				frames = frames[:0]
			}
		}
		next := func(i *int) (byte, bool) {
			if *i >= len(data) {
				return 0, false
			}
			b := data[*i]
			*i++
			return b, true
		}
		for i := 1; i < len(data); {
			b, _ := next(&i)
			switch {
			case b == 0xF0:
				flush()
				continue
			case b == 0xF1:
				s, _ := next(&i)
				d := conntrack.Time(s) * 1000
				tw.fast.now += d
				tw.slow.now += d
				continue
			case b == 0xF2 || b == 0xF3 || b == 0xF5:
				// A snapshot costs both workers their Maglev tables:
				// a few per input keep the fuzzer's rate.
				if publishes++; publishes > 4 {
					continue
				}
				// Between the bursts: the workers read the snapshot at
				// a burst's start, as the daemon's do.
				flush()
				switch b {
				case 0xF2:
					over = Overrides{{"web", "be1"}: {Weight: 0, Down: true}}
				case 0xF3:
					over = nil
				case 0xF5: // a reload to another hash setting
					n, _ := next(&i)
					c, err := config.Parse([]byte(configs[int(n)%len(configs)]), "reload.toml")
					if err != nil {
						t.Fatal(err)
					}
					tw.fast.cfg, tw.slow.cfg = c, c // read only: publish maps it to a snapshot
				}
				tw.fast.publish(over)
				tw.slow.publish(over)
				continue
			case b == 0xF4:
				n, _ := next(&i)
				if len(frames) > 0 && int(n) < len(frames[len(frames)-1]) {
					frames[len(frames)-1] = frames[len(frames)-1][:n]
				}
				continue
			case b > 0xF5:
				continue
			}
			fr := append([]byte(nil), tmpl[int(b)%len(tmpl)]...)
			edits, _ := next(&i)
			for e := 0; e < int(edits%8); e++ {
				off, ok1 := next(&i)
				x, ok2 := next(&i)
				if !ok1 || !ok2 {
					break
				}
				if int(off) < len(fr) {
					fr[off] ^= x
				} else {
					fr = append(fr, x) // grown: trailing bytes
				}
			}
			frames = append(frames, fr)
			if len(frames) == MaxBurst {
				flush()
			}
		}
		flush()
	})
}

// fuzzHashConfigs are the hash settings a reload (0xF5) may switch
// between: the 5-tuple everywhere, then
// TestFastPathMatchesGeneralUnderHashFields' settings. Under a load-based
// scheduler the web VIPs keep the 5-tuple (config refuses anything else
// there) and the UDP VIP, Maglev's, changes.
func fuzzHashConfigs(k sched.Kind, cfg string) []string {
	if k != sched.Maglev {
		return []string{cfg, withHash(cfg, "", "", `hash = "src-ip"`), withHash(cfg, "", "", `hash = "3-tuple"`)}
	}
	return []string{
		cfg,
		withHash(cfg, `hash = "3-tuple"`, `hash = "src-ip-prefix"`, `hash = "src-ip"`),
		withHash(cfg, "", `hash = "3-tuple"`, "hash = \"src-ip-prefix\"\nhash_prefix = 30"),
		withHash(cfg, `hash = "src-ip"`, "", ""),
	}
}
