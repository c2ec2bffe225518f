package dataplane

import "testing"

// quicPortTo is a client port whose 5-tuples to both VIPs ("quic" and
// "plain") their tables give to name.
func quicPortTo(t *testing.T, r *rig, client, name string) uint16 {
	t.Helper()
	all := map[string]int{"qa": 1, "qb": 1, "qc": 1}
	for p := uint16(20000); p < 30000; p++ {
		if r.expectBackend("quic", all, client, quicVIP, p, 443, 17) == name && r.expectBackend("plain", all, client, plainVIP, p, 443, 17) == name {
			return p
		}
	}
	t.Fatalf("no port of %s to %s", client, name)
	return 0
}

// A client that opens a new connection from the same address and port
// (one UDP socket for all its connections, as a quic.Transport does) after
// its backend's checks failed under on_down "keep": a TCP SYN on a pin to
// a backend its checks call down starts the connection elsewhere
// (TestSYNDoesNotFollowAPinToAnUnhealthyBackend), since the backend may be
// dead. A QUIC VIP parses the header and sees the Initial, the QUIC
// SYN, but the Initial follows the dead backend's pin, and every
// retransmission of it refreshes that pin: the client cannot reconnect
// from that port until it is silent for the udp timeout.
func TestQUICInitialDoesNotFollowAPinToAnUnhealthyBackend(t *testing.T) {
	r := newRig(t, quicTestConfig)
	const client = "198.51.100.62"
	qb := backendAddr(r, "quic", "qb")
	port := quicPortTo(t, r, client, "qb")
	initial := []byte{0xc0, 0, 0, 0, 1, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0}
	if dst := r.sendTo(udpFrame(t, client, quicVIP, port, initial)); dst != qb {
		t.Fatalf("first connection: %v, want qb %v", dst, qb)
	}
	r.publish(Overrides{{"quic", "qb"}: {Weight: 0, Unhealthy: true}}) // down, on_down "keep"
	// A new connection: a fresh client-chosen DCID, from the same socket.
	// RFC 9000 14.1: a client's Initial datagram is at least 1200 octets.
	fresh := append([]byte{0xc0, 0, 0, 0, 1, 8, 9, 9, 9, 9, 9, 9, 9, 9, 0, 0}, make([]byte, 1184)...)
	for k := range 5 { // the Initial and its retransmissions
		r.now += 1000
		dst := r.sendTo(udpFrame(t, client, quicVIP, port, fresh))
		if dst == qb {
			t.Fatalf("new connection's Initial #%d went to qb, which its checks call down (on_down keep), want a serving backend", k)
		}
	}
}
