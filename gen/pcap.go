package gen

import (
	"bufio"
	"fmt"
	"io"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// PcapSnaplen is the file's snapshot length: every frame is whole.
const PcapSnaplen = 65535

// PcapEpoch is the timestamp of a file's first frame. Timestamps are
// synthetic so that the file is a function of the Config alone: frame i is
// stamped PcapEpoch + i µs. DPDK's net_pcap replays as fast as it can and
// ignores them.
var PcapEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// WritePcap writes a pcap file (LinkTypeEthernet, snaplen PcapSnaplen,
// microsecond timestamps) of the generator's next n frames to w. Counts
// tells what was written.
func (g *Generator) WritePcap(w io.Writer, n int) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	pw := pcapgo.NewWriter(bw)
	if err := pw.WriteFileHeader(PcapSnaplen, layers.LinkTypeEthernet); err != nil {
		return fmt.Errorf("write pcap header: %w", err)
	}
	buf := make([]byte, 0, g.MaxFrameLen())
	ci := gopacket.CaptureInfo{Timestamp: PcapEpoch}
	for i := range n {
		frame, _ := g.Next(buf)
		ci.CaptureLength, ci.Length = len(frame), len(frame)
		if err := pw.WritePacket(ci, frame); err != nil {
			return fmt.Errorf("write pcap frame %d: %w", i, err)
		}
		ci.Timestamp = ci.Timestamp.Add(time.Microsecond)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write pcap: %w", err)
	}
	return nil
}
