// Package control is Fulcrum's control plane: it turns the desired state
// (the configuration, health, operator actions) into service snapshots that
// the dataplane workers pick up with one atomic pointer load per burst.
//
// It runs as goroutines beside the lcores and never blocks them: tables are
// built off to the side, published with one atomic swap, and rebuilds that
// are asked for in a burst (a reload, ten health changes, a slow-start step)
// are coalesced into one. Work that must touch a worker's conntrack table
// (clearing a removed VIP, counting flows, a lookup) is posted to the
// worker as an operation it runs between bursts (dataplane.Op).
//
// Effective weight of a backend, in order (seed chapter sections 5 and 6):
//
//  1. the configured weight, or the operator's override (SetWeight);
//  2. drained (config or Drain): 0, no new flows; its established flows stay
//     until they end, or until the drain timeout passes, when they are moved;
//  3. failing its health checks, or ejected by the passive ones: 0, no new
//     flows; its established flows stay (on_down = "keep", the default,
//     like IPVS expire_nodest_conn=0 and HAProxy without shutdown-sessions:
//     a dead backend's connections are dead anyway, a flapping health
//     endpoint's are not) or are moved (on_down = "move"); unless the VIP
//     is in panic mode: when fewer than panic_threshold of its backends are
//     healthy, all of them (drained ones excepted) are used as if healthy,
//     because sending everything to the few survivors would overload them
//     too (section 5.4). Leaving panic mode never moves a flow: a backend
//     still down then gets 0 but keeps the flows panic mode gave it, even
//     with "move" (they were placed there knowingly);
//  4. slow start: a backend that was added or came back up ramps linearly
//     from slow_start_min of its weight to all of it over slow_start,
//     rebuilt every slow_start_step (HAProxy's slowstart).
package control

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/health"
	"github.com/fulcrumlb/fulcrum/sched"
)

// WeightScale multiplies every weight in the tables so slow start can ramp
// in fine steps even for backends of weight 1 (Maglev weights are
// relative): an effective weight of 150 is 1.5 configured units.
const WeightScale = 100

// Health is a backend's health as the control plane sees it.
type Health uint8

const (
	HealthUnchecked Health = iota // no health check configured: trusted
	HealthUp
	HealthDown
	// HealthUnknown: checked, but no verdict yet; routed like up. A fresh
	// instance must build the table its fleet peers use, and they still
	// believe these backends up (finding 4 of the hardening round: routing
	// them as down reset flows after a restart).
	HealthUnknown
)

func (h Health) String() string {
	switch h {
	case HealthUp:
		return "up"
	case HealthDown:
		return "down"
	case HealthUnknown:
		return "unknown"
	}
	return "unchecked"
}

type backendState struct {
	vip, name string
	weight    int  // configured
	override  *int // operator's SetWeight
	drained   bool // operator's Drain, or drain = true in the config
	cfgDrain  bool
	drainedAt time.Time
	health    Health
	reason    string
	settled   bool // the checks have given a first verdict (Up or Down)
	everUp    bool // came up at least once in this process
	initial   bool // configured when the process started (not added by a reload)
	passive   passiveState
	// panicUsed: down (or ejected) but given new flows by panic mode; when
	// panic mode ends it keeps them (never Down) until it is healthy again.
	panicUsed bool
	upSince   time.Time // last time it became usable (added, or came back up): slow start
	changedAt time.Time
}

// Plane is the control plane of one fulcrum process.
type Plane struct {
	log     *slog.Logger
	shared  *dataplane.Shared
	workers []*dataplane.Worker
	now     func() time.Time

	mu       sync.Mutex
	cfg      *config.Config
	backends map[string]*backendState // by dataplane.BackendKey
	panicked map[string]bool          // VIP name -> in panic mode
	rebuilds uint64
	lastDur  time.Duration
	lastErr  error
	ramping  bool

	kick   chan struct{}
	checks *health.Manager // nil until StartHealth

	announce     func([]netip.Prefix) // publishes the serving VIPs (BGP); nil: none
	announced    string               // the last set passed to announce, to skip repeats
	wasAnnounced map[netip.Addr]bool  // VIP addresses announced at least once by this process
	peers        func() []PeerInfo    // BGP session states, for Status

	convergingFlows uint64 // new flows forwarded while converging (converge.go)
	convergedFold   bool   // convergingFlows is final

	hop       resolvedHop                         // the kernel's answer for the gateways (SetNextHop)
	gwChanged chan struct{}                       // a reload changed the gateways: resolve again now
	onApply   func(old, cur *config.Config) error // applies a reload to the kernel's side (SetOnApply)
}

// PeerInfo is one BGP session as the admin API shows it.
type PeerInfo struct {
	Address      string  `json:"address"`
	ASN          uint32  `json:"asn"`
	State        string  `json:"state"`
	UptimeSec    float64 `json:"uptime_seconds"`
	PrefixesSent uint64  `json:"prefixes_sent"`
	LastError    string  `json:"last_error,omitempty"`
}

// New makes a control plane for cfg whose snapshots go to shared and whose
// worker operations go to workers. It publishes the first snapshot.
func New(cfg *config.Config, shared *dataplane.Shared, workers []*dataplane.Worker, log *slog.Logger) (*Plane, error) {
	return newPlane(cfg, shared, workers, log, time.Now)
}

func newPlane(cfg *config.Config, shared *dataplane.Shared, workers []*dataplane.Worker, log *slog.Logger, now func() time.Time) (*Plane, error) {
	p := &Plane{log: log, shared: shared, workers: workers, now: now, cfg: cfg,
		backends: map[string]*backendState{}, panicked: map[string]bool{}, kick: make(chan struct{}, 1), gwChanged: make(chan struct{}, 1)}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.syncBackends(cfg, true)
	p.convergedFold = !p.convergingLocked() // nothing to wait for, nothing to count
	if err := p.rebuildLocked(); err != nil {
		return nil, err
	}
	return p, nil
}

// Config is the configuration in force.
func (p *Plane) Config() *config.Config {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cfg
}

// syncBackends makes the backend states match cfg: new backends start (up
// if they have no health check, slow-starting), removed ones go, existing
// ones keep their health and operator state.
func (p *Plane) syncBackends(cfg *config.Config, initial bool) {
	now := p.now()
	seen := map[string]bool{}
	for _, v := range cfg.VIPs {
		checked := healthEnabled(cfg, &v)
		for _, b := range v.Backends {
			k := dataplane.BackendKey(v.Name, b.Name)
			seen[k] = true
			st := p.backends[k]
			if st == nil {
				st = &backendState{vip: v.Name, name: b.Name, upSince: now, changedAt: now}
				if initial {
					// The first snapshot after start: nothing is ramping
					// from a previous state, so do not slow-start the
					// whole fleet at once.
					st.upSince = time.Time{}
					st.initial = true
				}
				if checked {
					// At start, unknown routes like up (the fleet's
					// view); a backend added by a reload never served
					// and waits for its checks.
					st.health, st.reason = HealthDown, "not checked yet"
					if initial {
						st.health = HealthUnknown
					}
				}
				p.backends[k] = st
			}
			st.weight = *b.Weight
			if b.Drain != st.cfgDrain {
				st.cfgDrain = b.Drain
				st.drained = b.Drain
				if b.Drain {
					st.drainedAt = now
				}
			}
			if !checked {
				st.health, st.reason = HealthUnchecked, ""
			} else if st.health == HealthUnchecked {
				// A check added by a reload: the backend served
				// unchecked until now; keep it serving until a verdict.
				st.health, st.reason = HealthUnknown, "not checked yet"
			}
		}
	}
	for k := range p.backends {
		if !seen[k] {
			delete(p.backends, k)
		}
	}
}

func healthEnabled(cfg *config.Config, v *config.VIP) bool {
	return v.Health.Kind != "" && v.Health.Kind != "none"
}

// effective computes every backend's effective state and which VIPs are in
// panic mode. It also says whether a slow start is in progress (so the
// rebuild loop keeps stepping).
func (p *Plane) effective(now time.Time) (dataplane.Overrides, map[string]bool, bool) {
	over := dataplane.Overrides{}
	panicked := map[string]bool{}
	ramping := false
	c := &p.cfg.Control
	for _, v := range p.cfg.VIPs {
		total, healthy := 0, 0
		for _, b := range v.Backends {
			st := p.backends[dataplane.BackendKey(v.Name, b.Name)]
			if st.drained || p.baseWeight(st) == 0 {
				continue
			}
			total++
			if st.health != HealthDown && st.passive.until.IsZero() {
				healthy++
			}
		}
		panic := total > 0 && float64(healthy) < c.PanicThreshold*float64(total)
		panicked[v.Name] = panic
		for _, b := range v.Backends {
			k := dataplane.BackendKey(v.Name, b.Name)
			st := p.backends[k]
			w := p.baseWeight(st) * WeightScale
			eff := dataplane.Effective{Weight: w}
			switch {
			case st.drained:
				eff.Weight = 0
				if c.DrainTimeout.Duration > 0 && now.Sub(st.drainedAt) >= c.DrainTimeout.Duration {
					eff.Down = true
				}
			case (st.health == HealthDown || !st.passive.until.IsZero()) && !panic:
				// No new flows; whether the tracked ones leave is the
				// VIP's on_down, except for flows panic mode placed here.
				eff = dataplane.Effective{Weight: 0, Down: v.OnDown == "move" && !st.panicUsed}
			default:
				// Recorded here, where panic mode is decided; a build
				// that then fails only leaves the flag a step early.
				st.panicUsed = panic && (st.health == HealthDown || !st.passive.until.IsZero())
				if ss := c.SlowStart.Duration; ss > 0 && !st.upSince.IsZero() && w > 0 {
					if el := now.Sub(st.upSince); el < ss {
						frac := math.Max(c.SlowStartMin, float64(el)/float64(ss))
						eff.Weight = max(1, int(math.Ceil(float64(w)*frac)))
						ramping = true
					}
				}
			}
			over[k] = eff
		}
	}
	return over, panicked, ramping
}

func (p *Plane) baseWeight(st *backendState) int {
	if st.override != nil {
		return *st.override
	}
	return st.weight
}

// rebuildLocked builds and publishes a new snapshot from the current state:
// the tables, the encapsulator and the next hop of p.cfg, in one store.
func (p *Plane) rebuildLocked() error {
	start := p.now()
	over, panicked, ramping := p.effective(start)
	svc, err := BuildServices(p.cfg, p.shared.Services.Load(), over, p.nextHopLocked(p.cfg))
	if err != nil {
		p.lastErr = err
		return err
	}
	prev := p.shared.Services.Load()
	p.shared.Services.Store(svc)
	p.rebuilds++
	p.lastDur = p.now().Sub(start)
	p.lastErr = nil
	p.ramping = ramping
	for vip, on := range panicked {
		if on != p.panicked[vip] {
			if on {
				p.log.Error("PANIC MODE: too few healthy backends, sending new flows to all of them", "vip", vip, "threshold", p.cfg.Control.PanicThreshold)
			} else {
				p.log.Warn("panic mode over", "vip", vip)
			}
		}
	}
	p.panicked = panicked
	if prev != nil {
		p.clearRemovedVIPs(prev, svc)
	}
	p.announceLocked()
	return nil
}

// clearRemovedVIPs asks every worker to drop the conntrack entries of VIPs
// that are gone from the new snapshot.
func (p *Plane) clearRemovedVIPs(prev, cur *dataplane.Services) {
	var gone []uint16
	for id, v := range prev.VIPs {
		if v == nil {
			continue
		}
		if id >= len(cur.VIPs) || cur.VIPs[id] == nil || cur.VIPs[id].Key != v.Key {
			gone = append(gone, uint16(id))
		}
	}
	if len(gone) == 0 {
		return
	}
	go func() {
		for _, id := range gone {
			for i, w := range p.workers {
				if err := w.Run(dataplane.DropOp(conntrack.ByVIP(id)), 10*time.Second); err != nil {
					p.log.Warn("clearing conntrack of a removed VIP", "vip_id", id, "worker", i, "err", err)
				}
			}
		}
	}()
}

// Kick asks for a rebuild; rebuilds asked for in a burst are coalesced.
func (p *Plane) Kick() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Run rebuilds on demand and steps slow starts and drain timeouts until
// done is closed.
func (p *Plane) Run(done <-chan struct{}) {
	step := time.NewTicker(time.Second)
	defer step.Stop()
	for {
		select {
		case <-done:
			return
		case <-p.kick:
		case <-step.C:
			p.mu.Lock()
			need := p.ramping || p.drainTimeoutPending()
			p.mu.Unlock()
			if !need {
				continue
			}
		}
		p.mu.Lock()
		if err := p.rebuildLocked(); err != nil {
			p.log.Error("table rebuild failed; the previous tables stay", "err", err)
		}
		p.mu.Unlock()
	}
}

func (p *Plane) drainTimeoutPending() bool {
	dt := p.cfg.Control.DrainTimeout.Duration
	if dt <= 0 {
		return false
	}
	now := p.now()
	for _, st := range p.backends {
		if st.drained && now.Sub(st.drainedAt) < dt+2*time.Second {
			return true
		}
	}
	return false
}

// ErrNotFound is returned for a VIP or backend name that does not exist.
var ErrNotFound = errors.New("not found")

func (p *Plane) backend(vip, name string) (*backendState, error) {
	st := p.backends[dataplane.BackendKey(vip, name)]
	if st == nil {
		return nil, fmt.Errorf("vip %q backend %q: %w", vip, name, ErrNotFound)
	}
	return st, nil
}

// Drain stops new flows to a backend; its established flows stay (until the
// drain timeout, if one is configured).
func (p *Plane) Drain(vip, name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, err := p.backend(vip, name)
	if err != nil {
		return err
	}
	if !st.drained {
		st.drained, st.drainedAt, st.changedAt = true, p.now(), p.now()
		p.log.Info("backend drained", "vip", vip, "backend", name)
	}
	return p.rebuildLocked()
}

// Undrain lets a drained backend take new flows again (slow-starting).
func (p *Plane) Undrain(vip, name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, err := p.backend(vip, name)
	if err != nil {
		return err
	}
	if st.drained {
		st.drained, st.upSince, st.changedAt = false, p.now(), p.now()
		p.log.Info("backend undrained", "vip", vip, "backend", name)
	}
	return p.rebuildLocked()
}

// SetWeight overrides a backend's configured weight until the next reload
// that changes it (0..65535; 0 stops new flows like a drain).
func (p *Plane) SetWeight(vip, name string, w int) error {
	if w < 0 || w > 65535 {
		return fmt.Errorf("vip %q backend %q: weight %d is outside 0..65535", vip, name, w)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	st, err := p.backend(vip, name)
	if err != nil {
		return err
	}
	st.override = &w
	st.changedAt = p.now()
	p.log.Info("backend weight set", "vip", vip, "backend", name, "weight", w)
	return p.rebuildLocked()
}

// SetHealth records a health check verdict for a backend and rebuilds if it
// changed. A backend coming up slow-starts.
func (p *Plane) SetHealth(vip, name string, up bool, reason string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, err := p.backend(vip, name)
	if err != nil {
		return err
	}
	h := HealthDown
	if up {
		h = HealthUp
	}
	st.reason = reason
	first := !st.settled
	st.settled = true
	if first {
		p.Kick() // a VIP may now be announced
	}
	if st.health == h || st.health == HealthUnchecked {
		return nil
	}
	st.health, st.changedAt = h, p.now()
	if up {
		// Slow start is for a backend that recovers, not for the first
		// verdict after this instance started: a fresh instance must build
		// the same table as the rest of the fleet at once.
		if st.everUp || !first || !st.initial {
			st.upSince = p.now()
		}
		st.everUp = true
		p.log.Info("backend up", "vip", vip, "backend", name, "reason", reason)
	} else {
		p.log.Warn("backend down", "vip", vip, "backend", name, "reason", reason)
	}
	p.Kick()
	return nil
}

// Reload applies a new configuration after validating it completely
// (decoding, and building every table from it). A configuration that fails
// is rejected with the reason and the running one stays in force.
func (p *Plane) Reload(path string) error {
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	return p.Apply(cfg)
}

// Apply is Reload for a configuration already loaded. Every setting it
// accepts takes effect in the snapshot it publishes (tables, tunnel
// settings and next hop together); a change it cannot apply is refused by
// key name (ErrNeedsRestart) and nothing changes.
func (p *Plane) Apply(cfg *config.Config) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := reloadable(p.cfg, cfg); err != nil {
		return fmt.Errorf("%s: %w", cfg.File, err)
	}
	// Dry run: every table and health check must build before anything
	// changes.
	if _, err := BuildServices(cfg, p.shared.Services.Load(), nil, p.nextHopLocked(cfg)); err != nil {
		return fmt.Errorf("%s: %w", cfg.File, err)
	}
	if _, err := healthTargets(cfg); err != nil {
		return fmt.Errorf("%s: %w", cfg.File, err)
	}
	old := p.cfg
	p.cfg = cfg
	p.syncBackends(cfg, false)
	if err := p.rebuildLocked(); err != nil {
		p.cfg = old
		p.syncBackends(old, false)
		return err
	}
	if old.Dataplane.GatewayIPv4 != cfg.Dataplane.GatewayIPv4 || old.Dataplane.GatewayIPv6 != cfg.Dataplane.GatewayIPv6 {
		select { // the resolver looks the new gateways up at once
		case p.gwChanged <- struct{}{}:
		default:
		}
	}
	if p.onApply != nil {
		if err := p.onApply(old, cfg); err != nil {
			p.log.Error("exception interface not updated", "err", err)
		}
	}
	if err := p.syncHealthLocked(); err != nil {
		p.log.Error("health checks not updated", "err", err)
	}
	p.log.Info("configuration applied", "file", cfg.File, "vips", len(cfg.VIPs))
	return nil
}

// BackendStatus is one backend as the admin API shows it.
type BackendStatus struct {
	VIP       string  `json:"vip"`
	Name      string  `json:"name"`
	Address   string  `json:"address"`
	ID        uint32  `json:"id"`
	Weight    int     `json:"weight"`           // configured (or set by the operator)
	Effective int     `json:"effective_weight"` // in the table now, scaled by 100
	Health    string  `json:"health"`
	Reason    string  `json:"reason,omitempty"`
	Drained   bool    `json:"drained"`
	Down      bool    `json:"down"`
	SlowStart bool    `json:"slow_start"`
	Slots     int     `json:"table_slots"`
	Share     float64 `json:"table_share"`
	Flows     uint64  `json:"active_flows"`
	Outlier   bool    `json:"outlier"`   // ejected by the passive checks
	Ejections int     `json:"ejections"` // passive ejections so far
	NewFlows  uint64  `json:"new_flows"`
	Packets   uint64  `json:"packets"`
	Bytes     uint64  `json:"bytes"`
}

// VIPStatus is one VIP as the admin API shows it.
type VIPStatus struct {
	Name      string          `json:"name"`
	Address   string          `json:"address"`
	Port      uint16          `json:"port"`
	Protocol  string          `json:"protocol"`
	Encap     string          `json:"encap"`
	TableSize int             `json:"table_size"`
	Panic     bool            `json:"panic_mode"`
	Serving   bool            `json:"serving"` // some backend takes new flows
	Packets   uint64          `json:"packets"`
	Bytes     uint64          `json:"bytes"`
	NewFlows  uint64          `json:"new_flows"`
	Backends  []BackendStatus `json:"backends"`
}

// Status is the whole control plane state.
type Status struct {
	Generation    uint64               `json:"generation"`
	Rebuilds      uint64               `json:"rebuilds"`
	LastRebuildMs float64              `json:"last_rebuild_ms"`
	LastError     string               `json:"last_error,omitempty"`
	VIPs          []VIPStatus          `json:"vips"`
	Workers       []dataplane.Counters `json:"-"`
	// Stale lists the workers that did not answer the counter snapshot in
	// time (stopped or stuck): their counters read zero.
	Stale []int `json:"stale_workers,omitempty"`
	// BGP lists the BGP sessions (none without a [bgp] section) and the
	// announced VIPs.
	BGP       []PeerInfo `json:"bgp_peers,omitempty"`
	Announced []string   `json:"announced,omitempty"`
	// Converging is true from start until every active health check of
	// the backends configured at start has given its first verdict: until
	// then nothing is announced and new flows use every configured backend
	// (health unknown counts as up). ConvergingNewFlows counts the new
	// flows forwarded meanwhile (the router may still send traffic over
	// the old route); it stops counting at the first signals fold after
	// convergence, so it may include up to one fold period (1 s) more.
	Converging         bool   `json:"converging"`
	ConvergingNewFlows uint64 `json:"converging_new_flows"`
}

// Status reports every VIP and backend with their counters. With flows, it
// also counts active flows per backend on every worker (a background scan
// of each conntrack table; it takes a few milliseconds per million
// entries).
func (p *Plane) Status(withFlows bool) Status {
	counters := make([]dataplane.Counters, len(p.workers))
	var flows []uint32
	var stale []int
	for i, w := range p.workers {
		if !w.Snapshot(&counters[i], 2*time.Second) {
			stale = append(stale, i)
		}
		if withFlows {
			op := dataplane.CountFlowsOp()
			if w.Run(op, 5*time.Second) == nil {
				if flows == nil {
					flows = make([]uint32, len(op.Flows))
				}
				for id, n := range op.Flows {
					flows[id] += n
				}
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	svc := p.shared.Services.Load()
	st := Status{Generation: svc.Gen, Rebuilds: p.rebuilds, LastRebuildMs: float64(p.lastDur.Microseconds()) / 1000, Workers: counters, Stale: stale}
	st.Converging, st.ConvergingNewFlows = p.convergingLocked(), p.convergingFlows
	if st.Converging {
		st.ConvergingNewFlows = vipNewFlows(counters) // all of them so far
	}
	if p.peers != nil {
		st.BGP = p.peers()
	}
	if p.announce != nil && p.announced != "" {
		st.Announced = strings.Fields(strings.Trim(p.announced, "[]"))
	}
	if p.lastErr != nil {
		st.LastError = p.lastErr.Error()
	}
	for _, v := range svc.VIPs {
		if v == nil {
			continue
		}
		vs := VIPStatus{Name: v.Name, Address: v.Addr.String(), Port: v.Port, Protocol: protoName(v.Proto), Encap: v.Encap.String(), Panic: p.panicked[v.Name], Serving: v.Table != nil}
		slots := map[uint32]int{}
		if v.Table != nil {
			vs.TableSize = v.Table.Size()
			for i, id := range v.Backends {
				slots[id] = v.Table.Count(i)
			}
		}
		for _, c := range counters {
			vs.Packets += c.VIPs[v.ID].Packets
			vs.Bytes += c.VIPs[v.ID].Bytes
			vs.NewFlows += c.VIPs[v.ID].NewFlows
		}
		for _, id := range v.Members {
			b := svc.Backends[id]
			bst := p.backends[dataplane.BackendKey(v.Name, b.Name)]
			bs := BackendStatus{VIP: v.Name, Name: b.Name, Address: b.Addr.String(), ID: id, Effective: b.Weight, Down: b.Down, Slots: slots[id]}
			if bst != nil {
				bs.Weight = p.baseWeight(bst)
				bs.Health, bs.Reason, bs.Drained = bst.health.String(), bst.reason, bst.drained
				if !bst.passive.until.IsZero() {
					bs.Outlier, bs.Reason = true, bst.passive.reason
				}
				bs.Ejections = bst.passive.ejections
				// Ramping in the published table (what the dataplane uses),
				// not in what the next rebuild would publish.
				bs.SlowStart = !bst.drained && !b.Down && b.Weight > 0 && b.Weight < bs.Weight*WeightScale
			}
			if vs.TableSize > 0 {
				bs.Share = float64(bs.Slots) / float64(vs.TableSize)
			}
			for _, c := range counters {
				if bc := c.Backends[id]; bc.Gen == b.Gen {
					bs.Packets += bc.Packets
					bs.Bytes += bc.Bytes
					bs.NewFlows += bc.NewFlows
				}
			}
			if flows != nil {
				bs.Flows = uint64(flows[id])
			}
			vs.Backends = append(vs.Backends, bs)
		}
		st.VIPs = append(st.VIPs, vs)
	}
	sort.Slice(st.VIPs, func(i, j int) bool { return st.VIPs[i].Name < st.VIPs[j].Name })
	return st
}

func protoName(p uint8) string {
	if p == 17 {
		return "udp"
	}
	return "tcp"
}

// LookupResult says which backend a flow goes to, and why.
type LookupResult struct {
	VIP     string `json:"vip"`
	Backend string `json:"backend,omitempty"`
	Address string `json:"address,omitempty"`
	// Reason: "conntrack" (pinned by an earlier packet, on Worker),
	// "conntrack-stale" (pinned to a backend that is gone or down: the next
	// packet is placed as a new flow), "table" (Maglev: a new flow would
	// take table slot Slot), "scheduler" (another scheduler picks a new
	// flow's backend at connection time, by load: Backend is empty and
	// Candidates lists what it picks from), "no-backend" (the VIP takes no
	// new flows), or "not-a-vip".
	Reason string `json:"reason"`
	Worker int    `json:"worker,omitempty"`
	State  string `json:"state,omitempty"`
	IdleMs uint32 `json:"idle_ms,omitempty"`
	Slot   int    `json:"slot"` // -1 unless a Maglev table slot decides
	Hash   string `json:"hash"`
	// Scheduler is the VIP's scheduler ("maglev", "p2c", "least-conn",
	// ...). Candidates are the backends a non-Maglev scheduler picks a new
	// flow from, with the weights and loads it compares.
	Scheduler  string            `json:"scheduler,omitempty"`
	Candidates []LookupCandidate `json:"candidates,omitempty"`
}

// LookupCandidate is one backend a load-aware scheduler may pick for a
// new flow, as the workers see it now.
type LookupCandidate struct {
	Backend string `json:"backend"`
	Address string `json:"address"`
	// Weight is the effective weight (scaled by WeightScale); 0: not
	// eligible (down, drained, ejected).
	Weight int `json:"weight"`
	// Active is the load the schedulers read: active flows over every
	// worker, as published at the last signals fold (about a second old).
	Active int64 `json:"active_flows"`
	// LatencyUs is the peak-EWMA latency estimate (peak-ewma only reads
	// it); 0 without samples.
	LatencyUs int64 `json:"latency_us,omitempty"`
}

// Lookup tells where a client's flow goes: its conntrack entry if a worker
// has one; otherwise, for a Maglev VIP, its table slot, and for another
// scheduler, the candidates it picks from when the SYN arrives (the choice
// depends on the loads at that moment, so it cannot be named in advance).
func (p *Plane) Lookup(src, dst netip.Addr, sport, dport uint16, proto uint8) (LookupResult, error) {
	t, ok := flow.TupleFrom(src, dst, sport, dport, proto)
	if !ok {
		return LookupResult{}, fmt.Errorf("lookup %v -> %v: addresses of different families", src, dst)
	}
	p.mu.Lock()
	key, err := flow.ParseKey(p.cfg.Dataplane.HashKey)
	p.mu.Unlock()
	if err != nil {
		return LookupResult{}, err
	}
	h := flow.NewHasher(key).Hash(&t)
	svc := p.shared.Services.Load()
	v := svc.LookupVIP(dst, dport, proto)
	res := LookupResult{Reason: "not-a-vip", Slot: -1, Hash: fmt.Sprintf("%016x", h)}
	if v == nil {
		return res, nil
	}
	res.VIP, res.Scheduler = v.Name, v.Sched.String()
	for i, w := range p.workers {
		op := dataplane.LookupOp(t, h)
		if err := w.Run(op, 2*time.Second); err != nil {
			return res, fmt.Errorf("worker %d: %w", i, err)
		}
		if op.Found && int(op.Backend) < len(svc.Backends) && svc.Backends[op.Backend] != nil {
			b := svc.Backends[op.Backend]
			res.Reason, res.Worker, res.Backend, res.Address = "conntrack", i, b.Name, b.Addr.String()
			res.State, res.IdleMs = op.State.String(), op.IdleMs
			if b.Gen == op.Gen && !b.Down {
				return res, nil
			}
			// A stale pin: the next packet re-selects from the table.
			res.Reason = "conntrack-stale"
		}
	}
	if v.Table == nil {
		res.Reason = "no-backend"
		return res, nil
	}
	if v.Sched != sched.Maglev {
		// The worker's picker decides at the SYN, by the loads of that
		// moment (dataplane Worker.choose): no slot names the backend.
		if res.Reason != "conntrack-stale" {
			res.Reason = "scheduler"
		}
		res.Backend, res.Address = "", ""
		res.Candidates = p.candidates(svc, v)
		return res, nil
	}
	if res.Reason != "conntrack-stale" {
		res.Reason = "table"
	}
	res.Slot = int(h % uint64(v.Table.Size()))
	b := svc.Backends[v.Backends[v.Table.Lookup(h)]]
	res.Backend, res.Address = b.Name, b.Addr.String()
	return res, nil
}

// candidates lists what a load-aware scheduler picks a VIP's new flow
// from: every member with the weight and load the workers read (the
// published Loads; each worker adds its own picks since then).
func (p *Plane) candidates(svc *dataplane.Services, v *dataplane.VIP) []LookupCandidate {
	loads := p.shared.Loads.Load()
	out := make([]LookupCandidate, 0, len(v.Members))
	for _, id := range v.Members {
		b := svc.Backends[id]
		if b == nil {
			continue
		}
		c := LookupCandidate{Backend: b.Name, Address: b.Addr.String()}
		if !b.Down { // as Worker.choose weighs it
			c.Weight = b.Weight
		}
		if loads != nil && int(id) < len(loads.Active) {
			c.Active = loads.Active[id]
			c.LatencyUs, _ = loads.Latency[id].Micros()
		}
		out = append(out, c)
	}
	return out
}

// Table lists, slot by slot, the backend names of a VIP's current table
// (what two instances must agree on).
func (p *Plane) Table(vip string) ([]string, error) {
	svc := p.shared.Services.Load()
	for _, v := range svc.VIPs {
		if v == nil || v.Name != vip {
			continue
		}
		if v.Table == nil {
			return nil, nil
		}
		out := make([]string, v.Table.Size())
		for i := range out {
			out[i] = v.Table.Backend(v.Table.Slot(i)).Key
		}
		return out, nil
	}
	return nil, fmt.Errorf("vip %q: %w", vip, ErrNotFound)
}

// Panicked reports the VIPs in panic mode.
func (p *Plane) Panicked() map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]bool{}
	for k, v := range p.panicked {
		out[k] = v
	}
	return out
}

// RebuildStats are the table rebuild counters, for metrics.
func (p *Plane) RebuildStats() (n uint64, last time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rebuilds, p.lastDur
}
