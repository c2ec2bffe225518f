package control

import (
	"fmt"

	"github.com/fulcrumlb/fulcrum/dataplane"
)

// CaptureQuery is what a capture keeps: frames of a VIP and of one of its
// backends (names; empty: any), received and sent ones, or drops (of one
// reason, if DropReason is set) only.
type CaptureQuery struct {
	VIP, Backend string
	DropsOnly    bool
	DropReason   string
}

// StartCapture starts a capture on every worker (dataplane.StartCapture);
// the caller drains it and must Stop it. ErrBusy if one runs.
func (p *Plane) StartCapture(q CaptureQuery) (*dataplane.Capture, error) {
	f := dataplane.CaptureFilter{Rx: !q.DropsOnly, Tx: !q.DropsOnly, Drops: true, DropReason: q.DropReason}
	svc := p.shared.Services.Load()
	if q.VIP != "" {
		v := findVIPByName(svc, q.VIP)
		if v == nil {
			return nil, fmt.Errorf("vip %q: %w", q.VIP, ErrNotFound)
		}
		f.VIP, f.VIPPort, f.VIPProto = v.Addr, v.Port, v.Proto
		if q.Backend != "" {
			id, ok := findMember(svc, v, q.Backend)
			if !ok {
				return nil, fmt.Errorf("vip %q backend %q: %w", q.VIP, q.Backend, ErrNotFound)
			}
			f.Backend = svc.Backends[id].Addr
			// Traffic to a backend is forwarded traffic: no drops.
			f.Drops = false
		}
	}
	return dataplane.StartCapture(p.workers, f)
}
