package flow

import (
	"net/netip"
	"strconv"
)

// VIPKey identifies a VIP: the destination address, port (0: every port)
// and IP protocol its flows are sent to. It is what keeps a VIP's identity
// (its id, its conntrack entries) across reloads and renames, and what the
// configuration refuses to see twice. It is a small comparable value, used
// as a map key as is; String is for people.
type VIPKey struct {
	Addr  netip.Addr
	Port  uint16
	Proto uint8
}

// String formats the key as "address:port/protocol" ("203.0.113.7:80/tcp",
// "2001:db8::7:443/tcp"): the name of a VIP that has none, so the format
// must not change.
func (k VIPKey) String() string {
	return k.Addr.String() + ":" + strconv.Itoa(int(k.Port)) + "/" + protoName(k.Proto)
}
