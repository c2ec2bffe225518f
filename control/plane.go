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
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/health"
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
	addr      netip.Addr     // configured address; another one makes a new backend (syncBackends)
	check     netip.AddrPort // where its active check goes (checkAddr); zero: not checked
	weight    int            // configured
	override  *int           // operator's SetWeight
	drained   bool           // operator's Drain, or drain = true in the config
	cfgDrain  bool
	drainedAt time.Time
	timedOut  bool // the last effective state had its drain timed out (drainTimeoutPending)
	health    Health
	reason    string
	settled   bool // the checks have given a first verdict (Up or Down)
	everUp    bool // came up at least once in this process
	initial   bool // configured when the process started (not added by a reload)
	passive   passiveState
	// panicUsed: down (or ejected) but given new flows by panic mode; when
	// panic mode ends it keeps them (never Down) until it is healthy again.
	panicUsed bool
	// panicLeft: when panic mode last stopped using it (its VIP left panic
	// mode while it was down or ejected); comeBack ramps it from there.
	panicLeft time.Time
	// outSince: when it last went out of the table (down by its checks or
	// ejected); zero: not out. panicLate: how long it had been out, and
	// not used by panic mode, when panic mode last began using it (the
	// time before a first panic mode, and between panic modes; comeBack
	// deducts it: a backend dead long before a blip has no share to keep).
	outSince  time.Time
	panicLate time.Duration
	upSince   time.Time // last time it became usable (added, or came back up): slow start
}

// awaitingVerdict reports whether st was added by a reload and its checks
// have given no verdict yet (it starts down until it passes rise checks):
// panic mode neither counts it nor uses it.
func (st *backendState) awaitingVerdict() bool { return st.health == HealthDown && !st.settled }

// Plane is the control plane of one fulcrum process.
type Plane struct {
	log     *slog.Logger
	shared  *dataplane.Shared
	workers []*dataplane.Worker
	now     func() time.Time

	// readSeq numbers the configurations read (Reload) or given (Apply);
	// appliedSeq is that of the one in force, guarded by mu.
	readSeq    atomic.Uint64
	appliedSeq uint64

	mu       sync.Mutex
	cfg      *config.Config
	backends map[dataplane.BackendRef]*backendState
	panicked map[string]bool // VIP name -> in panic mode
	rebuilds uint64
	lastDur  time.Duration
	lastErr  error
	ramping  bool

	kick    chan struct{}
	runDone <-chan struct{} // Run's done, once Run started: background work ends with it
	checks  *health.Manager // nil until StartHealth
	// localLog: the health checks this host failed to make, as last
	// logged, and when (noteLocalFailuresLocked).
	localLog struct {
		n  uint64
		at time.Time
	}

	announce     func([]netip.Prefix) // publishes the serving VIPs (BGP); nil: none
	announced    string               // the last set passed to announce, to skip repeats
	wasAnnounced map[netip.Addr]bool  // VIP addresses announced at least once by this process
	hopLost      [2]hopLoss           // IPv4, IPv6: since when the snapshot has had no next hop (announce.go)
	lastStep     time.Time            // when Run last received its step (holdGraceAcrossPauseLocked)
	pauses       pauseWatch           // the time the process did not run, by a goroutine of its own (pausewatch.go)
	pausedAtStep time.Duration        // pauses.paused at the last step
	hopWithdrawn map[netip.Addr]bool  // announced addresses withdrawn for want of a next hop (logged once)
	peers        func() []PeerInfo    // BGP session states, for Status

	convergingFlows uint64 // new flows forwarded while converging (converge.go)
	convergedFold   bool   // convergingFlows is final

	hop       resolvedHop                         // the kernel's answer for the gateways (SetNextHop)
	gwChanged chan struct{}                       // a reload changed the gateways: resolve again now
	applyMu   sync.Mutex                          // one reload's dry run and apply at a time (outside mu: the dry run builds every table)
	onApply   func(old, cur *config.Config) error // applies a reload to the kernel's side (SetOnApply)
	onConfig  []func(cfg *config.Config)          // told of every configuration put in force (OnConfig)

	ops opsStats // reloads and rebuild durations, for metrics (status.go)
	// build is BuildServices; tests make it fail, to reach the paths that
	// keep the previous snapshot and state when a rebuild fails.
	build func(*config.Config, *dataplane.Services, dataplane.Overrides, dataplane.NextHop) (*dataplane.Services, error)

	stall    stallWatch    // the workers' liveness (stall.go)
	folds    []workerFold  // signalStep's view of each worker, reused
	foldWait time.Duration // signalStep's wait for each worker (foldWait; tests shorten it)

	probeMu sync.Mutex
	probe   chan struct{} // Responsive's pending probe of mu; nil: none
}

// PeerInfo is one BGP session as the admin API shows it.
type PeerInfo struct {
	Address      string
	ASN          uint32
	State        string
	UptimeSec    float64
	PrefixesSent uint64
	// PrefixesReceived are the routes the router sends: the LB imports
	// none, but the speaker keeps each (Adj-RIB-In), so a router should
	// send none.
	PrefixesReceived uint64
	LastError        string
}

// New makes a control plane for cfg whose snapshots go to shared and whose
// worker operations go to workers. It publishes the first snapshot.
func New(cfg *config.Config, shared *dataplane.Shared, workers []*dataplane.Worker, log *slog.Logger) (*Plane, error) {
	return newPlane(cfg, shared, workers, log, time.Now)
}

func newPlane(cfg *config.Config, shared *dataplane.Shared, workers []*dataplane.Worker, log *slog.Logger, now func() time.Time) (*Plane, error) {
	p := &Plane{log: log, shared: shared, workers: workers, now: now, cfg: cfg,
		backends: map[dataplane.BackendRef]*backendState{}, panicked: map[string]bool{}, kick: make(chan struct{}, 1), gwChanged: make(chan struct{}, 1),
		foldWait: foldWait, build: BuildServices}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.syncBackends(cfg, true)
	p.notePassive(cfg)
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

// HoldReloads runs fn with reloads held off: the configuration in force
// when fn starts (Config) stays in force until it returns, so a backend
// fn found by its address in it is the one fn acts on (a reload that
// swapped two backends' addresses between fn's look-up and its drain
// drained the other). A reload waits meanwhile; fn must not reload.
func (p *Plane) HoldReloads(fn func() error) error {
	p.applyMu.Lock()
	defer p.applyMu.Unlock()
	return fn()
}

// Kick asks for a rebuild; rebuilds asked for in a burst are coalesced.
func (p *Plane) Kick() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Run rebuilds on demand and steps slow starts and drain timeouts until
// done is closed. Its once-a-second step also withdraws a VIP whose next
// hop has been missing for NextHopGrace (announce.go).
func (p *Plane) Run(done <-chan struct{}) {
	p.mu.Lock()
	p.runDone = done
	p.mu.Unlock()
	watching := make(chan struct{})
	go func() { defer close(watching); p.watchPauses(done) }()
	defer func() { <-watching }()
	step := time.NewTicker(time.Second)
	defer step.Stop()
	for {
		idle := p.now() // Run waits from here: its own work before is no pause
		ticked := false
		select {
		case <-done:
			return
		case <-p.kick:
		case <-step.C:
			ticked = true
		}
		at := p.now() // before the lock: waiting for it is no pause
		p.mu.Lock()
		p.stepLocked(at, idle, ticked)
		p.mu.Unlock()
	}
}

// stepLocked is Run's work on each wake: at is when it woke, idle when it
// began to wait (zero: it waited since the previous step), ticked whether
// the once-a-second step woke it rather than a kick. A kick (a verdict, an
// ejection's end) rebuilds; the step withdraws what lost its next hop for
// the grace, and rebuilds only while there is something to move on
// (a ramp, a drain's timeout, a previous table whose window passed).
func (p *Plane) stepLocked(at, idle time.Time, ticked bool) {
	// A kick received first after a pause rebuilds and announces too:
	// the pause is out of the grace before either.
	p.holdGraceAcrossPauseLocked(at, idle)
	if ticked {
		p.announceAfterGraceLocked() // withdraws a VIP without a next hop (announce.go)
		p.noteLocalFailuresLocked()
		// A previous table whose window passed leaves the snapshot
		// (docs/second-chance.md); NewServices dates changes by time.Now.
		if !(p.ramping || p.drainTimeoutPending() || p.shared.Services.Load().ChanceExpired(time.Now())) {
			return
		}
	}
	if err := p.rebuildLocked(); err != nil {
		p.log.Error("table rebuild failed; the previous tables stay", "err", err)
	}
}

func (p *Plane) drainTimeoutPending() bool {
	dt := p.cfg.Control.DrainTimeout
	if dt <= 0 {
		return false
	}
	now := p.now()
	for _, st := range p.backends {
		// Due and not yet in a built snapshot (timedOut is effective's):
		// a loop tick late by any amount (a long rebuild, a paused VM,
		// the clock stepped) still applies it.
		if st.drained && now.Sub(st.drainedAt) >= dt && !st.timedOut {
			return true
		}
	}
	return false
}

// Reload applies a new configuration after validating it completely
// (decoding, and building every table from it). A configuration that fails
// is rejected with the reason and the running one stays in force.
//
// Reloads that overlap (SIGHUP and fulcrumctl reload at once, the file
// rewritten between them) read the file in one order and may take the
// lock in the other: the configuration read last is the one left in
// force, and a reload whose reading is older than the configuration in
// force changes nothing (it returns nil: the file's newer content is in
// force).
func (p *Plane) Reload(path string) (err error) {
	defer func() { p.noteReload(err) }()
	seq := p.readSeq.Add(1) // before the file is read
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	return p.apply(cfg, seq)
}

// ErrExceptionNotUpdated is wrapped by the error of a reload that is in
// force (its snapshot is published and the health checks follow it) but
// whose update of the kernel's side of the exception path (SetOnApply: the
// interface's addresses and MTU) failed. The kernel keeps the old
// settings until a reload succeeds in updating them; nothing is rolled
// back.
var ErrExceptionNotUpdated = errors.New("the configuration is in force, but the exception interface was not updated")

// Apply is Reload for a configuration already loaded. Every setting it
// accepts takes effect in the snapshot it publishes (tables, tunnel
// settings and next hop together); a change it cannot apply is refused by
// key name (ErrNeedsRestart) and nothing changes. If the exception
// interface cannot be updated after the snapshot is published, the
// configuration stays in force and Apply returns an error wrapping
// ErrExceptionNotUpdated.
func (p *Plane) Apply(cfg *config.Config) error {
	return p.apply(cfg, p.readSeq.Add(1))
}

// apply is Apply for a configuration read at seq (readSeq): one read
// before the configuration in force was read is stale, and ignored.
func (p *Plane) apply(cfg *config.Config, seq uint64) error {
	// One reload at a time builds its tables: two at once (a SIGHUP and
	// fulcrumctl reload) would hold two dry runs in memory.
	p.applyMu.Lock()
	defer p.applyMu.Unlock()
	// Dry run: every table and health check must build before anything
	// changes. It reads only the published snapshot, so it runs without
	// the lock: every table of a large configuration takes seconds to
	// build, and health verdicts, drains and the admin API wait on the
	// lock (the rebuild below builds them once more under it).
	p.mu.Lock()
	superseded := seq < p.appliedSeq
	err := reloadable(p.cfg, cfg)
	nh := p.nextHopLocked(cfg)
	p.mu.Unlock()
	if !superseded && err == nil {
		var dry *dataplane.Services
		if dry, err = BuildServices(cfg, p.shared.Services.Load(), nil, nh); err == nil {
			_, err = healthTargets(cfg, dry)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", cfg.File, err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if seq < p.appliedSeq {
		p.log.Info("reload superseded: a configuration read after this one is in force", "file", cfg.File)
		return nil
	}
	if err := reloadable(p.cfg, cfg); err != nil {
		return fmt.Errorf("%s: %w", cfg.File, err)
	}
	old, saved, savedPanic := p.cfg, p.saveBackends(), p.panicked
	p.cfg = cfg
	carried := p.carryRenamedVIPs(old, cfg)
	if cfg.Control.SlowStart > old.Control.SlowStart {
		// A ramp that had ended under the old slow_start stays ended: a
		// reload that lengthened it (or turned it on) cut backends that
		// had served at full weight for long back to a fraction.
		now := p.now()
		for _, st := range p.backends {
			if !st.upSince.IsZero() && now.Sub(st.upSince) >= old.Control.SlowStart {
				st.upSince = time.Time{}
			}
		}
	}
	p.syncBackends(cfg, false)
	if err := p.rebuildLocked(); err != nil {
		p.cfg = old
		p.restoreBackends(saved)
		p.panicked = savedPanic
		return err
	}
	p.appliedSeq = seq
	if cfg.Dataplane.NextHopMAC.Set {
		// The resolver's answers are not taken while a static MAC is in
		// force: what it said before is no answer for after one is removed.
		p.hop = resolvedHop{}
	}
	// A static next_hop_mac removed leaves the gateways to the resolver:
	// at once, not at its next tick (packets were dropped as no-next-hop
	// for up to a second).
	if old.Dataplane.GatewayIPv4 != cfg.Dataplane.GatewayIPv4 || old.Dataplane.GatewayIPv6 != cfg.Dataplane.GatewayIPv6 || old.Dataplane.NextHopMAC.Set != cfg.Dataplane.NextHopMAC.Set {
		select { // the resolver looks the new gateways up at once
		case p.gwChanged <- struct{}{}:
		default:
		}
	}
	for _, f := range p.onConfig {
		f(cfg)
	}
	var applyErr error
	if p.onApply != nil {
		if err := p.onApply(old, cfg); err != nil {
			applyErr = fmt.Errorf("%s: %w: %w", cfg.File, ErrExceptionNotUpdated, err)
			p.log.Error("configuration applied, but the exception interface was not updated: it keeps its old addresses and MTU until a reload updates them",
				"file", cfg.File, "err", err)
		}
	}
	if err := p.syncHealthLocked(carried); err != nil {
		p.log.Error("health checks not updated", "err", err)
	}
	if applyErr != nil {
		return applyErr
	}
	p.notePassive(cfg)
	p.log.Info("configuration applied", "file", cfg.File, "vips", len(cfg.VIPs))
	for _, w := range cfg.Warnings {
		p.log.Warn("configuration", "warning", w)
	}
	return nil
}

// OnConfig adds f to the functions told of every configuration Apply (or
// Reload) puts in force. f runs after the snapshot is published and before
// Apply returns, with the plane's lock held: it must be quick and must not
// call the plane. The admin API takes a rotated token_file's token this
// way.
func (p *Plane) OnConfig(f func(cfg *config.Config)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onConfig = append(p.onConfig, f)
}
