//go:build dpdk

package dpdk

import (
	"bytes"
	"testing"
	"time"
)

// TestMbufLengthOps checks Prepend/Adj/Append/Trim against
// rte_pktmbuf_prepend/adj/append/trim semantics, and that a refused
// change leaves the mbuf exactly as it was.
func TestMbufLengthOps(t *testing.T) {
	checkPoolDrained(t)
	orig := udpPacket(t, 7, 18) // 60 bytes
	fresh := testPool.Alloc()
	if fresh == nil {
		t.Fatal("pool empty")
	}
	room := fresh.Tailroom() + fresh.Headroom() // buf_len
	if fresh.Headroom() != Headroom || fresh.DataLen() != 0 || fresh.NbSegs() != 1 {
		t.Fatalf("fresh mbuf: headroom %d, data_len %d, %d segs; want %d, 0, 1",
			fresh.Headroom(), fresh.DataLen(), fresh.NbSegs(), Headroom)
	}
	fresh.Free()
	tail := room - Headroom - len(orig)

	for _, tc := range []struct {
		name     string
		op       func(*Mbuf) bool
		ok       bool
		headroom int
		data     []byte // expected Data() suffix/prefix, nil: unchanged
		dataLen  int
	}{
		{"prepend 24 (GRE over IPv4)", func(m *Mbuf) bool { return m.Prepend(24) }, true, Headroom - 24, nil, len(orig) + 24},
		{"prepend all headroom", func(m *Mbuf) bool { return m.Prepend(Headroom) }, true, 0, nil, len(orig) + Headroom},
		{"prepend past headroom", func(m *Mbuf) bool { return m.Prepend(Headroom + 1) }, false, Headroom, orig, len(orig)},
		{"prepend negative", func(m *Mbuf) bool { return m.Prepend(-1) }, false, Headroom, orig, len(orig)},
		{"adj ethernet", func(m *Mbuf) bool { return m.Adj(14) }, true, Headroom + 14, orig[14:], len(orig) - 14},
		{"adj everything", func(m *Mbuf) bool { return m.Adj(len(orig)) }, true, Headroom + len(orig), []byte{}, 0},
		{"adj past end", func(m *Mbuf) bool { return m.Adj(len(orig) + 1) }, false, Headroom, orig, len(orig)},
		{"trim 4", func(m *Mbuf) bool { return m.Trim(4) }, true, Headroom, orig[:len(orig)-4], len(orig) - 4},
		{"trim past start", func(m *Mbuf) bool { return m.Trim(len(orig) + 1) }, false, Headroom, orig, len(orig)},
		{"append all tailroom", func(m *Mbuf) bool { return m.Append(tail) }, true, Headroom, nil, len(orig) + tail},
		{"append past tailroom", func(m *Mbuf) bool { return m.Append(tail + 1) }, false, Headroom, orig, len(orig)},
		{"set data too long", func(m *Mbuf) bool { return m.SetData(make([]byte, room-Headroom+1)) }, false, Headroom, orig, len(orig)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := testPool.Alloc()
			if m == nil {
				t.Fatal("pool empty")
			}
			defer m.Free()
			if !m.SetData(orig) {
				t.Fatal("SetData failed")
			}
			if got := tc.op(m); got != tc.ok {
				t.Fatalf("returned %v, want %v", got, tc.ok)
			}
			if m.Headroom() != tc.headroom || m.DataLen() != tc.dataLen || m.PktLen() != tc.dataLen ||
				len(m.Data()) != tc.dataLen || m.Headroom()+m.DataLen()+m.Tailroom() != room {
				t.Errorf("headroom %d data_len %d pkt_len %d len(Data) %d tailroom %d; want headroom %d, length %d, room %d",
					m.Headroom(), m.DataLen(), m.PktLen(), len(m.Data()), m.Tailroom(), tc.headroom, tc.dataLen, room)
			}
			d := m.Data()
			switch {
			case tc.data != nil && !bytes.Equal(d, tc.data):
				t.Errorf("data %x, want %x", d, tc.data)
			case tc.data == nil && tc.dataLen > len(orig) && tc.headroom < Headroom &&
				!bytes.Equal(d[Headroom-tc.headroom:], orig):
				t.Errorf("original bytes moved after prepend: %x", d)
			case tc.data == nil && tc.headroom == Headroom && !bytes.Equal(d[:len(orig)], orig):
				t.Errorf("original bytes changed after append: %x", d[:len(orig)])
			}
		})
	}
}

// TestFastPathNoAllocs runs a burst round trip through a ring pair with
// per-packet reads and a headroom prepend/strip, and a TxBuffer flush:
// none of it may allocate.
func TestFastPathNoAllocs(t *testing.T) {
	checkPoolDrained(t)
	rp := newRingPair(t, 1)
	b := newBurst(t, DefaultBurst)
	pkts := make([][]byte, DefaultBurst)
	for i := range pkts {
		pkts[i] = udpPacket(t, uint16(i), 18)
	}
	fillBurst(t, b, pkts)
	defer b.FreeAll()
	tb, err := NewTxBuffer(rp.A, 0, DefaultBurst)
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Free()

	var sum int
	burst := func() {
		if n := TxBurst(rp.A, 0, b, b.Len()); n != b.Len() {
			t.Fatalf("sent %d of %d", n, b.Len())
		}
		RxBurst(rp.B, 0, b)
		for _, m := range b.Mbufs() {
			d := m.Data()
			sum += int(d[12])<<8 | int(d[13]) + m.NbSegs()
			if !m.Prepend(24) || !m.Adj(24) {
				t.Fatal("prepend/adj failed")
			}
		}
		// The same packets back through a TxBuffer, flushed and received
		// in one call.
		for _, m := range b.Mbufs() {
			tb.Add(m)
		}
		b.Reset()
		if n := tb.FlushRx(rp.B, 0, b); n != DefaultBurst || tb.Len() != 0 {
			t.Fatalf("FlushRx received %d, %d left waiting", n, tb.Len())
		}
	}
	if allocs := testing.AllocsPerRun(200, burst); allocs != 0 {
		t.Errorf("%v allocations per burst, want 0", allocs)
	}
	if b.Len() != DefaultBurst || tb.Dropped != 0 || sum == 0 {
		t.Errorf("burst lost packets: len %d, tx buffer dropped %d", b.Len(), tb.Dropped)
	}
}

// BenchmarkIOLoop is the bare rx -> tx loop of one lcore on net_null0
// (rx allocates mbufs from the pool, tx frees them), the ceiling the
// dataplane is measured against; compare with
// dpdk-testpmd --vdev net_null0 --vdev net_null1 --forward-mode=io.
// ns/op is per packet.
func BenchmarkIOLoop(b *testing.B) {
	for _, bc := range []struct {
		name  string
		touch bool
	}{{"bare", false}, {"read-ethertype", true}} {
		b.Run(bc.name, func(b *testing.B) {
			startPort(b, nullPort, PortConf{RxQueues: 1, TxQueues: 1})
			burst := newBurst(b, DefaultBurst)
			lcore := MainLcore()
			if w := WorkerLcores(); len(w) > 0 {
				lcore = w[0]
			}
			b.ReportAllocs()
			var elapsed time.Duration
			var pkts, sum int
			b.ResetTimer()
			err := RunOnLcore(lcore, func() error {
				start := time.Now()
				for pkts < b.N {
					n := RxBurst(nullPort, 0, burst)
					if bc.touch {
						for _, m := range burst.Mbufs() {
							d := m.Data()
							sum += int(d[12])<<8 | int(d[13])
						}
					}
					TxBurstFree(nullPort, 0, burst)
					pkts += n
				}
				elapsed = time.Since(start)
				return nil
			})
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(pkts)/elapsed.Seconds()/1e6, "Mpps")
			_ = sum
		})
	}
}
