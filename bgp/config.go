package bgp

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Defaults. Where a number comes from is said beside it.
const (
	// DefaultHoldTime is short on purpose. An LB that dies without closing
	// its sessions (power loss, kernel panic, a wedged host) is withdrawn
	// only when the router's hold timer expires; until then ECMP keeps
	// hashing 1/N of all flows to it. BIRD's default (240 s) and GoBGP's
	// (90 s) would black-hole those flows for minutes. 9 s with a 3 s
	// keepalive (hold/3, RFC 4271 §10) is the usual LB/anycast setting: it
	// tolerates two lost keepalives. The negotiated hold time is the smaller
	// of the two sides' (RFC 4271 §4.2), so it takes effect even against a
	// router left at its default. Sub-second detection needs BFD.
	DefaultHoldTime  = 9 * time.Second
	DefaultKeepalive = 3 * time.Second // DefaultHoldTime/3 (RFC 4271 §10)
	// DefaultConnectRetry is how long to wait between connection attempts
	// to a router that is not there. RFC 4271 suggests 120 s (GoBGP's
	// default), which would leave a rebooted router without this LB's VIPs
	// for up to two minutes after it comes back.
	DefaultConnectRetry = 5 * time.Second
	// DefaultDrainTime is how long the daemon keeps forwarding after it
	// withdrew every VIP on SIGTERM: long enough for the routers to process
	// the withdrawal and reprogram their FIB so that no new packet arrives
	// (typically well under a second; 5 s leaves margin on a loaded
	// router). Established flows moved to another LB keep their backend,
	// because every instance builds the same Maglev table.
	DefaultDrainTime = 5 * time.Second
	DefaultPeerPort  = 179 // RFC 4271 §8.2.1
)

// Limits from the protocol.
const (
	MinHoldTime    = 3 * time.Second     // RFC 4271 §4.2: 0 or at least three seconds
	MaxHoldTime    = 65535 * time.Second // a 16-bit count of seconds in OPEN
	MaxPasswordLen = 80                  // TCP_MD5SIG_MAXKEYLEN (RFC 2385 keys in Linux)
	asTrans        = 23456               // RFC 6793: AS_TRANS, reserved
	asLast16       = 65535               // RFC 7300: reserved
	asLast32       = 4294967295          // RFC 7300: reserved

	// MaxDrainTime bounds DrainTime: routers reprogram their FIB within
	// seconds, so a longer drain only delays a restart (and a typo such
	// as "5h" would hold a deploy for hours).
	MaxDrainTime = 10 * time.Minute
	// MaxConnectRetry bounds ConnectRetry: longer, a router that comes
	// back stays without this LB's VIPs for that long.
	MaxConnectRetry = 10 * time.Minute
)

// The size of one announcement's UPDATE. A BGP message is at most 4096
// bytes (RFC 4271 §4; the speaker does not negotiate RFC 8654 extended
// messages), and every path attribute of a VIP must fit in one UPDATE
// with its NLRI: GoBGP cannot split attributes, and with too many it
// panics (IPv4) or sends a message the router refuses (IPv6). The only
// attribute that grows with the configuration is COMMUNITIES, 4 bytes a
// community, so their number is bounded (MaxCommunities).
const (
	maxMessageLen = 4096 // RFC 4271 §4.1
	// updateOverhead is the BGP header (19), the withdrawn routes and
	// total path attribute lengths (2+2).
	updateOverhead = 19 + 2 + 2
	// fixedAttrsLen is the largest size of every attribute but
	// COMMUNITIES, each with its 3-byte header (4 with extended length):
	// ORIGIN 4; AS_PATH with the local AS prepended (eBGP) 9, plus
	// AS4_PATH 9 toward a peer without 4-octet AS support (AS_PATH is then
	// 7): 16; LOCAL_PREF (iBGP) 7; MULTI_EXIT_DISC 7; and the larger of
	// NEXT_HOP 7 + an IPv4 NLRI 5 and an IPv6 MP_REACH_NLRI (4-byte
	// header, AFI 2, SAFI 1, next hop length 1, global and link-local next
	// hops 32, reserved 1, a /128 NLRI 17): 58. Each NLRI has 4 more bytes
	// of path identifier should ADD-PATH ever be negotiated: 62.
	fixedAttrsLen = 4 + 16 + 7 + 7 + 62
	// communitiesHeaderLen is the COMMUNITIES attribute's header, with
	// extended length (more than 63 communities).
	communitiesHeaderLen = 4
	communityLen         = 4 // RFC 1997

	// MaxCommunities is how many communities (global, per-VIP and the
	// caller's together) one announcement can carry: 993.
	MaxCommunities = (maxMessageLen - updateOverhead - fixedAttrsLen - communitiesHeaderLen) / communityLen
)

// updateLen is the largest size of the UPDATE announcing one VIP with n
// communities.
func updateLen(n int) int {
	l := updateOverhead + fixedAttrsLen
	if n > 0 {
		l += communitiesHeaderLen + n*communityLen
	}
	return l
}

// ErrTooManyCommunities is returned by Announce and SetAnnounced for a
// VIP whose communities would not fit in one UPDATE.
var ErrTooManyCommunities = errors.New("too many communities")

// checkCommunities reports an error if n communities do not fit in one
// UPDATE.
func checkCommunities(n int) error {
	if n <= MaxCommunities {
		return nil
	}
	return fmt.Errorf("%w: %d communities (%d bytes) make an UPDATE of up to %d bytes, more than BGP's %d-byte maximum; at most %d communities per VIP (global, per-VIP and added together)",
		ErrTooManyCommunities, n, n*communityLen, updateLen(n), maxMessageLen, MaxCommunities)
}

// ErrConfig is wrapped by every *FieldError Validate returns.
var ErrConfig = errors.New("invalid bgp configuration")

// FieldError is one problem of the [bgp] section. Key is the setting's
// path within the section ("drain_time", "neighbor[1].hold_time",
// "vip[0].prefix"), so the config loader can point at its line; Msg
// names the key and the value.
type FieldError struct {
	Key string
	Msg string
}

func (e *FieldError) Error() string { return "bgp: " + e.Msg }

// Unwrap makes errors.Is(err, ErrConfig) hold.
func (e *FieldError) Unwrap() error { return ErrConfig }

// Config is the BGP speaker's configuration: the TOML section [bgp]. The
// key of each field is in brackets (and in its toml tag, so the section
// decodes straight into a Config; durations are strings like "9s"). A zero
// duration or port means its default (see WithDefaults); Validate checks
// the result.
type Config struct {
	// ASN is the local autonomous system number: 1-4294967294, not 23456
	// (AS_TRANS) or 65535. [asn]
	ASN uint32 `toml:"asn"`
	// RouterID is the BGP identifier: an IPv4 address unique among this
	// LB's peers, usually the LB's own IPv4 address. Required. [router_id]
	RouterID string `toml:"router_id"`
	// ListenPort is the TCP port to accept BGP sessions on. 0 (the default)
	// means do not listen: the LB dials out to its routers, which is all a
	// route originator needs, keeps port 179 closed on the LB, and avoids
	// connection collisions (RFC 4271 §6.8). Set it (usually 179) only for
	// passive neighbours. [listen_port]
	ListenPort int `toml:"listen_port"`
	// ListenAddresses restricts the listener to these addresses; empty
	// means all (0.0.0.0 and ::). Only with ListenPort. [listen_addresses]
	ListenAddresses []string `toml:"listen_addresses"`
	// Neighbors are the routers to peer with; at least one. [[bgp.neighbor]]
	Neighbors []Neighbor `toml:"neighbor"`
	// Communities are added to every announced VIP: "65000:100" (RFC 1997)
	// or a well-known name (no-export, no-advertise, no-export-subconfed,
	// no-peer, graceful-shutdown, blackhole). [communities]
	Communities []string `toml:"communities"`
	// MED is the MULTI_EXIT_DISC of every announced VIP (lower is
	// preferred); nil sends none. [med]
	MED *uint32 `toml:"med"`
	// NextHopV4 is the IPv4 next hop of IPv4 VIPs; empty means next-hop
	// self: the LB's address on each session. Set it when the forwarding
	// address differs from the session's source. [next_hop_v4]
	NextHopV4 string `toml:"next_hop_v4"`
	// NextHopV6 is the IPv6 next hop of IPv6 VIPs; empty means next-hop
	// self. Setting it also carries IPv6 VIPs over IPv4 sessions
	// (multiprotocol BGP, RFC 4760), with this next hop. [next_hop_v6]
	NextHopV6 string `toml:"next_hop_v6"`
	// VIPs give single VIPs their own communities (added to the global
	// ones) and MED (replacing the global one). [[bgp.vip]]
	VIPs []VIPConfig `toml:"vip"`
	// DrainTime is how long the daemon keeps forwarding after withdrawing
	// every VIP on shutdown, before it stops; at most MaxDrainTime. 0
	// means DefaultDrainTime (5 s), as every zero duration here: a
	// written "0s" cannot be told from a missing key once decoded. For
	// (almost) no drain set a positive duration such as "1ms". The
	// speaker does not use it; the daemon does. [drain_time]
	DrainTime time.Duration `toml:"drain_time"`
}

// Neighbor is one router: [[bgp.neighbor]].
type Neighbor struct {
	// Address is the router's IP address. [address]
	Address string `toml:"address"`
	// PeerASN is the router's AS number; equal to ASN makes the session
	// internal (iBGP). [peer_asn]
	PeerASN uint32 `toml:"peer_asn"`
	// Port is the router's BGP port; 0 means 179. [port]
	Port int `toml:"port"`
	// LocalAddress is the source address of the session; empty lets the
	// kernel choose from the route to Address. [local_address]
	LocalAddress string `toml:"local_address"`
	// HoldTime is the proposed hold time, in whole seconds, at least 3 s;
	// 0 means DefaultHoldTime (9 s). BGP's "hold time 0" (no keepalives)
	// is not offered: a dead LB would never be withdrawn. [hold_time]
	HoldTime time.Duration `toml:"hold_time"`
	// Keepalive is the keepalive interval, in whole seconds, shorter than
	// HoldTime; 0 means DefaultKeepalive (3 s) or a third of HoldTime if
	// that is shorter. [keepalive]
	Keepalive time.Duration `toml:"keepalive"`
	// ConnectRetry is the wait between connection attempts; 0 means
	// DefaultConnectRetry (5 s). [connect_retry]
	ConnectRetry time.Duration `toml:"connect_retry"`
	// Password is the TCP MD5 signature key (RFC 2385), at most 80 bytes;
	// empty means none. [password]
	Password string `toml:"password"`
	// Passive makes the LB wait for the router to connect instead of
	// dialling; it needs ListenPort. [passive]
	Passive bool `toml:"passive"`
	// Multihop is the TTL of an eBGP session to a router that is not
	// directly connected (eBGP multihop); 0 means directly connected
	// (TTL 1). Ignored for iBGP. [multihop]
	Multihop int `toml:"multihop"`
}

// VIPConfig holds the attributes of one VIP's announcement: [[bgp.vip]].
type VIPConfig struct {
	// Prefix is the VIP: an address ("203.0.113.7", meaning /32 or /128)
	// or a prefix ("203.0.113.7/32"). [prefix]
	Prefix string `toml:"prefix"`
	// Communities are added to the global ones. [communities]
	Communities []string `toml:"communities"`
	// MED replaces the global MED; nil keeps it. [med]
	MED *uint32 `toml:"med"`
}

// DefaultConfig returns the defaults of every setting that has one. ASN,
// RouterID and Neighbors have none.
func DefaultConfig() Config {
	return Config{DrainTime: DefaultDrainTime}
}

// WithDefaults returns a copy of c with every zero duration and port that
// has a default filled in: the effective configuration.
func (c Config) WithDefaults() Config {
	if c.DrainTime == 0 {
		c.DrainTime = DefaultDrainTime
	}
	ns := make([]Neighbor, len(c.Neighbors))
	for i, n := range c.Neighbors {
		if n.Port == 0 {
			n.Port = DefaultPeerPort
		}
		if n.HoldTime == 0 {
			n.HoldTime = DefaultHoldTime
		}
		if n.Keepalive == 0 {
			n.Keepalive = min(DefaultKeepalive, (n.HoldTime / 3).Truncate(time.Second))
		}
		if n.ConnectRetry == 0 {
			n.ConnectRetry = DefaultConnectRetry
		}
		ns[i] = n
	}
	if c.Neighbors != nil {
		c.Neighbors = ns
	}
	return c
}

// Validate reports every problem in c (after defaults), each naming the
// TOML key and the value: errors.Join of *FieldError.
func (c Config) Validate() error {
	_, err := c.WithDefaults().compile()
	return err
}

// compiled is a validated Config in the types the speaker uses.
type compiled struct {
	cfg        Config // with defaults
	routerID   netip.Addr
	listen     []netip.Addr
	neighbors  []neighbor
	comms      []Community
	med        *uint32
	nextHopV4  netip.Addr // invalid: next-hop self
	nextHopV6  netip.Addr
	vips       map[netip.Prefix]VIPAttrs
	neighborIx map[netip.Addr]int
}

type neighbor struct {
	Neighbor
	addr  netip.Addr
	local netip.Addr // invalid: kernel's choice
	v4    bool       // carries IPv4 unicast
	v6    bool       // carries IPv6 unicast
}

// compile checks c, which must already carry its defaults.
func (c Config) compile() (*compiled, error) {
	var errs []error
	bad := func(key, format string, a ...any) {
		errs = append(errs, &FieldError{Key: key, Msg: fmt.Sprintf(format, a...)})
	}
	out := &compiled{cfg: c, vips: map[netip.Prefix]VIPAttrs{}, neighborIx: map[netip.Addr]int{}}

	if err := checkASN(c.ASN); err != nil {
		bad("asn", "asn %d: %v", c.ASN, err)
	}
	if c.RouterID == "" {
		bad("router_id", "router_id is missing: set an IPv4 address unique among the LB's peers (usually its own)")
	} else if a, err := netip.ParseAddr(c.RouterID); err != nil || !a.Is4() || a.IsUnspecified() {
		bad("router_id", "router_id %q is not a non-zero IPv4 address (a BGP identifier is 32 bits, RFC 6286)", c.RouterID)
	} else {
		out.routerID = a
	}
	if c.ListenPort < 0 || c.ListenPort > 65535 {
		bad("listen_port", "listen_port %d is out of range 0-65535 (0: do not listen)", c.ListenPort)
	}
	if len(c.ListenAddresses) > 0 && c.ListenPort == 0 {
		bad("listen_addresses", "listen_addresses is set but listen_port is 0 (not listening)")
	}
	seenListen := map[netip.Addr]int{}
	for i, s := range c.ListenAddresses {
		a, err := netip.ParseAddr(s)
		if err != nil {
			bad(fmt.Sprintf("listen_addresses[%d]", i), "listen_addresses[%d] %q is not an IP address", i, s)
			continue
		}
		if a.Zone() != "" || a.Is4In6() {
			// GoBGP reads neither: a zoned address fails Start ("no
			// suitable address"), a mapped one listens on IPv4 only.
			bad(fmt.Sprintf("listen_addresses[%d]", i), "listen_addresses[%d] %q: write a plain IPv4 or IPv6 address (no zone, not IPv4-mapped)", i, s)
			continue
		}
		if j, dup := seenListen[a]; dup {
			// The second listener's bind fails at start ("address
			// already in use"), which names no key.
			bad(fmt.Sprintf("listen_addresses[%d]", i), "listen_addresses[%d] %v is listen_addresses[%d] again", i, a, j)
			continue
		}
		seenListen[a] = i
		out.listen = append(out.listen, a)
	}
	// A wildcard and an address of its family bind the same port twice:
	// the second bind fails at start ("address already in use").
	for i, a := range out.listen {
		if a.IsUnspecified() {
			continue
		}
		for j, w := range out.listen {
			if w.IsUnspecified() && w.Is4() == a.Is4() {
				bad(fmt.Sprintf("listen_addresses[%d]", i), "listen_addresses[%d] %v is covered by listen_addresses[%d] %v (the wildcard of its family): list one or the other", i, a, j, w)
				break
			}
		}
	}
	if c.NextHopV4 != "" {
		a, err := netip.ParseAddr(c.NextHopV4)
		if err != nil || !a.Is4() || !routableNextHop(a) {
			bad("next_hop_v4", "next_hop_v4 %q is not a unicast IPv4 address a router can forward to (not loopback, link-local, multicast or broadcast)", c.NextHopV4)
		} else {
			out.nextHopV4 = a
		}
	}
	if c.NextHopV6 != "" {
		a, err := netip.ParseAddr(c.NextHopV6)
		if err != nil || !a.Is6() || a.Is4In6() || a.Zone() != "" || !routableNextHop(a) {
			bad("next_hop_v6", "next_hop_v6 %q is not a global unicast IPv6 address (not loopback, link-local or multicast: RFC 2545 needs a global next hop)", c.NextHopV6)
		} else {
			out.nextHopV6 = a
		}
	}
	comms, err := parseCommunities(c.Communities)
	if err != nil {
		bad("communities", "communities: %v", err)
	}
	comms = uniqueCommunities(comms)
	if err := checkCommunities(len(comms)); err != nil {
		bad("communities", "communities: %v", err)
	}
	out.comms = comms
	out.med = c.MED
	if c.DrainTime < 0 || c.DrainTime > MaxDrainTime {
		bad("drain_time", "drain_time %v is out of range 0-%v", c.DrainTime, MaxDrainTime)
	}

	if len(c.Neighbors) == 0 {
		bad("neighbor", "no neighbor: add at least one [[bgp.neighbor]] with address and peer_asn")
	}
	for i, n := range c.Neighbors {
		nb, nerrs := c.compileNeighbor(n, out)
		for _, e := range nerrs {
			bad(fmt.Sprintf("neighbor[%d].%s", i, e.key), "neighbor[%d] %q: %s", i, n.Address, e.msg)
		}
		if nb.addr.IsValid() {
			if j, dup := out.neighborIx[nb.addr]; dup {
				bad(fmt.Sprintf("neighbor[%d].address", i), "neighbor[%d] %q: same address as neighbor[%d]", i, n.Address, j)
			}
			out.neighborIx[nb.addr] = i
		}
		out.neighbors = append(out.neighbors, nb)
	}

	for i, v := range c.VIPs {
		p, err := parseVIPPrefix(v.Prefix)
		if err != nil {
			bad(fmt.Sprintf("vip[%d].prefix", i), "vip[%d] prefix %q: %v", i, v.Prefix, err)
			continue
		}
		if _, dup := out.vips[p]; dup {
			bad(fmt.Sprintf("vip[%d].prefix", i), "vip[%d] prefix %s: listed twice", i, p)
		}
		vc, err := parseCommunities(v.Communities)
		if err != nil {
			bad(fmt.Sprintf("vip[%d].communities", i), "vip[%d] %s: communities: %v", i, p, err)
		}
		// Checked with the global ones, as they are announced; if the
		// global ones alone are too many, that is reported once, above.
		if n := len(uniqueCommunities(slices.Concat(out.comms, vc))); len(out.comms) <= MaxCommunities {
			if err := checkCommunities(n); err != nil {
				bad(fmt.Sprintf("vip[%d].communities", i), "vip[%d] %s: communities (with the %d global ones): %v", i, p, len(out.comms), err)
			}
		}
		out.vips[p] = VIPAttrs{Communities: vc, MED: v.MED}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// routableNextHop reports whether a may be a VIP route's next hop: an
// address routers forward to, not unspecified, loopback, link-local,
// multicast, 0.0.0.0/8 or 240.0.0.0/4 (broadcast among them).
func routableNextHop(a netip.Addr) bool {
	if a.IsUnspecified() || a.IsLoopback() || a.IsMulticast() || a.IsLinkLocalUnicast() {
		return false
	}
	if a.Is4() {
		b := a.As4()[0]
		return b != 0 && b < 240
	}
	return true
}

// keyedMsg is a problem of one neighbor key.
type keyedMsg struct{ key, msg string }

func (c Config) compileNeighbor(n Neighbor, out *compiled) (neighbor, []keyedMsg) {
	var errs []keyedMsg
	bad := func(key, format string, a ...any) { errs = append(errs, keyedMsg{key, fmt.Sprintf(format, a...)}) }
	nb := neighbor{Neighbor: n}
	switch a, err := netip.ParseAddr(n.Address); {
	case n.Address == "":
		bad("address", "address is missing")
	case err != nil:
		bad("address", "address is not an IP address")
	case a.Is4In6():
		bad("address", "address is IPv4-mapped: write it as IPv4")
	case a.IsUnspecified() || a.IsMulticast():
		bad("address", "address is not a unicast address")
	case a.IsLinkLocalUnicast() && a.Zone() == "":
		bad("address", "address %v is link-local: name its interface (%v%%eth0), or the session cannot be opened", a, a)
	default:
		nb.addr = a
		// A session carries its own family; the other one only with an
		// explicit next hop of that family (next-hop self would put an
		// address of the wrong family into the UPDATE).
		nb.v4 = a.Is4() || out.nextHopV4.IsValid()
		nb.v6 = a.Is6() || out.nextHopV6.IsValid()
	}
	if err := checkASN(n.PeerASN); err != nil {
		bad("peer_asn", "peer_asn %d: %v", n.PeerASN, err)
	}
	if n.Port < 1 || n.Port > 65535 {
		bad("port", "port %d is out of range 1-65535", n.Port)
	}
	if n.LocalAddress != "" {
		a, err := netip.ParseAddr(n.LocalAddress)
		switch {
		case err != nil:
			bad("local_address", "local_address %q is not an IP address", n.LocalAddress)
		case a.Is4In6():
			bad("local_address", "local_address %q is IPv4-mapped: write it as IPv4, of the neighbor's family", n.LocalAddress)
		case nb.addr.IsValid() && a.Is4() != nb.addr.Is4():
			bad("local_address", "local_address %q is not of the neighbor's address family", n.LocalAddress)
		default:
			nb.local = a
		}
	}
	switch {
	case n.HoldTime < MinHoldTime || n.HoldTime > MaxHoldTime:
		bad("hold_time", "hold_time %v is out of range %v-%v (RFC 4271 §4.2)", n.HoldTime, MinHoldTime, MaxHoldTime)
	case n.HoldTime%time.Second != 0:
		bad("hold_time", "hold_time %v is not a whole number of seconds", n.HoldTime)
	}
	switch {
	case n.Keepalive < time.Second || n.Keepalive >= n.HoldTime:
		bad("keepalive", "keepalive %v must be at least 1s and shorter than hold_time %v", n.Keepalive, n.HoldTime)
	case n.Keepalive%time.Second != 0:
		bad("keepalive", "keepalive %v is not a whole number of seconds", n.Keepalive)
	}
	if n.ConnectRetry < time.Second || n.ConnectRetry > MaxConnectRetry || n.ConnectRetry%time.Second != 0 {
		bad("connect_retry", "connect_retry %v must be a whole number of seconds, 1s-%v", n.ConnectRetry, MaxConnectRetry)
	}
	if len(n.Password) > MaxPasswordLen {
		bad("password", "password is %d bytes long; TCP MD5 keys are at most %d", len(n.Password), MaxPasswordLen)
	}
	if n.Passive && c.ListenPort == 0 {
		bad("passive", "passive is set but listen_port is 0: the session could never come up")
	} else if n.Passive && nb.addr.IsValid() && len(out.listen) > 0 && !listensFor(out.listen, nb.addr) {
		bad("passive", "passive is set but listen_addresses has no address of the neighbor's family (%v): the router's connection would be refused", nb.addr)
	}
	if n.Multihop < 0 || n.Multihop > 255 {
		bad("multihop", "multihop %d is out of range 0-255", n.Multihop)
	}
	return nb, errs
}

func checkASN(as uint32) error {
	switch as {
	case 0:
		return errors.New("AS 0 is reserved (RFC 7607): set an AS number 1-4294967294")
	case asTrans:
		return errors.New("AS 23456 is AS_TRANS (RFC 6793), not a real AS")
	case asLast16, asLast32:
		return errors.New("reserved AS number (RFC 7300)")
	}
	return nil
}

// parseVIPPrefix accepts "203.0.113.7", "203.0.113.7/32" and the IPv6
// forms; the prefix must be in canonical form (no host bits set).
func parseVIPPrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, errors.New("not an IP address or prefix")
		}
		if a.Zone() != "" { // PrefixFrom would drop it silently
			return netip.Prefix{}, fmt.Errorf("%w: %s has a zone", ErrInvalidPrefix, s)
		}
		return canonicalPrefix(netip.PrefixFrom(a, a.BitLen()))
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, errors.New("not an IP address or prefix")
	}
	return canonicalPrefix(p)
}

// canonicalPrefix checks that p can be announced: valid, unicast, no zone,
// not IPv4-mapped IPv6, no host bits set.
func canonicalPrefix(p netip.Prefix) (netip.Prefix, error) {
	a := p.Addr()
	switch {
	case !p.IsValid():
		return p, fmt.Errorf("%w: %v", ErrInvalidPrefix, p)
	case a.Is4In6():
		return p, fmt.Errorf("%w: %v is IPv4-mapped IPv6: use the IPv4 prefix", ErrInvalidPrefix, p)
	case a.IsMulticast():
		return p, fmt.Errorf("%w: %v is multicast", ErrInvalidPrefix, p)
	case p.Masked() != p:
		return p, fmt.Errorf("%w: %v has host bits set (did you mean %v?)", ErrInvalidPrefix, p, p.Masked())
	}
	return p, nil
}

// Community is a BGP community (RFC 1997): the high 16 bits are an AS
// number, the low 16 bits a value of that AS's choosing.
type Community uint32

// Well-known communities.
const (
	CommunityGracefulShutdown  Community = 0xffff0000 // RFC 8326: routers depreference the path
	CommunityBlackhole         Community = 0xffff029a // RFC 7999
	CommunityNoExport          Community = 0xffffff01 // RFC 1997
	CommunityNoAdvertise       Community = 0xffffff02 // RFC 1997
	CommunityNoExportSubconfed Community = 0xffffff03 // RFC 1997
	CommunityNoPeer            Community = 0xffffff04 // RFC 3765
)

var wellKnown = map[string]Community{
	"graceful-shutdown":   CommunityGracefulShutdown,
	"blackhole":           CommunityBlackhole,
	"no-export":           CommunityNoExport,
	"no-advertise":        CommunityNoAdvertise,
	"no-export-subconfed": CommunityNoExportSubconfed,
	"no-peer":             CommunityNoPeer,
}

// ParseCommunity parses "ASN:VALUE" (each 0-65535) or a well-known name.
func ParseCommunity(s string) (Community, error) {
	// ASCII case folding only: strings.ToLower maps the Kelvin sign
	// U+212A to "k", which made "BLAC\u212aHOLE" BLACKHOLE.
	if c, ok := wellKnown[asciiLower(s)]; ok {
		return c, nil
	}
	hi, lo, ok := strings.Cut(s, ":")
	if !ok {
		return 0, fmt.Errorf("community %q: want ASN:VALUE like 65000:100, or a well-known name like no-export", s)
	}
	a, err1 := strconv.ParseUint(hi, 10, 16)
	v, err2 := strconv.ParseUint(lo, 10, 16)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("community %q: both halves must be numbers 0-65535", s)
	}
	return Community(a<<16 | v), nil
}

// asciiLower is s with A-Z lowered, and nothing else changed.
func asciiLower(s string) string {
	return strings.Map(func(r rune) rune {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, s)
}

// String formats c as "ASN:VALUE", the form ParseCommunity reads.
func (c Community) String() string {
	return strconv.Itoa(int(c>>16)) + ":" + strconv.Itoa(int(c&0xffff))
}

// uniqueCommunities returns cs sorted, without duplicates: the set
// announced.
func uniqueCommunities(cs []Community) []Community {
	cs = slices.Clone(cs)
	slices.Sort(cs)
	return slices.Compact(cs)
}

func parseCommunities(ss []string) ([]Community, error) {
	var out []Community
	var errs []error
	for i, s := range ss {
		c, err := ParseCommunity(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("[%d] %w", i, err))
			continue
		}
		out = append(out, c)
	}
	return out, errors.Join(errs...)
}

// listensFor reports whether a speaker listening on addrs accepts a
// connection from a neighbor at a: an address of its family. "::" is not
// one for IPv4: GoBGP listens on it as tcp6, which Go makes IPV6_V6ONLY.
func listensFor(addrs []netip.Addr, a netip.Addr) bool {
	for _, l := range addrs {
		if l.Is4() == a.Is4() {
			return true
		}
	}
	return false
}
