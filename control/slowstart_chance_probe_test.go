package control

import (
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dataplane"
)

// TestChanceProbeSlowStartKeepsPreRampTable: docs/second-chance.md says a
// slow-start ramp's tables (rebuilt every second) do not replace the
// previous table: "the long-lived flows were placed by the table from
// before the ramp, which stays the previous table through it". With the
// README's own slow_start = "30s" (slow_start_min 10%), be4 undrained after
// an hour: the plane's effective weights, one snapshot a second on the
// plane's clock, as the control plane's once-a-second step builds them.
// The snapshots are built here with NewServicesAt at the same instants
// (the plane's BuildServices dates by the wall clock).
func TestChanceProbeSlowStartKeepsPreRampTable(t *testing.T) {
	cfg := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`, "second_chance = true").
		Section("conntrack", "capacity = 4096").
		Section("control", `slow_start = "30s"`, `drain_timeout = "0s"`).
		Web(4).
		String()
	f := newFixture(t, cfg)
	if err := f.plane.Drain("web", "be4"); err != nil {
		t.Fatal(err)
	}
	enc, nh := f.shared.Services.Load().Enc, f.shared.Services.Load().NextHop
	base := time.Unix(3_000_000, 0)
	var s *dataplane.Services
	build := func(at time.Duration) {
		t.Helper()
		f.plane.mu.Lock()
		over, _, _ := f.plane.effective(f.plane.now())
		f.plane.mu.Unlock()
		n, err := dataplane.NewServicesAt(s, enc, nh, VIPSpecs(f.plane.Config(), over), base.Add(at))
		if err != nil {
			t.Fatal(err)
		}
		s = n
	}
	build(0) // be1..be3: the table every long-lived flow was placed by
	pre := s.VIPs[0].Table
	preVIP := s.VIPs[0]
	f.advance(time.Hour)
	if err := f.plane.Undrain("web", "be4"); err != nil {
		t.Fatal(err)
	}
	var lost []string
	for el := time.Duration(0); el <= 32*time.Second; el += time.Second {
		build(time.Hour + el)
		p := s.VIPs[0].Prev
		if p == nil || p.Table != pre {
			since := "none"
			if p != nil {
				since = p.Since.Sub(base.Add(time.Hour)).String()
			}
			lost = append(lost, "ramp+"+el.String()+" (previous since ramp+"+since+")")
		}
		f.advance(time.Second)
	}
	// What it costs at the ramp's end: of the slots whose backend moved
	// (pre-ramp choice != current), those where the previous table no
	// longer names the pre-ramp choice: their moved flows get no second
	// chance (the previous table names the current choice) or a wrong one.
	v := s.VIPs[0]
	name := func(x *dataplane.VIP, tb interface{ Slot(int) int }, i int) string {
		return s.Backends[x.Backends[tb.Slot(i)]].Name
	}
	moved, none, wrong := 0, 0, 0
	for i := range v.Table.Size() {
		pn, cn := preVIP.Table.Backend(pre.Slot(i)).Key, name(v, v.Table, i)
		if pn == cn {
			continue
		}
		moved++
		if v.Prev == nil {
			none++
			continue
		}
		switch qn := v.Prev.Table.Backend(v.Prev.Table.Slot(i)).Key; qn {
		case pn:
		case cn:
			none++
		default:
			wrong++
		}
	}
	if len(lost) > 0 {
		t.Errorf("the pre-ramp table is not the previous table at %d of 33 ramp steps: first %v, last %v; at the ramp's end, of %d moved slots of %d, %d get no second chance and %d a wrong one",
			len(lost), lost[0], lost[len(lost)-1], moved, v.Table.Size(), none, wrong)
	}
}
