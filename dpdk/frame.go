//go:build dpdk

package dpdk

import "unsafe"

// Buffer is the mbuf's whole first-segment buffer (buf_len bytes,
// headroom included), a view with no copy. With Headroom and DataLen it
// describes the frame as the dataplane's Pkt does: Buffer()[Headroom():
// Headroom()+DataLen()].
func (m *Mbuf) Buffer() []byte {
	return unsafe.Slice((*byte)(m.bufAddr()), *m.u16(offBufLen))
}

// SetFrame makes the single-segment packet Buffer()[off:off+n], after the
// dataplane rewrote it in place (encapsulation moved its start into the
// headroom). It returns false, changing nothing, when the range does not
// fit the buffer or the packet has several segments.
func (m *Mbuf) SetFrame(off, n int) bool {
	if off < 0 || n < 0 || off+n > int(*m.u16(offBufLen)) || m.NbSegs() != 1 {
		return false
	}
	*m.u16(offDataOff) = uint16(off)
	*m.u16(offDataLen) = uint16(n)
	*m.u32(offPktLen) = uint32(n)
	return true
}
