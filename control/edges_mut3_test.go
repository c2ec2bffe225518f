package control

// Edge cases of the status (control/status.go) from a mutation audit:
// each test holds a value an operator reads in the admin API, fulcrumctl
// or the metrics.

import (
	"net/netip"
	"testing"
	"time"

	"github.com/fulcrumlb/fulcrum/config/configtest"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/dataplane/dptest"
)

// statusHead is baseConfig without its VIP.
var statusHead = baseHead().String()

var (
	apiVIPSection = configtest.New().VIP("api", "203.0.113.9", 80).Backend("a1", "10.0.3.1").String()
	dbVIPSection  = configtest.New().VIP("db", "203.0.113.8", 80).Backend("d1", "10.0.4.1").String()
)

// A VIP removed by a reload leaves its counters on the workers under its
// id until that id counts again; a VIP a later reload adds on the same id
// (and its backend on a removed backend's id) must show none of them:
// before its first packet, Status shows zero packets, bytes and new flows
// for the new VIP and its backend, and after it exactly that packet. web
// (id 0) forwards 40 SYNs, some to each backend; a reload removes it; the next adds db, which
// takes id 0 (and d1 be1's backend id). Summing the id's counters without
// comparing its incarnation (Gen) showed web's 40 packets, new flows and
// bytes as db's (and be1's as d1's), in the admin API, fulcrumctl vips and the metrics.
func TestEdgeReusedVIPIDShowsNoneOfTheRemovedVIPsCounters(t *testing.T) {
	f := newFixture(t, baseConfig+apiVIPSection)
	web := f.vipByName("web")
	for i := 0; i < 40; i++ {
		if r := f.lc.send(syn(t, uint16(1000+i), "S")); r.verdict != dataplane.Tx {
			t.Fatalf("web's SYN %d not forwarded: verdict %d", i, r.verdict)
		}
	}
	var webPackets, webFlows uint64
	for _, v := range f.plane.Status(false).VIPs {
		if v.Name == "web" {
			webPackets, webFlows = v.Packets, v.NewFlows
		}
	}
	if webPackets != 40 || webFlows != 40 {
		t.Fatalf("web shows %d packets, %d new flows; want 40, 40", webPackets, webFlows)
	}
	webBackends := map[uint32]uint64{} // backend id: packets
	for _, v := range f.plane.Status(false).VIPs {
		for _, b := range v.Backends {
			if v.Name == "web" {
				webBackends[b.ID] = b.Packets
			}
		}
	}
	f.apply(statusHead + apiVIPSection)
	f.apply(statusHead + apiVIPSection + dbVIPSection)
	db := f.vipByName("db")
	if db.ID != web.ID {
		t.Fatalf("db took VIP id %d, not web's %d: the test needs the id reused", db.ID, web.ID)
	}
	d1 := db.Members[0]
	if webBackends[d1] == 0 {
		t.Fatalf("d1 took backend id %d, not one of web's that forwarded (%v)", d1, webBackends)
	}
	dbStatus := func() VIPStatus {
		t.Helper()
		for _, v := range f.plane.Status(true).VIPs {
			if v.Name == "db" {
				return v
			}
		}
		t.Fatal("no db in the status")
		return VIPStatus{}
	}
	// The worker takes the new snapshot at its next burst: a packet to
	// api (another VIP, another id) makes it see db without counting on
	// db's id.
	f.lc.send(dptest.TCP(t, 2000, netip.MustParseAddrPort("203.0.113.9:80"), "S"))
	v := dbStatus()
	if v.Packets != 0 || v.Bytes != 0 || v.NewFlows != 0 {
		t.Errorf("db before its first packet: %d packets, %d bytes, %d new flows; want 0 (the removed web's counters)", v.Packets, v.Bytes, v.NewFlows)
	}
	if b := v.Backends[0]; b.Packets != 0 || b.Bytes != 0 || b.NewFlows != 0 {
		t.Errorf("d1 before its first packet: %d packets, %d bytes, %d new flows; want 0 (a removed web backend's counters)", b.Packets, b.Bytes, b.NewFlows)
	}
	if r := f.lc.send(dptest.TCP(t, 2001, netip.MustParseAddrPort("203.0.113.8:80"), "S")); r.dst != netip.MustParseAddr("10.0.4.1") {
		t.Fatalf("db's SYN went to %v, want d1", r.dst)
	}
	v = dbStatus()
	if v.Packets != 1 || v.NewFlows != 1 || v.Bytes == 0 {
		t.Errorf("db after its first packet: %d packets, %d bytes, %d new flows; want 1, >0, 1", v.Packets, v.Bytes, v.NewFlows)
	}
	if b := v.Backends[0]; b.Packets != 1 || b.NewFlows != 1 || b.Bytes != v.Bytes {
		t.Errorf("d1 after its first packet: %d packets, %d bytes, %d new flows; want 1, %d, 1", b.Packets, b.Bytes, b.NewFlows, v.Bytes)
	}
}

// A VIP's Flows (the admin API's active_flows of GET /vips, fulcrumctl
// vips' FLOWS, the metrics' per-VIP active flows) is its tracked
// connections, counted when Status counts flows: 12 SYNs to web, each a
// connection, read 12, the sum of its backends' Flows (no second chance
// here), and one to api reads 1. The metrics exporter reads with one
// StatusBuf scrape after scrape: the VIP and backend sums live in memory
// of their own, so the second and third reads agree with the first (the
// VIP sum put in the backends' memory showed, from the second scrape on,
// web's flows as those of the backend with web's id).
func TestEdgeVIPFlowsAreItsTrackedConnections(t *testing.T) {
	f := newFixture(t, baseConfig+apiVIPSection)
	for i := 0; i < 12; i++ {
		f.lc.send(syn(t, uint16(3000+i), "S"))
	}
	f.lc.send(dptest.TCP(t, 4000, netip.MustParseAddrPort("203.0.113.9:80"), "S"))
	want := map[string]uint64{"web": 12, "api": 1}
	buf := &StatusBuf{}
	for read := 1; read <= 3; read++ {
		st := f.plane.StatusInto(true, buf)
		if len(st.FlowsMissing) != 0 {
			t.Fatalf("read %d: flow count incomplete: %v", read, st.FlowsMissing)
		}
		if len(st.VIPs) != len(want) {
			t.Fatalf("read %d: %d VIPs, want %d", read, len(st.VIPs), len(want))
		}
		for _, v := range st.VIPs {
			var sum uint64
			for _, b := range v.Backends {
				sum += b.Flows
			}
			if v.Flows != want[v.Name] || sum != want[v.Name] {
				t.Errorf("read %d: vip %s: Flows %d, its backends' %d; want %d tracked connections", read, v.Name, v.Flows, sum, want[v.Name])
			}
		}
	}
}

// What an operator's action answers (the admin API's drain, undrain and
// weight answers read the backend with BackendNow) is the backend as
// Status shows it: its table slots and share of the table. After a weight
// change to 3 of be1 (others 1), the answer's share is its slots over the
// table's size, as GET /vips/web/backends shows it; an answer with share 0
// told the operator the backend had left the table.
func TestEdgeActionAnswerSharesStatusView(t *testing.T) {
	f := newFixture(t, baseConfig)
	if err := f.plane.SetWeight("web", "be1", 3); err != nil {
		t.Fatal(err)
	}
	f.rebuild()
	now, err := f.plane.BackendNow("web", "be1")
	if err != nil {
		t.Fatal(err)
	}
	var size int
	var shown BackendStatus
	for _, v := range f.plane.Status(false).VIPs {
		if v.Name == "web" {
			size = v.TableSize
			for _, b := range v.Backends {
				if b.Name == "be1" {
					shown = b
				}
			}
		}
	}
	if size == 0 || shown.Slots == 0 {
		t.Fatalf("be1: %d slots of a table of %d", shown.Slots, size)
	}
	if want := float64(shown.Slots) / float64(size); shown.Share != want || now.Share != want || now.Slots != shown.Slots {
		t.Errorf("be1: BackendNow %d slots share %v, Status %d slots share %v; want %d slots share %v", now.Slots, now.Share, shown.Slots, shown.Share, shown.Slots, want)
	}
	if now.Weight != 3 || shown.Weight != 3 {
		t.Errorf("be1 weight: BackendNow %d, Status %d; want 3", now.Weight, shown.Weight)
	}
}

// SlowStart (fulcrumctl backends' SLOW START, the admin API's slow_start)
// is a backend ramping in the published table: taking new flows at a
// weight above 0 and below its own. A backend down with on_down keep (its
// tracked flows stay, so it is not Down) is out of the table at weight 0:
// not slow-starting. Back up for 2 s of a 10 s slow start it is; up a
// minute, at its full weight, it is not.
func TestEdgeDownBackendIsNotSlowStarting(t *testing.T) {
	f := newFixture(t, checkedConfig(""))
	f.allUp()
	f.advance(time.Minute)
	f.rebuild()
	f.setHealth("be1", false)
	if b := f.backend("be1"); b.Effective != 0 || b.Down || b.SlowStart {
		t.Errorf("be1 down (on_down keep): effective %d down %v slow_start %v; want 0, false, false", b.Effective, b.Down, b.SlowStart)
	}
	f.setHealth("be1", true)
	f.advance(2 * time.Second)
	f.rebuild()
	if b := f.backend("be1"); b.Effective == 0 || b.Effective >= WeightScale || !b.SlowStart {
		t.Errorf("be1 back up 2 s of a 10 s slow start: effective %d slow_start %v; want between 0 and %d, true", b.Effective, b.SlowStart, WeightScale)
	}
	f.advance(time.Minute)
	f.rebuild()
	if b := f.backend("be1"); b.Effective != WeightScale || b.SlowStart {
		t.Errorf("be1 up a minute: effective %d slow_start %v; want %d, false", b.Effective, b.SlowStart, WeightScale)
	}
}

// The table answer (GET /vips/web/table: the fleet compares its digest)
// names each backend of the table with its own address: be1..be4 at
// 10.0.1.1..4, so instances that bind a name to another address differ.
func TestEdgeTablePlacementNamesEachBackendsAddress(t *testing.T) {
	f := newFixture(t, baseConfig)
	keys, fields, addrs, err := f.plane.TablePlacement("web")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 || fields != "5-tuple" {
		t.Fatalf("%d slots, hash fields %q", len(keys), fields)
	}
	want := map[string]string{"be1": "10.0.1.1", "be2": "10.0.1.2", "be3": "10.0.1.3", "be4": "10.0.1.4"}
	if len(addrs) != len(want) {
		t.Errorf("addresses %v, want %v", addrs, want)
	}
	for name, a := range want {
		if addrs[name] != a {
			t.Errorf("%s at %q, want %s", name, addrs[name], a)
		}
	}
}

// Each backend's Slots in Status (fulcrumctl backends' SLOTS and SHARE) is
// how many slots of the published table name it, for every VIP: api's
// backends have ids 4..6 (web has 0..3), not their places in api's
// table, and their weights 1, 2 and 3 give them unequal counts.
func TestEdgeSlotsAreTheTablesCountForEveryVIP(t *testing.T) {
	f := newFixture(t, baseConfig+configtest.New().VIP("api", "203.0.113.9", 80).
		Backend("a1", "10.0.3.1", "weight = 1").
		Backend("a2", "10.0.3.2", "weight = 2").
		Backend("a3", "10.0.3.3", "weight = 3").String())
	for _, v := range f.plane.Status(false).VIPs {
		keys, _, _, err := f.plane.TablePlacement(v.Name)
		if err != nil {
			t.Fatal(err)
		}
		count := map[string]int{}
		for _, k := range keys {
			count[k]++
		}
		for _, b := range v.Backends {
			if b.Slots != count[b.Name] || b.Share != float64(count[b.Name])/float64(len(keys)) {
				t.Errorf("%s/%s (id %d): %d slots, share %v; the table names it in %d of %d", v.Name, b.Name, b.ID, b.Slots, b.Share, count[b.Name], len(keys))
			}
		}
	}
}
