//go:build dpdk

package dataplane

import "github.com/fulcrumlb/fulcrum/dpdk"

// steerFromKernel sends a burst the kernel wrote into the exception tap
// to the wire, through ProcessFromKernel: health checks through the
// tunnel leave encapsulated to their backend, every other packet as it
// came, and the check packets ProcessFromKernel refused are freed. The
// mbufs are read and rewritten in Go: no cgo call but the free of refused
// checks (rare). pkts has room for the burst; drops is empty.
func steerFromKernel(w *Worker, rx *dpdk.Burst, pkts []Pkt, tx *dpdk.TxBuffer, drops *dpdk.Burst) {
	mbs := rx.Mbufs()
	k := 0
	for _, mb := range mbs {
		if mb.NbSegs() != 1 {
			// A frame in several segments is not a check (checks are
			// small): it goes out as it came, its Pkt an empty frame
			// that ProcessFromKernel passes through.
			pkts[k] = Pkt{}
		} else {
			p := &pkts[k]
			p.Buf = mb.Buffer()
			p.Off = mb.Headroom()
			p.Len = mb.DataLen()
		}
		k++
	}
	w.ProcessFromKernel(pkts[:k])
	dropped := false
	for j, mb := range mbs {
		switch {
		case w.Verdicts[j] != Tx:
			drops.Add(mb)
			dropped = true
		case pkts[j].Buf == nil || pkts[j].Off == mb.Headroom() && pkts[j].Len == mb.DataLen():
			tx.Add(mb) // unchanged
		case mb.SetFrame(pkts[j].Off, pkts[j].Len):
			tx.Add(mb)
		default:
			w.c.Drops[DropBadBuffer]++
			drops.Add(mb)
			dropped = true
		}
	}
	if dropped {
		drops.FreeAll() // now: an idle wire would not free them this turn
	}
}
