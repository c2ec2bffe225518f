package dataplane

import (
	"net/netip"
	"testing"

	"github.com/google/gopacket/layers"
)

// TestClosingPrevChoiceUnhealthy: be3 died; every instance's checks
// eject it (on_down "keep", the default: Unhealthy, weight 0, not Down),
// so for the whole window the previous table names the dead be3 where the
// current one names X. A connection placed on X after the ejection is
// live on X. A blind attacker's forged FIN (the 5-tuple is enough), then
// the connection's own next data: the data reopens the entry, and it must
// stay on X (a forged close never breaks a connection). A client's
// half-closed download (its real FIN, then its ACKs of the server's data)
// must reach X too. Neither may be sent to a backend the checks call down.
func TestClosingPrevChoiceUnhealthy(t *testing.T) {
	const client = closingPrevClient
	c := newClosingPrevRig(t, Effective{Weight: 0, Unhealthy: true})
	r, ports, x := c.rig, c.ports, c.x
	none := netip.Addr{}
	send := func(p uint16, what, flags string, data int) {
		t.Helper()
		out, v := r.run(frame(t, client, chanceVIP, p, 80, layers.IPProtocolTCP, flags, data, true))
		if v[0] != Tx {
			t.Fatalf("port %d %s: verdict %v", p, what, v[0])
		}
		if d, ch := tunnelChance(t, out[0]); d != beAddr(x[p]) || ch != none {
			t.Errorf("port %d %s: to %v chance %v, want to %v (the connection's backend) chance none", p, what, d, ch, beAddr(x[p]))
		}
	}
	forged, halfClosed := ports[0], ports[1]
	for _, p := range ports {
		send(p, "SYN", "S", 0)
		send(p, "ACK", "A", 0)
		send(p, "data", "AP", 20)
	}
	send(forged, "a forged FIN", "FA", 0)
	send(forged, "the connection's data after the forged FIN", "AP", 30)
	send(forged, "the connection's next data", "AP", 30)
	send(halfClosed, "the client's FIN (half-close)", "FA", 0)
	for k := 0; k < 3; k++ {
		send(halfClosed, "the client's ACK of the download", "A", 0)
	}
}
