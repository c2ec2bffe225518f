package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/fulcrumlb/fulcrum/packet"
)

// finishQUIC fills and checks VIP i's QUIC settings (docs/quic.md): quic
// only on a UDP VIP, the connection-ID layout (package packet validates
// it), and each backend's quic_id: a server id the layout holds, unique
// within the VIP. The layout keys and quic_id without quic = true are
// refused rather than ignored, since the operator meant something by them.
func (ck *checker) finishQUIC(v *VIP, at string) {
	if !v.QUIC {
		for _, k := range []struct {
			key string
			set bool
		}{{"quic_cid_len", v.CIDLen != 0}, {"quic_server_id_len", v.ServerIDLen != 0}, {"quic_config_id", v.ConfigID != 0}} {
			// An explicit 0 is written too (the zero value is "unset").
			if k.set || ck.setAt(at+"."+k.key) {
				ck.bad(at+"."+k.key, "is set, but the VIP's quic is off: set quic = true or remove it")
			}
		}
		for j, b := range v.Backends {
			if b.QUICID != nil {
				ck.bad(fmt.Sprintf("%s.backend[%d].quic_id", at, j), "is set, but the VIP's quic is off: set quic = true on the VIP or remove it")
			}
		}
		return
	}
	if v.Protocol != "udp" {
		ck.bad(at+".quic", "QUIC runs over UDP: the VIP's protocol is %q (set protocol = \"udp\")", v.Protocol)
	}
	// An explicit 0 is not "unset": WithDefaults would replace it.
	for _, k := range []struct {
		key string
		n   int
		max int
	}{{"quic_cid_len", v.CIDLen, packet.MaxQUICCIDLen}, {"quic_server_id_len", v.ServerIDLen, packet.MaxQUICServerIDLen}} {
		if k.n == 0 && ck.setAt(at+"."+k.key) {
			ck.bad(at+"."+k.key, "0 is outside 1..%d", k.max)
			return
		}
	}
	v.QUICConfig = v.QUICConfig.WithDefaults()
	if err := v.QUICConfig.Validate(); err != nil {
		key := "quic_cid_len"
		switch {
		case errors.Is(err, packet.ErrQUICServerIDLen):
			key = "quic_server_id_len"
		case errors.Is(err, packet.ErrQUICConfigID):
			key = "quic_config_id"
		}
		// Package packet's errors start with the key ("quic_cid_len: 21
		// is outside ..."), which the problem names already.
		ck.bad(at+"."+key, "%s", strings.TrimPrefix(err.Error(), key+": "))
		return // the ids' range depends on the layout
	}
	maxID := v.QUICConfig.MaxServerID()
	ids := map[int64]int{} // quic_id -> backend index
	for j, b := range v.Backends {
		if b.QUICID == nil {
			continue
		}
		bat := fmt.Sprintf("%s.backend[%d].quic_id", at, j)
		id := *b.QUICID
		switch {
		case id < 0:
			ck.bad(bat, "%d is negative", id)
		case uint64(id) > maxID:
			ck.bad(bat, "%d does not fit quic_server_id_len = %d octets (at most %d)", id, v.ServerIDLen, maxID)
		default:
			if k, dup := ids[id]; dup {
				ck.bad(bat, "%d is already backend #%d's (line %d): each backend of a VIP needs its own", id, k+1, ck.line(fmt.Sprintf("%s.backend[%d].quic_id", at, k)))
			}
			ids[id] = j
		}
	}
}
