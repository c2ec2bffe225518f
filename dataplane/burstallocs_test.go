package dataplane

import "testing"

// allocsPerBurst is the allocations of one call of process over frames
// (testing.AllocsPerRun, 200 runs), each run on fresh copies of the frames
// with the usual headroom, as the engine hands bursts over.
func allocsPerBurst(frames [][]byte, process func(pkts []Pkt)) float64 {
	pkts := make([]Pkt, len(frames))
	bufs := make([][]byte, len(frames))
	for i, f := range frames {
		bufs[i] = make([]byte, headroom+len(f))
	}
	return testing.AllocsPerRun(200, func() {
		for i, f := range frames {
			copy(bufs[i][headroom:], f)
			pkts[i] = Pkt{Buf: bufs[i], Off: headroom, Len: len(f)}
		}
		process(pkts)
	})
}
