// Package bgp announces Fulcrum's VIPs to the fleet's ECMP routers over
// BGP, through an embedded GoBGP server (github.com/osrg/gobgp/v3).
//
// A router spreads a VIP's flows over every LB instance that announces it;
// an instance that withdraws the VIP, or whose session drops, stops
// receiving new packets for it. Because every instance builds the same
// Maglev table, a flow that the router moves to another instance keeps its
// backend (see the brief's "shape").
//
// # Policy is the caller's
//
// The Speaker announces exactly what its caller says: Announce, Withdraw,
// and SetAnnounced, which reconciles to a full set. Deciding what to
// announce — only while the dataplane forwards, only VIPs that can serve
// (a usable backend, or panic mode) — is the control plane's job: it
// calls SetAnnounced whenever that set changes. Graceful shutdown is the
// daemon's: WithdrawAll, keep forwarding for Config.DrainTime, then Stop.
//
// # What it sends
//
// One IPv4 or IPv6 unicast route per VIP (normally /32 or /128), origin
// IGP, with the configured communities (global, per-VIP, plus the
// caller's) and MED (caller's, else per-VIP, else global). The next hop is
// the LB's own address on each session (next-hop self) unless configured
// per family; a session carries its own address family, and the other one
// only when that family's next hop is configured (RFC 4760 multiprotocol
// over one session). Routes the routers send are never imported: the LB is
// an originator, never a transit path. GoBGP still keeps each one in the
// neighbour's Adj-RIB-In (about 350 bytes a prefix, whatever the import
// policy), so routers should export nothing to the LB;
// PeerStatus.PrefixesReceived shows what they send.
//
// # Timers
//
// Sessions default to a 9 s hold time and 3 s keepalive (see
// DefaultHoldTime for why), and the LB dials its routers rather than
// listening (see Config.ListenPort).
//
// # Configuration
//
// Config is the schema of the [bgp] section: package config decodes the
// section straight into it (its toml tags), fills WithDefaults and reports
// each of Validate's *FieldError at the line of its Key. This package does
// not import config.
package bgp
