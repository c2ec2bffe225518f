package bgp

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gbgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// ErrInvalidPrefix is returned for a prefix that cannot be announced.
var ErrInvalidPrefix = errors.New("invalid prefix")

// VIPAttrs are what the caller adds to one VIP's announcement, on top of
// the configuration. The zero value announces the VIP with its configured
// attributes.
type VIPAttrs struct {
	// Communities are added to the global and per-VIP communities.
	Communities []Community
	// MED, if set, replaces the per-VIP or global MED (for example, a
	// control plane may raise it while a VIP runs in panic mode).
	MED *uint32
}

// attrs are the effective attributes of one announcement: comparable
// after normalisation, so an unchanged Announce is a no-op.
type attrs struct {
	communities []Community // sorted, unique
	med         uint32
	hasMED      bool
	nextHop     netip.Addr // invalid: next-hop self
}

func (a attrs) equal(b attrs) bool {
	return a.med == b.med && a.hasMED == b.hasMED && a.nextHop == b.nextHop &&
		slices.Equal(a.communities, b.communities)
}

// resolve merges the configuration with the caller's attributes:
// communities are the union of global, per-VIP and caller's; the MED is
// the caller's, else the per-VIP one, else the global one.
func (c *compiled) resolve(p netip.Prefix, va VIPAttrs) attrs {
	vc := c.vips[p]
	comms := slices.Concat(c.comms, vc.Communities, va.Communities)
	slices.Sort(comms)
	out := attrs{communities: slices.Compact(comms)}
	for _, m := range []*uint32{va.MED, vc.MED, c.med} {
		if m != nil {
			out.med, out.hasMED = *m, true
			break
		}
	}
	if p.Addr().Is4() {
		out.nextHop = c.nextHopV4
	} else {
		out.nextHop = c.nextHopV6
	}
	return out
}

// buildPath makes the GoBGP path that announces p. An unset next hop is
// sent to GoBGP as 0.0.0.0 or ::, which it replaces with the session's
// local address for each peer (next-hop self, for eBGP and iBGP alike).
func buildPath(p netip.Prefix, a attrs) (*apiutil.Path, error) {
	nh := a.nextHop
	nlri, err := gbgp.NewIPAddrPrefix(p)
	if err != nil {
		return nil, fmt.Errorf("build path for %v: %w", p, err)
	}
	family := gbgp.RF_IPv4_UC
	pattrs := []gbgp.PathAttributeInterface{
		// Origin IGP: the VIP originates here, as a "network" statement's
		// route would.
		gbgp.NewPathAttributeOrigin(gbgp.BGP_ORIGIN_ATTR_TYPE_IGP),
	}
	if p.Addr().Is4() {
		if !nh.IsValid() {
			nh = netip.IPv4Unspecified()
		}
		attr, err := gbgp.NewPathAttributeNextHop(nh)
		if err != nil {
			return nil, fmt.Errorf("build path for %v: %w", p, err)
		}
		pattrs = append(pattrs, attr)
	} else {
		family = gbgp.RF_IPv6_UC
		if !nh.IsValid() {
			nh = netip.IPv6Unspecified()
		}
		attr, err := gbgp.NewPathAttributeMpReachNLRI(family, []gbgp.PathNLRI{{NLRI: nlri}}, nh)
		if err != nil {
			return nil, fmt.Errorf("build path for %v: %w", p, err)
		}
		pattrs = append(pattrs, attr)
	}
	if a.hasMED {
		pattrs = append(pattrs, gbgp.NewPathAttributeMultiExitDisc(a.med))
	}
	if len(a.communities) > 0 {
		cs := make([]uint32, len(a.communities))
		for i, c := range a.communities {
			cs[i] = uint32(c)
		}
		pattrs = append(pattrs, gbgp.NewPathAttributeCommunities(cs))
	}
	return &apiutil.Path{
		Family: family,
		Nlri:   nlri,
		Attrs:  pattrs,
		Age:    time.Now().Unix(),
	}, nil
}
