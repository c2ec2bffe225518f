package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/config/oc"
	gbgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
)

// Sentinel errors.
var (
	ErrStopped        = errors.New("bgp speaker stopped")
	ErrAlreadyStarted = errors.New("bgp speaker already started")
)

// State is a BGP session state (RFC 4271 §8.2.2), lower case as operators
// read it in BIRD and FRR.
type State string

// Session states.
const (
	StateUnknown     State = "unknown"
	StateIdle        State = "idle"
	StateConnect     State = "connect"
	StateActive      State = "active"
	StateOpenSent    State = "opensent"
	StateOpenConfirm State = "openconfirm"
	StateEstablished State = "established"
)

func stateFromAPI(s api.PeerState_SessionState) State {
	switch s {
	case api.PeerState_SESSION_STATE_IDLE:
		return StateIdle
	case api.PeerState_SESSION_STATE_CONNECT:
		return StateConnect
	case api.PeerState_SESSION_STATE_ACTIVE:
		return StateActive
	case api.PeerState_SESSION_STATE_OPENSENT:
		return StateOpenSent
	case api.PeerState_SESSION_STATE_OPENCONFIRM:
		return StateOpenConfirm
	case api.PeerState_SESSION_STATE_ESTABLISHED:
		return StateEstablished
	}
	return StateUnknown
}

// stateFromFSM is stateFromAPI for the states of GoBGP's peer events.
func stateFromFSM(s gbgp.FSMState) State {
	switch s {
	case gbgp.BGP_FSM_IDLE:
		return StateIdle
	case gbgp.BGP_FSM_CONNECT:
		return StateConnect
	case gbgp.BGP_FSM_ACTIVE:
		return StateActive
	case gbgp.BGP_FSM_OPENSENT:
		return StateOpenSent
	case gbgp.BGP_FSM_OPENCONFIRM:
		return StateOpenConfirm
	case gbgp.BGP_FSM_ESTABLISHED:
		return StateEstablished
	}
	return StateUnknown
}

// PeerStatus is one BGP session as the admin API, fulcrumctl and metrics
// report it.
type PeerStatus struct {
	Address netip.Addr
	ASN     uint32 // the peer's AS number
	State   State
	// Uptime is how long the session has been Established; 0 otherwise.
	Uptime time.Duration
	// PrefixesSent counts the VIPs advertised on the session, over all
	// families; PrefixesReceived the prefixes the router sent (which the
	// speaker never uses: see the package doc).
	PrefixesSent     uint64
	PrefixesReceived uint64
	// LastError is the last problem seen on the session (connection
	// failure, NOTIFICATION sent or received, hold timer expiry); it
	// stays after the session recovers, as history.
	LastError string
}

// announcement is one prefix the caller wants announced.
type announcement struct {
	attrs attrs
	path  *apiutil.Path // as given to GoBGP; nil until the speaker runs
}

// Speaker announces VIPs to routers over BGP through an embedded GoBGP
// server. It announces exactly what its caller says: see the package doc.
// All methods are safe for concurrent use.
type Speaker struct {
	cfg   *compiled
	log   *slog.Logger
	glog  *gobgpLogger
	srv   *server.BgpServer
	watch context.CancelFunc

	mu        sync.Mutex // serialises the methods below; GoBGP calls are made under it
	running   bool
	stopped   bool
	announced map[netip.Prefix]announcement // the wanted set, also before Start

	stopping atomic.Bool // sessions going down on purpose: not a warning

	stateMu sync.Mutex
	states  map[netip.Addr]State // last state seen per neighbour, for logging transitions
}

// New checks cfg (after defaults) and returns a speaker that has not
// connected to anything yet. log may be nil.
func New(cfg Config, log *slog.Logger) (*Speaker, error) {
	c, err := cfg.WithDefaults().compile()
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "bgp")
	glog := newGobgpLogger(log, c.cfg.ASN)
	for _, n := range c.neighbors {
		glog.peerASN[n.addr] = n.PeerASN
	}
	return &Speaker{
		cfg:       c,
		log:       log,
		glog:      glog,
		srv:       server.NewBgpServer(server.LoggerOption(glog.slog(), nil)),
		announced: map[netip.Prefix]announcement{},
		states:    map[netip.Addr]State{},
	}, nil
}

// Start starts the BGP server, adds every neighbour (sessions come up in
// the background) and announces what Announce or SetAnnounced asked for
// before Start. It does not block; ctx bounds the set-up only.
func (s *Speaker) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.stopped:
		return ErrStopped
	case s.running:
		return ErrAlreadyStarted
	}
	go s.srv.Serve()

	c := s.cfg
	listenPort := int32(c.cfg.ListenPort)
	if listenPort == 0 {
		listenPort = -1 // GoBGP: do not listen
	}
	listen := make([]string, len(c.listen))
	for i, a := range c.listen {
		listen[i] = a.String()
	}
	if err := s.srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn:             c.cfg.ASN,
		RouterId:        c.routerID.String(),
		ListenPort:      listenPort,
		ListenAddresses: listen,
		// Only the two unicast families: GoBGP enables all it knows when
		// given none.
		Families: []uint32{
			uint32(oc.AfiSafiTypeToIntMap[oc.AFI_SAFI_TYPE_IPV4_UNICAST]),
			uint32(oc.AfiSafiTypeToIntMap[oc.AFI_SAFI_TYPE_IPV6_UNICAST]),
		},
	}}); err != nil {
		s.srv.Stop()
		s.stopped = true
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("bgp: start: listen_port %d is in use by another program (another BGP daemon, or another Fulcrum): stop it, or set another bgp.listen_port or bgp.listen_addresses: %w", c.cfg.ListenPort, err)
		}
		return fmt.Errorf("bgp: start: %w", err)
	}
	if err := s.onlyLocalRoutes(ctx); err != nil {
		s.srv.Stop()
		s.stopped = true
		return fmt.Errorf("bgp: import policy: %w", err)
	}

	wctx, cancel := context.WithCancel(context.Background())
	s.watch = cancel
	if err := s.srv.WatchEvent(wctx, server.WatchEventMessageCallbacks{OnPeerUpdate: s.onEvent}, server.WatchPeer()); err != nil {
		cancel()
		s.srv.Stop()
		s.stopped = true
		return fmt.Errorf("bgp: watch peer events: %w", err)
	}

	for _, n := range c.neighbors {
		if err := s.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: peerFromConfig(n)}); err != nil {
			cancel()
			s.srv.Stop()
			s.stopped = true
			return fmt.Errorf("bgp: neighbor %v: %w", n.addr, err)
		}
	}
	s.running = true
	s.log.Info("bgp speaker started", "asn", c.cfg.ASN, "router_id", c.routerID,
		"neighbors", len(c.neighbors), "listen_port", c.cfg.ListenPort)

	var errs []error
	for _, p := range slices.SortedFunc(maps.Keys(s.announced), comparePrefix) {
		a := s.announced[p]
		if err := s.addPath(p, a.attrs); err != nil {
			delete(s.announced, p)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// onlyLocalRoutes makes the speaker a pure originator: routes the routers
// send are not imported, so they are never re-advertised to another router
// (an LB must not become a transit path) and cost no Loc-RIB memory. The
// import policy applies to local paths too, hence the explicit accept.
func (s *Speaker) onlyLocalRoutes(ctx context.Context) error {
	const name = "fulcrum-originate-only"
	if err := s.srv.AddPolicy(ctx, &api.AddPolicyRequest{Policy: &api.Policy{
		Name: name,
		Statements: []*api.Statement{{
			Name:       name + "-local",
			Conditions: &api.Conditions{RouteType: api.Conditions_ROUTE_TYPE_LOCAL},
			Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT},
		}},
	}}); err != nil {
		return err
	}
	return s.srv.SetPolicyAssignment(ctx, &api.SetPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{
		Name:          "global",
		Direction:     api.PolicyDirection_POLICY_DIRECTION_IMPORT,
		Policies:      []*api.Policy{{Name: name}},
		DefaultAction: api.RouteAction_ROUTE_ACTION_REJECT,
	}})
}

func peerFromConfig(n neighbor) *api.Peer {
	secs := func(d time.Duration) uint64 { return uint64(d / time.Second) }
	p := &api.Peer{
		Conf: &api.PeerConf{
			NeighborAddress: n.addr.String(),
			PeerAsn:         n.PeerASN,
			AuthPassword:    n.Password,
		},
		Timers: &api.Timers{Config: &api.TimersConfig{
			ConnectRetry:      secs(n.ConnectRetry),
			HoldTime:          secs(n.HoldTime),
			KeepaliveInterval: secs(n.Keepalive),
		}},
		Transport: &api.Transport{
			PassiveMode: n.Passive,
			RemotePort:  uint32(n.Port),
		},
	}
	if n.local.IsValid() {
		p.Transport.LocalAddress = n.local.String()
	} else if n.addr.Zone() != "" {
		// Without a local address GoBGP looks the zone's link-local
		// address up when the peer is added, and AddPeer (Start) fails
		// if the interface is missing or has none yet: the kernel
		// chooses the source when it connects instead, and a missing
		// interface is the session's error, as for any unreachable peer.
		p.Transport.LocalAddress = netip.IPv6Unspecified().String()
	}
	if n.Multihop > 0 {
		p.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: uint32(n.Multihop)}
	}
	family := func(afi api.Family_Afi) *api.AfiSafi {
		return &api.AfiSafi{Config: &api.AfiSafiConfig{
			Family:  &api.Family{Afi: afi, Safi: api.Family_SAFI_UNICAST},
			Enabled: true,
		}}
	}
	if n.v4 {
		p.AfiSafis = append(p.AfiSafis, family(api.Family_AFI_IP))
	}
	if n.v6 {
		p.AfiSafis = append(p.AfiSafis, family(api.Family_AFI_IP6))
	}
	return p
}

// onEvent logs session state changes. GoBGP calls it from its watcher
// goroutine, one event at a time.
func (s *Speaker) onEvent(ev *apiutil.WatchEventMessage_PeerEvent, _ time.Time) {
	if ev == nil || ev.Type != apiutil.PEER_EVENT_STATE {
		return
	}
	st := ev.Peer.State
	addr := st.NeighborAddress.Unmap()
	if !addr.IsValid() {
		return
	}
	to := stateFromFSM(st.SessionState)
	s.stateMu.Lock()
	from, seen := s.states[addr]
	s.states[addr] = to
	s.stateMu.Unlock()
	if seen && from == to {
		return
	}
	if !seen {
		from = StateIdle
	}
	args := []any{"neighbor", addr, "peer_asn", st.PeerASN, "from", from, "to", to}
	if (from == StateOpenSent || from == StateOpenConfirm) && (to == StateIdle || to == StateActive) && !s.stopping.Load() &&
		(st.DisconnectReason == api.PeerState_DISCONNECT_REASON_INVALID_MSG || st.DisconnectReason == api.PeerState_DISCONNECT_REASON_READ_FAILED) {
		if text := s.glog.refused(addr, from, st.DisconnectMessage); text != "" {
			s.log.Warn("bgp session refused", append(args, "asn", s.cfg.cfg.ASN, "error", text)...)
			return
		}
	}
	switch {
	case to == StateEstablished:
		s.log.Info("bgp session established", append(args, "peer_router_id", st.RouterID)...)
		go s.refuseHoldZero(addr)
	case from == StateEstablished && s.stopping.Load():
		s.log.Info("bgp session closed", args...)
	case from == StateEstablished:
		s.log.Warn("bgp session lost", append(args, "reason", s.glog.lastError(addr))...)
	default:
		s.log.Debug("bgp session state", args...)
	}
}

// holdZeroRetry is how long a session refused for hold time 0 stays
// down before the speaker tries again (the router may have been fixed).
var holdZeroRetry = time.Minute

// refuseHoldZero ends the session with the neighbour at addr if its
// negotiated hold time is 0: the router proposed 0 (BGP takes the smaller
// of the two), so neither side sends keepalives or runs a hold timer, and
// a dead LB would stay in the ECMP group for ever. GoBGP accepts such an
// OPEN and offers no hook before Established, so the speaker disables the
// peer once it is up (a Cease, "administrative shutdown", with a reason
// the router logs) and enables it again after holdZeroRetry. The routes
// GoBGP sent at Established are withdrawn with the session.
func (s *Speaker) refuseHoldZero(addr netip.Addr) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	established, zero := false, false
	err := s.srv.ListPeer(ctx, &api.ListPeerRequest{Address: addr.String()}, func(p *api.Peer) {
		established = p.GetState().GetSessionState() == api.PeerState_SESSION_STATE_ESTABLISHED
		zero = p.GetTimers().GetState().GetNegotiatedHoldTime() == 0
	})
	if err != nil || !established || !zero || s.stopping.Load() {
		return
	}
	text := fmt.Sprintf("refused: the router proposed hold time 0 (no keepalives, no hold timer: a dead LB would never be withdrawn); set a hold time of at least 3 s on its neighbor for this LB; retrying in %v", holdZeroRetry)
	s.glog.hold(addr, text)
	s.log.Error("bgp session refused", "neighbor", addr, "error", text)
	if err := s.srv.DisablePeer(ctx, &api.DisablePeerRequest{Address: addr.String(),
		Communication: "hold time 0 refused: configure a hold time of at least 3 s"}); err != nil {
		s.log.Error("bgp: disable neighbor after hold time 0", "neighbor", addr, "error", err)
		return
	}
	time.AfterFunc(holdZeroRetry, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.running {
			return
		}
		s.glog.release(addr)
		if err := s.srv.EnablePeer(context.Background(), &api.EnablePeerRequest{Address: addr.String()}); err != nil {
			s.log.Error("bgp: enable neighbor after hold time 0", "neighbor", addr, "error", err)
		}
	})
}

// Announce announces prefix (a VIP: /32 or /128, or any IPv4 or IPv6
// unicast prefix) with the configured attributes plus attrs. Announcing
// an announced prefix with the same effective attributes does nothing;
// with other attributes it replaces the announcement (one UPDATE, no
// withdrawal in between). Before Start the prefix is remembered and
// announced by Start.
func (s *Speaker) Announce(prefix netip.Prefix, attrs VIPAttrs) error {
	p, err := canonicalPrefix(prefix)
	if err != nil {
		return fmt.Errorf("bgp: announce: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return ErrStopped
	}
	return s.announceLocked(p, attrs)
}

func (s *Speaker) announceLocked(p netip.Prefix, va VIPAttrs) error {
	a := s.cfg.resolve(p, va)
	if err := checkCommunities(len(a.communities)); err != nil {
		return fmt.Errorf("bgp: announce %v: %w", p, err)
	}
	if cur, ok := s.announced[p]; ok && cur.attrs.equal(a) {
		return nil
	}
	if !s.running {
		s.announced[p] = announcement{attrs: a}
		return nil
	}
	return s.addPath(p, a)
}

// addPath hands one announcement to GoBGP and records it.
func (s *Speaker) addPath(p netip.Prefix, a attrs) error {
	path, err := buildPath(p, a)
	if err != nil {
		return fmt.Errorf("bgp: announce %v: %w", p, err)
	}
	if _, err := s.srv.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{path}}); err != nil {
		return fmt.Errorf("bgp: announce %v: %w", p, err)
	}
	s.announced[p] = announcement{attrs: a, path: path}
	s.log.Info("vip announced", "prefix", p, "communities", a.communities, "med", medArg(a), "next_hop", nextHopArg(a))
	return nil
}

func medArg(a attrs) any {
	if !a.hasMED {
		return "none"
	}
	return a.med
}

func nextHopArg(a attrs) any {
	if !a.nextHop.IsValid() {
		return "self"
	}
	return a.nextHop
}

// Withdraw withdraws prefix. Withdrawing a prefix that is not announced
// does nothing.
func (s *Speaker) Withdraw(prefix netip.Prefix) error {
	p, err := canonicalPrefix(prefix)
	if err != nil {
		return fmt.Errorf("bgp: withdraw: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return ErrStopped
	}
	return s.withdrawLocked(p)
}

func (s *Speaker) withdrawLocked(p netip.Prefix) error {
	a, ok := s.announced[p]
	if !ok {
		return nil
	}
	if s.running && a.path != nil {
		if err := s.srv.DeletePath(apiutil.DeletePathRequest{Paths: []*apiutil.Path{a.path}}); err != nil {
			return fmt.Errorf("bgp: withdraw %v: %w", p, err)
		}
		s.log.Info("vip withdrawn", "prefix", p)
	}
	delete(s.announced, p)
	return nil
}

// SetAnnounced makes the announced set exactly set: it withdraws every
// announced prefix not in set, then announces the new ones and those
// whose attributes changed. The control plane calls it whenever the set
// of serving VIPs changes. Errors for single prefixes are joined; the
// others are applied.
func (s *Speaker) SetAnnounced(set map[netip.Prefix]VIPAttrs) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return ErrStopped
	}
	var errs []error
	want := make(map[netip.Prefix]VIPAttrs, len(set))
	for p, a := range set {
		cp, err := canonicalPrefix(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("bgp: announce: %w", err))
			continue
		}
		want[cp] = a
	}
	// Withdraw first: a router briefly missing a VIP that is going away
	// anyway is better than one briefly holding more than is serving.
	for _, p := range slices.SortedFunc(maps.Keys(s.announced), comparePrefix) {
		if _, ok := want[p]; !ok {
			if err := s.withdrawLocked(p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, p := range slices.SortedFunc(maps.Keys(want), comparePrefix) {
		if err := s.announceLocked(p, want[p]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// WithdrawAll withdraws every announced prefix; the sessions stay up. The
// daemon calls it first on SIGTERM, then keeps forwarding for DrainTime
// while the routers move the flows to the other instances, then calls
// Stop.
func (s *Speaker) WithdrawAll() error {
	return s.SetAnnounced(nil)
}

// Announced returns the announced prefixes (or those to announce at
// Start), sorted.
func (s *Speaker) Announced() []netip.Prefix {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.SortedFunc(maps.Keys(s.announced), comparePrefix)
}

// Peers returns the state of every configured neighbour, in configuration
// order. Before Start and after Stop every session is idle.
func (s *Speaker) Peers() []PeerStatus {
	s.mu.Lock()
	running := s.running
	s.mu.Unlock()

	out := make([]PeerStatus, len(s.cfg.neighbors))
	for i, n := range s.cfg.neighbors {
		out[i] = PeerStatus{Address: n.addr, ASN: n.PeerASN, State: StateIdle, LastError: s.glog.lastError(n.addr)}
	}
	if !running {
		return out
	}
	now := time.Now()
	_ = s.srv.ListPeer(context.Background(), &api.ListPeerRequest{EnableAdvertised: true}, func(p *api.Peer) {
		addr, err := netip.ParseAddr(p.GetConf().GetNeighborAddress())
		if err != nil {
			return
		}
		i, ok := s.cfg.neighborIx[addr]
		if !ok {
			return
		}
		ps := &out[i]
		ps.State = stateFromAPI(p.GetState().GetSessionState())
		if ps.State == StateEstablished {
			if up := p.GetTimers().GetState().GetUptime(); up != nil {
				ps.Uptime = max(0, now.Sub(up.AsTime())).Truncate(time.Second)
			}
		}
		for _, af := range p.GetAfiSafis() {
			ps.PrefixesSent += af.GetState().GetAdvertised()
			ps.PrefixesReceived += af.GetState().GetReceived()
		}
	})
	return out
}

// Stop closes every session (each router gets a Cease NOTIFICATION,
// RFC 4486 "peer de-configured", and drops this LB's routes at once) and
// stops the server. The speaker cannot be started again. Stop is
// idempotent.
func (s *Speaker) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return
	}
	s.stopped = true
	if !s.running {
		return
	}
	s.running = false
	s.stopping.Store(true)
	s.srv.Stop()
	s.watch()
	s.log.Info("bgp speaker stopped", "announced", len(s.announced))
}

// comparePrefix orders IPv4 before IPv6, then by address and length, for
// deterministic logs and UPDATE order.
func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}
