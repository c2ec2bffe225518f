//go:build dpdk

package dataplane

// Probes of mbuf conservation and the I/O loop's counters: every
// mbuf the engine receives (from the wire or the kernel's tap) or is handed
// goes back to its pool or out of a port, and the counters say which.

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/dpdk"
	"github.com/fulcrumlb/fulcrum/encap"
)

// drainBytes empties port's rx queue 0 and returns the frames and bytes.
func drainBytes(port uint16) (n int, bytes uint64) {
	b, _ := dpdk.NewBurst(32)
	defer b.Free()
	for i := 0; i < 10000; i++ {
		k := dpdk.RxBurst(port, 0, b)
		if k == 0 {
			break
		}
		for _, m := range b.Mbufs() {
			bytes += uint64(m.PktLen())
		}
		n += k
		b.FreeAll()
	}
	return n, bytes
}

// TestTxBytesAreBytesSent: worker_tx_bytes_total is "Bytes transmitted by
// a worker" and pairs with worker_tx_packets_total (what the port took).
// With an egress ring of 64 that nobody reads under a forwarding flood,
// the port takes 64 frames and refuses the rest (tx_full): the bytes
// counted must be those 64 frames', not the refused ones' too.
func TestTxBytesAreBytesSent(t *testing.T) {
	var frames [][]byte
	for i := 0; i < 64; i++ {
		frames = append(frames, frame(t, "198.51.100.10", "203.0.113.7", uint16(2000+i), 80, layers.IPProtocolTCP, "S", 0, true))
	}
	pcapFlood(t, "net_pcap_mc1", frames)
	r := ringPeer(t, "txmcA", "txmcB", 64)
	defer func() {
		drainPort(r.B)
		dpdk.StopPort(r.B)
		r.Free()
	}()
	cfg := probeConfig(t, "net_pcap_mc1", "exception = false\nmempool_size = 1023\ntx_port = \"net_ring_txmcA\"")
	e, base := probeEngine(t, cfg)
	defer e.Close()
	c := runUntilRx(t, e, 5_000, 3*time.Second)
	n, bytes := drainBytes(r.B)
	t.Logf("rx %d forwarded %d tx %d tx-full %d tx-bytes %d; drained %d frames, %d bytes", c.RxPackets, c.Encap[encap.Forward], c.TxPackets, c.TxFull, c.TxBytes, n, bytes)
	if uint64(n) != c.TxPackets {
		t.Fatalf("drained %d, engine sent %d", n, c.TxPackets)
	}
	if c.TxFull == 0 {
		t.Fatal("the ring never refused a frame")
	}
	if c.TxBytes != bytes {
		t.Errorf("tx_bytes %d, but the port took %d frames of %d bytes in all (tx_packets %d, tx_full %d): the refused frames' bytes are counted as sent",
			c.TxBytes, n, bytes, c.TxPackets, c.TxFull)
	}
	poolWhole(t, e, base, "draining the ring")
}

// TestNoExceptionPathCountsAndCaptures: with exception = false, traffic
// for the host is dropped as no-exception-path (docs/drop-reasons.md), not
// punted. The worker decides a punt and the I/O loop turns it into that
// drop; what the operator sees must say no-exception-path for every such
// packet: not punt-rate-limited (and the punt class's rate-limited
// counter) once the other class's budget is spent, and not a "punt" in a
// capture of drops.
func TestNoExceptionPathCountsAndCaptures(t *testing.T) {
	l := newLab(t, labToml("exception = false"))
	cp, err := StartCapture(l.eng.Workers(), CaptureFilter{Tx: true, Drops: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	const n = 400 // the other class's burst is 100
	var frames [][]byte
	for i := 0; i < n; i++ {
		frames = append(frames, frame(t, fmt.Sprintf("198.51.100.%d", 1+i%200), lb4, uint16(3000+i), 9, layers.IPProtocolUDP, "", 0, true))
	}
	l.send(frames...)
	var c Counters
	for deadline := time.Now().Add(5 * time.Second); ; {
		if c = l.counters(); c.RxPackets >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	c = l.counters() // one more turn: the loop's own adjustments are in
	kinds := map[string]int{}
	for _, f := range cp.Drain(nil) {
		kinds[f.Kind.String()+"/"+f.Reason]++
	}
	t.Logf("rx %d punted %d no-exception-path %d punt-rate-limited %d (by class %v); captured %v", c.RxPackets, c.Punted,
		c.Drops[DropNoException], c.Drops[DropPuntRateLimited], c.PuntLimited, kinds)
	if c.RxPackets != n {
		t.Fatalf("received %d of %d", c.RxPackets, n)
	}
	if c.Drops[DropNoException] != n || c.Drops[DropPuntRateLimited] != 0 || c.Punted != 0 {
		t.Errorf("%d packets for the host without an exception path: no-exception-path %d, punt-rate-limited %d (class counters %v), punted %d",
			n, c.Drops[DropNoException], c.Drops[DropPuntRateLimited], c.PuntLimited, c.Punted)
	}
	if kinds["punt/"] != 0 || kinds["drop/no-exception-path"] != n {
		t.Errorf("capture of %d packets dropped as no-exception-path: %v", n, kinds)
	}
}

// TestNoExceptionPuntedNeverShown: with exception = false nothing is ever
// punted, so fulcrum_worker_punted_total must read 0 at every scrape. The
// worker counts a punt in Process and serves the snapshot there, before
// the I/O loop takes the punt back (no tap) and counts the drop: a scrape
// that lands between the two sees punts that never happened, and the
// next one sees the counter go down (Prometheus reads a counter reset).
func TestNoExceptionPuntedNeverShown(t *testing.T) {
	l := newLab(t, labToml("exception = false"))
	host := frame(t, "198.51.100.7", lb4, 3000, 9, layers.IPProtocolUDP, "", 0, true)
	w := l.eng.Workers()[0]
	var c Counters
	seen, maxPunted := 0, uint64(0)
	for i := 0; i < 300; i++ {
		l.send(host, host, host, host)
		if !w.Snapshot(&c, 5*time.Second) {
			t.Fatal("no snapshot")
		}
		if c.Punted != 0 {
			seen++
			maxPunted = max(maxPunted, c.Punted)
		}
	}
	t.Logf("%d of 300 snapshots showed punts (up to %d); final: rx %d punted %d no-exception-path %d", seen, maxPunted, c.RxPackets, c.Punted, c.Drops[DropNoException])
	if seen != 0 {
		t.Errorf("exception = false: %d of 300 snapshots counted punts (up to %d) that were then taken back", seen, maxPunted)
	}
}
