package control

// Backend state: the per-backend state machine (configured weight, drain,
// health verdicts, slow start) and the effective weight it yields.

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"time"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/flow"
)

// syncBackends makes the backend states match cfg: new backends start (up
// if they have no health check, slow-starting), removed ones go, existing
// ones keep their health and operator state.
//
// A backend whose address changed is another server under the same name:
// it is treated as a removed backend and an added one (a fresh state: down
// until its checks pass, no operator override or drain, its passive window
// and first verdict reset), as the dataplane treats it (its backend
// identity holds the address: a new incarnation, so its tracked flows
// choose again). A reload that
// changes a backend's configured weight ends the operator's override
// (SetWeight): the override lasts until a reload changes the weight.
func (p *Plane) syncBackends(cfg *config.Config, initial bool) {
	now := p.now()
	seen := map[dataplane.BackendRef]bool{}
	for _, v := range cfg.VIPs {
		checked := healthEnabled(cfg, &v)
		for _, b := range v.Backends {
			k := dataplane.BackendRef{VIP: v.Name, Backend: b.Name}
			seen[k] = true
			st := p.backends[k]
			if st != nil && st.addr != b.Address.Addr {
				p.log.Info("backend moved to another address: treated as a new backend", "vip", v.Name, "backend", b.Name,
					"from", st.addr, "to", b.Address.Addr)
				st = nil
			}
			if st == nil {
				st = &backendState{vip: v.Name, name: b.Name, addr: b.Address.Addr, weight: *b.Weight, upSince: now}
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
					} else {
						// Out of the table from now (its first verdict,
						// down, changes nothing to date it): panic mode
						// that uses it later must not credit it with a
						// share it never had (comeBack).
						st.outSince = now
					}
				}
				p.backends[k] = st
			}
			was := p.baseWeight(st)
			if *b.Weight != st.weight && st.override != nil {
				p.log.Info("backend weight override ended: the reload changed the configured weight", "vip", v.Name, "backend", b.Name,
					"override", *st.override, "weight", *b.Weight)
				st.override = nil
			}
			st.weight = *b.Weight
			if was == 0 && p.baseWeight(st) > 0 {
				st.upSince = now // back from weight 0, like an undrain: slow start
			}
			if b.Drain != st.cfgDrain {
				st.cfgDrain = b.Drain
				switch {
				case b.Drain && !st.drained:
					st.drained, st.drainedAt = true, now
				case !b.Drain && st.drained:
					// Undrained by the reload: it slow-starts, as with
					// Undrain.
					st.drained, st.upSince = false, now
				}
				// Drained already (by the operator): the drain and its
				// timeout go on from when it began.
			}
			st.check = netip.AddrPort{}
			if !checked {
				wasDown := st.health == HealthDown
				st.health, st.reason = HealthUnchecked, ""
				if wasDown {
					// Trusted again by a reload that ends its checks:
					// slow start, as a backend that comes up (comeBack,
					// as in setHealthLocked).
					p.comeBack(st, now)
				}
			} else {
				st.check = checkAddr(&v, &b)
				if st.health == HealthUnchecked {
					// A check added by a reload: the backend served
					// unchecked until now; keep it serving until a verdict.
					st.health, st.reason = HealthUnknown, "not checked yet"
					// Its first verdict does not hold a converged
					// instance back as converging (converge.go): the
					// check is new, not the instance.
					st.initial = st.initial && initial
				}
			}
		}
	}
	for k := range p.backends {
		if !seen[k] {
			delete(p.backends, k)
		}
	}
}

// carryRenamedVIPs moves the backend states of a VIP that cfg renames (the
// same address, port and protocol under another name: also a name written
// for a VIP that had none, whose name was its key) to the new name, before
// syncBackends matches states by name. The dataplane keeps such a VIP's id,
// table and flows (it knows VIPs by key); without this its drains, weight
// overrides, health and passive state would be forgotten, every checked
// backend down again until checked.
//
// A state moves with its VIP's key only to a backend of the same name at
// the same address (the same server); one that would find another server
// there stays with its VIP's name if that VIP still has it: two VIPs that
// swap addresses, or a VIP moved onto the address of one the reload
// removes, keep their backends' states as a VIP moved to a free address
// does.
//
// It returns the checkers to carry, by check key: new to old, for the
// health checkers (syncHealthLocked), which keep their state across them
// too.
func (p *Plane) carryRenamedVIPs(old, cfg *config.Config) map[string]string {
	if old == nil {
		return nil
	}
	oldByKey := make(map[flow.VIPKey]string, len(old.VIPs))
	for i := range old.VIPs {
		oldByKey[old.VIPs[i].Key()] = old.VIPs[i].Name
	}
	// Every rename at once, by key: a swap (a <-> b), or a blue/green
	// switch (web -> web-old and web-new -> web in one reload), where
	// one VIP takes another's old name. Moving them one by one skipped a
	// VIP whose old name was taken and put the other's state over it:
	// the live VIP's backends down until checked, its flows moved, its
	// address withdrawn.
	renamed := map[string]string{} // new name -> old name
	for i := range cfg.VIPs {
		v := &cfg.VIPs[i]
		if was, ok := oldByKey[v.Key()]; ok && was != v.Name {
			renamed[v.Name] = was
		}
	}
	if len(renamed) == 0 {
		return nil
	}
	to := make(map[string]string, len(renamed)) // old name -> new name
	for n, was := range renamed {
		to[was] = n
	}
	addrOf := map[dataplane.BackendRef]netip.Addr{} // the backends of cfg
	for i := range cfg.VIPs {
		for _, b := range cfg.VIPs[i].Backends {
			addrOf[dataplane.BackendRef{VIP: cfg.VIPs[i].Name, Backend: b.Name}] = b.Address.Addr
		}
	}
	same := func(r dataplane.BackendRef, st *backendState) bool {
		a, ok := addrOf[r]
		return ok && a == st.addr
	}
	next := make(map[dataplane.BackendRef]*backendState, len(p.backends))
	from := map[string]string{}
	placed := map[dataplane.BackendRef]bool{}
	put := func(k, r dataplane.BackendRef, st *backendState) {
		st.vip = r.VIP
		next[r] = st
		placed[k] = true
		if k != r {
			from[checkKey(r)] = checkKey(k)
		}
	}
	// The same server under its VIP's key first, then under its VIP's
	// name, then what a rename carried before (syncBackends starts a
	// backend of another address afresh).
	for k, st := range p.backends {
		if n, ok := to[k.VIP]; ok {
			if r := (dataplane.BackendRef{VIP: n, Backend: k.Backend}); same(r, st) {
				put(k, r, st)
			}
		}
	}
	for k, st := range p.backends {
		if !placed[k] && next[k] == nil && same(k, st) {
			put(k, k, st)
		}
	}
	for k, st := range p.backends {
		if placed[k] {
			continue
		}
		if n, ok := to[k.VIP]; ok {
			if r := (dataplane.BackendRef{VIP: n, Backend: k.Backend}); next[r] == nil {
				put(k, r, st)
			}
		} else if _, taken := renamed[k.VIP]; !taken && next[k] == nil {
			put(k, k, st) // a VIP of another key that took this name starts afresh
		}
	}
	p.backends = next
	// Panic mode goes with its VIP too: keyed by the old name, a renamed
	// VIP in panic mode left it unseen by rebuildLocked (no panicOver: its
	// backends came back at slow_start_min), and panicUsing read false
	// for it until the next rebuild.
	panicked := make(map[string]bool, len(p.panicked))
	for n, on := range p.panicked {
		if _, moved := to[n]; !moved {
			panicked[n] = on
		}
	}
	for n, was := range renamed {
		panicked[n] = p.panicked[was]
	}
	p.panicked = panicked
	for n, was := range renamed {
		p.log.Info("VIP renamed: its backends keep their state", "from", was, "to", n)
	}
	return from
}

// saveBackends copies every backend's state, for restoreBackends to put
// back when a reload fails after syncBackends.
func (p *Plane) saveBackends() map[dataplane.BackendRef]backendState {
	out := make(map[dataplane.BackendRef]backendState, len(p.backends))
	for k, st := range p.backends {
		out[k] = *st
	}
	return out
}

// restoreBackends makes the backend states those saveBackends copied.
func (p *Plane) restoreBackends(saved map[dataplane.BackendRef]backendState) {
	p.backends = make(map[dataplane.BackendRef]*backendState, len(saved))
	for k, st := range saved {
		p.backends[k] = &st
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
			st := p.backends[dataplane.BackendRef{VIP: v.Name, Backend: b.Name}]
			if !p.panicCounts(st) {
				continue
			}
			total++
			if st.health != HealthDown && st.passive.until.IsZero() {
				healthy++
			}
		}
		panic := belowThreshold(healthy, total, c.PanicThreshold)
		panicked[v.Name] = panic
		for _, b := range v.Backends {
			k := dataplane.BackendRef{VIP: v.Name, Backend: b.Name}
			st := p.backends[k]
			st.timedOut = false
			w := p.baseWeight(st) * WeightScale
			eff := dataplane.Effective{Weight: w}
			down := st.health == HealthDown || !st.passive.until.IsZero()
			if !down {
				// Healthy again: flows panic mode placed here are
				// healthy flows now, whatever happens next (drained
				// too: the drained case below reads the mark).
				st.panicUsed, st.panicLeft = false, time.Time{}
			}
			switch {
			case st.drained:
				// No new flows; its tracked ones stay until the drain
				// times out, or leave at once if it is also down and the
				// VIP's on_down says move: a drain never keeps flows on a
				// dead backend that would leave it undrained.
				eff.Weight = 0
				if down {
					eff.Unhealthy = true
					eff.Down = v.OnDown == "move" && !st.panicUsed
				}
				if c.DrainTimeout > 0 && now.Sub(st.drainedAt) >= c.DrainTimeout {
					eff.Down, st.timedOut = true, true
				}
			case down && (!panic || st.awaitingVerdict()):
				// No new flows; whether the tracked ones leave is the
				// VIP's on_down, except for flows panic mode placed here.
				// Panic mode uses the backends its checks call down, not
				// those not checked yet (a reload added them): a reload
				// that more than doubled a pool put the VIP in panic
				// and sent new flows to backends no check had seen.
				eff = dataplane.Effective{Weight: 0, Down: v.OnDown == "move" && !st.panicUsed, Unhealthy: true}
			default:
				// Recorded here, where panic mode is decided
				// (rebuildLocked puts the marks back if the build fails).
				switch {
				case !panic || !down:
				case !st.panicUsed:
					st.panicLate = 0
					if !st.outSince.IsZero() && now.After(st.outSince) {
						st.panicLate = now.Sub(st.outSince)
					}
				case !st.panicLeft.IsZero():
					// Used by an earlier panic mode and out since it
					// ended (panicUsed stays until it is back): its share
					// went on decaying meanwhile, as the time it was out
					// before that panic mode did. Forgotten, a backend
					// dead for an hour between two panic modes came back
					// at full weight.
					if now.After(st.panicLeft) {
						st.panicLate += now.Sub(st.panicLeft)
					}
					st.panicLeft = time.Time{}
				}
				st.panicUsed = panic && down
				if ss := c.SlowStart; ss > 0 && !st.upSince.IsZero() && w > 0 {
					// Panic mode gives every backend its full weight, one
					// ramping too (ramped, it got less than the dead ones).
					// Its ramp goes on by the clock meanwhile, so that
					// after panic mode it stands where it stands on an
					// instance that never entered panic mode: each
					// instance judges by its own checks, and a blip that
					// only one of them saw (its checks ran at the wrong
					// moment) must not leave their tables apart.
					if el := now.Sub(st.upSince); el < ss && !panic {
						frac := p.rampPosition(st.upSince, now)
						eff.Weight = max(1, int(math.Ceil(float64(w)*frac)))
						eff.Ramping, ramping = true, true
					}
				}
			}
			over[k] = eff
		}
	}
	return over, panicked, ramping
}

// belowThreshold reports whether healthy of total is fewer than the share
// t. It divides rather than multiplies: healthy/total and a threshold
// written in decimal round to the same float64 when they are equal, where
// t × total may round above the integer (0.28 × 25 is 7.000000000000001)
// and put a VIP with exactly the threshold healthy in panic mode.
func belowThreshold(healthy, total int, t float64) bool {
	return total > 0 && float64(healthy)/float64(total) < t
}

// panicCounts reports whether st counts in its VIP's panic threshold
// (effective, lastHealthyLocked): not drained, not at weight 0, and not
// added by a reload and unchecked yet (awaitingVerdict).
func (p *Plane) panicCounts(st *backendState) bool {
	return !st.drained && p.baseWeight(st) != 0 && !st.awaitingVerdict()
}

func (p *Plane) baseWeight(st *backendState) int {
	if st.override != nil {
		return *st.override
	}
	return st.weight
}

// panicUsing reports whether panic mode is using st, down or ejected, at
// full weight now: its VIP is in panic mode in the published tables. A
// backend panic mode used (panicUsed) keeps its flows when panic mode
// ends, but from then on it is out of the table like any down backend,
// and comes back with a slow start.
func (p *Plane) panicUsing(st *backendState) bool {
	return st.panicUsed && p.panicked[st.vip]
}

// comeBack starts st's slow start as it becomes usable again at now (back
// up, its ejection over, its checks ended by a reload). A backend panic
// mode is using at full weight keeps its weight: ramped from
// slow_start_min, it would get less than the backends still failing. One
// panic mode stopped using at panicLeft lost its share as it would have
// gained it, at the ramp's rate: it comes back at the ramp's position it
// had then (full weight, or where a ramp it was on had come by the clock:
// effective) less (now - panicLeft) / slow_start and less the time it had
// been out before panic mode began using it (panicLate), and ramps on from
// there. A slow start begun since (an undrain, a weight back from 0) is
// the position then.
//
// The decay is what keeps the fleet's tables together after a blip that
// every instance saw. Each instance judges the backends by its own checks,
// so the order of two verdicts close in time (this backend up, panic mode
// over) differs between instances. With a cliff at the moment panic mode
// ends, one instance gave the backend its full weight and another ramped
// it from 10% for the whole slow start; now a backend back 44 ms after
// panic mode ended (slow_start 30s) is at 99.85% of its weight, and the two
// tables meet again 44 ms later. One that stays down for slow_start or
// longer ramps from slow_start_min, as any backend back up does.
func (p *Plane) comeBack(st *backendState, now time.Time) {
	if p.panicUsing(st) {
		// Full weight while panic mode lasts (effective suspends ramps),
		// but a backend that was out for long before panic mode used it
		// has no share to keep afterwards: its ramp stands where it
		// stood less the time it was out before panic mode (an instance
		// that never entered panic mode ramps it from its verdict).
		if ss := p.cfg.Control.SlowStart; ss > 0 && st.panicLate > 0 {
			at := p.rampPosition(st.upSince, now) - float64(st.panicLate)/float64(ss)
			st.upSince, st.panicLate = p.rampAt(at, now), 0
		}
		return
	}
	if st.health == HealthDown || !st.passive.until.IsZero() {
		// Still out (its checks pass but it is ejected, or its ejection
		// ended and its checks fail): it comes back when the other ends,
		// and that comeBack must read upSince as it stood when panic mode
		// left it, not a position decayed once already.
		return
	}
	before, used, left, late := st.upSince, st.panicUsed, st.panicLeft, st.panicLate
	st.upSince = now
	st.outSince, st.panicLate = time.Time{}, 0
	// Back: what panic mode did with it is spent (effective clears it at
	// the next rebuild; one that goes down again before it is a backend
	// that came up and went down, not one panic mode still owes a decay).
	st.panicUsed, st.panicLeft = false, time.Time{}
	ss := p.cfg.Control.SlowStart
	if !used || left.IsZero() || ss <= 0 || now.Before(left) {
		return
	}
	// Its ramp's position when panic mode stopped using it, less the time
	// since and the time it was out before panic mode used it (late: its
	// share had decayed by that much already; dead for slow_start or
	// longer, none is left).
	at := p.rampPosition(before, left) - float64(now.Sub(left)+late)/float64(ss)
	st.upSince = p.rampAt(at, now)
}

// rampPosition is where a ramp begun at upSince stands at t: the share of
// its weight, from slow_start_min to 1 (1: no ramp, or one that has ended).
// slow_start must be on.
func (p *Plane) rampPosition(upSince, t time.Time) float64 {
	if el := t.Sub(upSince); !upSince.IsZero() && el < p.cfg.Control.SlowStart {
		return math.Max(p.cfg.Control.SlowStartMin, float64(el)/float64(p.cfg.Control.SlowStart))
	}
	return 1
}

// rampAt is the upSince of a ramp standing at position at now; at 0 or
// below, a ramp that starts now (from slow_start_min). slow_start must be
// on.
func (p *Plane) rampAt(at float64, now time.Time) time.Time {
	if at <= 0 {
		return now
	}
	return now.Add(-time.Duration(at * float64(p.cfg.Control.SlowStart)))
}

// ErrNotFound is returned for a VIP or backend name that does not exist.
var ErrNotFound = errors.New("not found")

func (p *Plane) backend(vip, name string) (*backendState, error) {
	st := p.backends[dataplane.BackendRef{VIP: vip, Backend: name}]
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
		st.drained, st.drainedAt = true, p.now()
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
		st.drained, st.upSince = false, p.now()
		p.log.Info("backend undrained", "vip", vip, "backend", name)
	}
	return p.rebuildLocked()
}

// SetWeight overrides a backend's configured weight until the next reload
// that changes it, or its address (0..65535; 0 stops new flows like a
// drain).
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
	if p.baseWeight(st) == 0 && w > 0 {
		st.upSince = p.now() // back from weight 0, like an undrain: slow start
	}
	st.override = &w
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
	p.setHealthLocked(st, up, reason)
	return nil
}

// setHealthLocked is SetHealth for the backend st.
func (p *Plane) setHealthLocked(st *backendState, up bool, reason string) {
	vip, name := st.vip, st.name
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
		return
	}
	was := st.health
	st.health = h
	if !up && st.passive.until.IsZero() {
		st.outSince = p.now() // out of the table from now (not already ejected)
	}
	if up {
		// Slow start is for a backend that recovers (or was added and
		// never served), not for one that served all along: the first
		// verdict after this instance started (a fresh instance must
		// build the same table as the rest of the fleet at once), or the
		// first of a check a reload added to a serving backend (unknown
		// is routed like up; ramping it again would cut its weight to
		// slow_start_min at once).
		// Nor for one panic mode was using at full weight while down,
		// and one it stopped using only just now ramps from near where
		// it stood (comeBack).
		if was == HealthDown {
			p.comeBack(st, p.now())
		}
		st.everUp = true
		p.log.Info("backend up", "vip", vip, "backend", name, "reason", reason)
	} else {
		p.log.Warn("backend down", "vip", vip, "backend", name, "reason", reason)
	}
	p.Kick()
}

// APIChanges lists, sorted, the drains, undrains and weights in force
// that the operator made through the API and the config does not have
// ("web/be2: drained", "web/be3: weight 1, the config's 3"). They end
// with the process: a restart starts from the config.
func (p *Plane) APIChanges() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, st := range p.backends {
		id := st.vip + "/" + st.name
		switch {
		case st.drained && !st.cfgDrain:
			out = append(out, id+": drained")
		case !st.drained && st.cfgDrain:
			out = append(out, id+": undrained")
		}
		if st.override != nil && *st.override != st.weight {
			out = append(out, fmt.Sprintf("%s: weight %d, the config's %d", id, *st.override, st.weight))
		}
	}
	slices.Sort(out)
	return out
}
