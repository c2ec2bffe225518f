package dataplane

import (
	"strings"
	"testing"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/config/configtest"
)

// What the dataplane hands the kernel (the exception path) when a packet
// is not VIP traffic, as an attacker on the LAN sees it.

// Only what the kernel can take is punted: the LB's own addresses,
// broadcast, multicast and link-local destinations. A packet to any other
// unicast address would cost the forwarding core a write to the tap and
// the kernel's work to drop it (it forwards nothing from the tap): a
// flood to random addresses would starve the loop.
func TestPuntOnlyForTheHost(t *testing.T) {
	r := newRig(t, testConfig)
	cases := []struct {
		dst  string
		want Verdict
	}{
		{lb4, Punt},                // BGP, ssh, ping to the LB
		{"255.255.255.255", Punt},  // broadcast
		{"224.0.0.5", Punt},        // multicast
		{"169.254.1.1", Punt},      // link-local
		{"192.0.2.77", Drop},       // another host
		{"10.9.9.9", Drop},         // another network
		{"198.51.100.1", Drop},     // a client's
		{"2001:db8:100::10", Punt}, // the LB's IPv6 address
		{"ff02::1:ff00:10", Punt},  // ND's solicited-node multicast
		{"fe80::1", Punt},          // link-local
		{"2001:db8:77::1", Drop},   // another host
	}
	for _, tc := range cases {
		src := "198.51.100.7"
		if strings.Contains(tc.dst, ":") {
			src = "2001:db8:c::7"
		}
		drops := r.w.c.Drops[DropNotForHost]
		punted := r.w.c.Punted
		_, v := r.run(frame(t, src, tc.dst, 40000, 22, layers.IPProtocolTCP, "S", 0, true))
		if v[0] != tc.want {
			t.Errorf("to %s: verdict %v, want %v", tc.dst, v[0], tc.want)
		}
		if tc.want == Drop && (r.w.c.Drops[DropNotForHost] != drops+1 || r.w.c.Punted != punted) {
			t.Errorf("to %s: not-for-host +%d, punted +%d; want +1, +0", tc.dst, r.w.c.Drops[DropNotForHost]-drops, r.w.c.Punted-punted)
		}
	}
	wantBalance(t, r)
}

// A SYN to a health check's source port on the LB's address is dropped
// while checks run through the tunnel: the kernel would take it for a
// simultaneous open of the check's connection (its addresses and ports are
// predictable) and the backend's real SYN-ACK would then fail the check.
// The backend's SYN-ACK itself, and other traffic to the LB, still go to
// the kernel; without checks through the tunnel nothing is dropped.
func TestForgedSYNToHealthCheckPortDropped(t *testing.T) {
	r := newRig(t, tunnelConfig)
	port := r.healthPort("web", "be1")
	_, v := r.run(
		frame(t, configtest.Web, lb4, 80, port, layers.IPProtocolTCP, "S", 0, true),     // forged, from the VIP
		frame(t, "198.51.100.7", lb4, 80, port, layers.IPProtocolTCP, "S", 0, true),     // forged, from anyone
		frame(t, configtest.Web, lb4, 80, port, layers.IPProtocolTCP, "SA", 0, true),    // the backend's answer
		frame(t, "198.51.100.7", lb4, 40000, 179, layers.IPProtocolTCP, "S", 0, true),   // BGP
		frame(t, "198.51.100.7", lb4, 40000, 60999, layers.IPProtocolTCP, "S", 0, true), // below the range
	)
	want := []Verdict{Drop, Drop, Punt, Punt, Punt}
	for i := range want {
		if v[i] != want[i] {
			t.Errorf("packet %d: verdict %v, want %v", i, v[i], want[i])
		}
	}
	if got := r.w.c.Drops[DropHealthForgedSYN]; got != 2 {
		t.Errorf("health-check-forged-syn %d, want 2", got)
	}
	wantBalance(t, r)

	r2 := newRig(t, testConfig) // no checks through the tunnel
	if _, v := r2.run(frame(t, configtest.Web, lb4, 80, port, layers.IPProtocolTCP, "S", 0, true)); v[0] != Punt {
		t.Errorf("without checks through the tunnel: verdict %v, want punt", v[0])
	}
}
