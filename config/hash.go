package config

import (
	"errors"

	"github.com/fulcrumlb/fulcrum/flow"
)

// finishHash validates a VIP's hash setting (vip.hash, vip.hash_prefix,
// vip.hash_prefix6; package flow owns the modes, defaults and limits) and
// writes the defaults back, so the effective configuration shows the
// prefixes src-ip-prefix applies.
func (ck *checker) finishHash(at string, v *VIP) {
	f, err := flow.NewFields(v.Hash, v.HashPrefix, v.HashPrefix6)
	// Each problem at its key: both prefixes may be wrong at once.
	for _, e := range splitJoined(err) {
		switch {
		case e == nil:
		case errors.Is(e, flow.ErrPrefix4):
			ck.bad(at+".hash_prefix", "%v", e)
		case errors.Is(e, flow.ErrPrefix6):
			ck.bad(at+".hash_prefix6", "%v", e)
		default:
			ck.bad(at+".hash", "%v", e)
		}
	}
	if v.Hash != flow.FiveTuple && v.Scheduler.IsPicker() {
		// A load-based scheduler chooses by load at the SYN, not by the
		// hash: the setting would do nothing the operator asked for.
		ck.bad(at+".hash", "%q needs scheduler \"maglev\": scheduler %q chooses a new flow's backend by load, not by the flow hash", v.Hash.String(), v.Scheduler.String())
		return
	}
	if err != nil {
		return
	}
	if f.Mode == flow.SrcIPPrefix {
		p4, p6 := int(f.Prefix4), int(f.Prefix6)
		v.HashPrefix, v.HashPrefix6 = &p4, &p6
	}
}

// HashFields is the VIP's validated hash setting in package flow's terms
// (the 5-tuple before Parse has checked it, or if it is invalid).
func (v *VIP) HashFields() flow.Fields {
	f, err := flow.NewFields(v.Hash, v.HashPrefix, v.HashPrefix6)
	if err != nil {
		return flow.Fields{}
	}
	return f
}
