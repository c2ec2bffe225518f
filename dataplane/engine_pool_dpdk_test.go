//go:build dpdk

package dataplane

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/dpdk"
	"github.com/fulcrumlb/fulcrum/encap"
)

// TestEnginePoolTakenByQueuesRefused: the config accepts any
// mempool_size from 64, and NewEngine refuses a pool too small to fill
// the queues' descriptors (TestLimitsTapPoolStarved), but a pool the
// queues take entirely at setup (rx_desc = 4096 on a NIC and the
// exception tap, mempool_size = 8192) starts, reports ready, and can
// never receive a packet: every rx needs a fresh mbuf and none is left.
// Here the wire is net_pcap (it keeps one mbuf per frame of its file)
// and the tap keeps rx_desc: a pool of exactly that is refused, naming
// mempool_size (it started and received nothing, rx_nombuf 0).
func TestEnginePoolTakenByQueuesRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (tap)")
	}
	var frames [][]byte
	for i := 0; i < 64; i++ {
		frames = append(frames, frame(t, "198.51.100.10", "203.0.113.7", uint16(5000+i), 80, layers.IPProtocolTCP, "S", 0, true))
	}
	pcapFlood(t, "net_pcap_poolq", frames)
	const rxDesc = 256
	pool := rxDesc + len(frames) // the tap's rx queue and the pcap's frames
	cfg := probeConfig(t, "net_pcap_poolq", fmt.Sprintf("exception = true\nexception_iface = \"flpoolq\"\nmempool_size = %d\nrx_desc = %d\ntx_desc = 64", pool, rxDesc))
	ec, shared := probeEngineConfig(t, cfg)
	e, err := NewEngine(ec, shared, probeLog())
	if err != nil {
		if !strings.Contains(err.Error(), "mempool_size") {
			t.Errorf("refused, without naming mempool_size: %v", err)
		}
		return
	}
	defer e.Close()
	held := inUse(e)
	if err := e.Run(); err != nil {
		t.Fatal(err)
	}
	var c Counters
	var st dpdk.Stats
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		c = engineCounters(t, e)
		st, _ = e.PortStats()
		if c.RxPackets > 0 || st.RxNoMbuf > 1000 {
			break
		}
	}
	t.Logf("mempool_size %d, %d lent to the queues after setup; rx %d forwarded %d; wire rx_nombuf %d", pool, held, c.RxPackets, c.TxPackets, st.RxNoMbuf)
	if c.RxPackets == 0 {
		t.Errorf("NewEngine accepted a pool of %d mbufs whose queues hold %d at setup: it started and received nothing (rx_nombuf %d)", pool, held, st.RxNoMbuf)
	}
}

// TestEnginePoolExhaustedRecovers: the egress ring (4096) is larger than the
// pool (1023) and nobody drains it, so every mbuf ends up in the ring and
// the wire's rx runs dry; once the peer drains the ring, forwarding
// resumes, and after stop and a final drain the pool is whole.
func TestEnginePoolExhaustedRecovers(t *testing.T) {
	var frames [][]byte
	for i := 0; i < 64; i++ {
		frames = append(frames, frame(t, "198.51.100.10", "203.0.113.7", uint16(6000+i), 80, layers.IPProtocolTCP, "S", 0, true))
	}
	pcapFlood(t, "net_pcap_poolx", frames)
	r := ringPeer(t, "poolxA", "poolxB", 4096)
	defer func() {
		drainPort(r.B)
		dpdk.StopPort(r.B)
		r.Free()
	}()
	cfg := probeConfig(t, "net_pcap_poolx", "exception = false\nmempool_size = 1023\ntx_port = \"net_ring_poolxA\"")
	e, base := probeEngine(t, cfg)
	defer e.Close()
	if err := e.Run(); err != nil {
		t.Fatal(err)
	}
	var c1 Counters
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		c1 = engineCounters(t, e)
		if e.pools[0].Avail() == 0 && c1.TxPackets > 900 {
			break
		}
	}
	got := drainPort(r.B)
	var c2 Counters
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		got += drainPort(r.B)
		if c2 = engineCounters(t, e); c2.TxPackets > c1.TxPackets+5000 {
			break
		}
	}
	stopWithin(t, e, time.Second)
	got += drainPort(r.B)
	c := stoppedCounters(e)
	t.Logf("exhausted: tx %d tx-full %d avail %d; after draining: tx %d; total drained %d, final tx %d tx-full %d", c1.TxPackets, c1.TxFull, e.pools[0].Avail(), c2.TxPackets, got, c.TxPackets, c.TxFull)
	if c2.TxPackets <= c1.TxPackets+5000 {
		t.Errorf("forwarding did not resume after the ring was drained: tx %d -> %d", c1.TxPackets, c2.TxPackets)
	}
	if uint64(got) != c.TxPackets || c.TxPackets+c.TxFull != c.Encap[encap.Forward] {
		t.Errorf("drained %d, tx %d tx-full %d forwarded %d", got, c.TxPackets, c.TxFull, c.Encap[encap.Forward])
	}
	poolWhole(t, e, base, "exhaustion and recovery")
}
