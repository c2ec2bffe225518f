package health

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultEventBuffer is the capacity of the Manager's event channel; beyond
// it, events are coalesced per backend (see the package doc).
const DefaultEventBuffer = 64

// ErrClosed is returned by Set after Close.
var ErrClosed = errors.New("health manager closed")

// ManagerOptions tune a Manager; the zero value is ready to use.
type ManagerOptions struct {
	// EventBuffer is the capacity of the Events channel; 0 means
	// DefaultEventBuffer.
	EventBuffer int
	// NewProber builds the prober of a target; nil means NewTargetProber
	// (tests plug their own in here). Checkers that share a run of checks
	// (ShareKey) probe with the prober of the first of them started,
	// also after it leaves.
	NewProber func(key string, t Target) (Prober, error)
}

// Manager runs one Checker per backend key and follows config changes.
type Manager struct {
	newProber func(string, Target) (Prober, error)
	events    *coalescer

	mu       sync.Mutex // serialises Set and Close; guards checkers
	ctx      context.Context
	cancel   context.CancelFunc
	checkers map[string]*running
	shares   map[Target]*share // by ShareKey: the probes the checkers take their answers from
	closed   bool
	lastID   uint64           // the last Event.Checker given
	local    atomic.Uint64    // checks this host failed (LocalFailures)
	now      func() time.Time // the shares' clock; nil: time.Now (tests set it)
}

type running struct {
	target Target
	c      *Checker
	share  *share
}

// NewManager returns a Manager with no targets.
func NewManager(opts ManagerOptions) *Manager {
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		newProber: opts.NewProber,
		events:    newCoalescer(orDefault(opts.EventBuffer, DefaultEventBuffer)),
		ctx:       ctx,
		cancel:    cancel,
		checkers:  map[string]*running{},
		shares:    map[Target]*share{},
	}
	if m.newProber == nil {
		m.newProber = func(_ string, t Target) (Prober, error) { return NewTargetProber(t) }
	}
	go m.events.run()
	return m
}

func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// Set makes targets the complete set of checked backends. Every target is
// validated first; if one is bad, Set changes nothing and returns an error
// that names its key and wraps ErrConfig. A target equal to the running
// one keeps its checker and state; one whose config changed at the same
// address is restarted with the old state; one whose address changed, and
// every new one, starts afresh (Unknown, or Up with StartUp); removed ones
// are stopped, and Set returns once their goroutines have ended. New
// checkers' initial states are in States when Set returns; events report
// changes from there.
func (m *Manager) Set(targets map[string]Target) error { return m.SetRenamed(targets, nil) }

// SetRenamed is Set where some checkers were renamed: from maps a new key
// to the key its checker ran under (a VIP renamed by a reload, its
// backends unchanged). Such a checker is restarted under its new key with
// the old one's state (flap ejection, counts, round trips), as a changed
// config at the same address is; events of the old key still pending are
// dropped.
func (m *Manager) SetRenamed(targets map[string]Target, from map[string]string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	type plan struct {
		key  string
		c    *Checker
		prev *running // changed config at the same address: inherit
	}
	var starts []plan
	replaced := map[string]bool{} // keys whose running checker a plan replaces
	for _, key := range sortedKeys(targets) {
		t := targets[key]
		// The checker whose run this target continues: its own key's, or
		// for a renamed one the old key's (also in a swap, where the old
		// key now names another VIP's backend).
		src := key
		if was, ok := from[key]; ok {
			src = was
		}
		old, ok := m.checkers[src]
		if ok && src == key && old.target == t {
			continue
		}
		if err := t.Validate(); err != nil {
			return fmt.Errorf("health check of %q: %w", key, err)
		}
		p, err := m.newProber(key, t)
		if err != nil {
			return fmt.Errorf("health check of %q: %w", key, err)
		}
		c, err := NewChecker(key, t, p, m.events.push)
		if err != nil {
			return err
		}
		pl := plan{key: key, c: c}
		if ok && old.target.Addr == t.Addr {
			pl.prev = old
		}
		if pl.prev != nil {
			c.id = pl.prev.c.id // the same run of checks goes on
		} else {
			m.lastID++
			c.id = m.lastID
		}
		starts = append(starts, pl)
		replaced[key] = true
	}
	var stops []*running
	for key, r := range m.checkers {
		if _, ok := targets[key]; !ok || replaced[key] {
			stops = append(stops, r)
			delete(m.checkers, key)
		}
	}
	// Stop first, so a replaced checker's final state is what its
	// successor inherits. Cancelling a share left without members aborts
	// its check in flight.
	var ended []*share
	for _, r := range stops {
		if r.share.remove(r.c) {
			r.share.cancel()
			ended = append(ended, r.share)
			delete(m.shares, r.share.key)
		}
	}
	renamedAway := map[string]bool{}
	for _, was := range from {
		renamedAway[was] = true
	}
	for _, s := range ended {
		<-s.done
	}
	for _, r := range stops {
		if t, kept := targets[r.c.key]; !kept || r.target.Addr != t.Addr || renamedAway[r.c.key] || from[r.c.key] != "" {
			m.events.drop(r.c.key) // nobody wants a gone backend's pending change, nor a renamed one's under its old key
		}
	}
	for _, pl := range starts {
		if pl.prev != nil {
			pl.c.inherit(pl.prev.c)
		}
		m.checkers[pl.key] = m.start(pl.c)
	}
	return nil
}

// start makes c take the answers of the checks of its ShareKey, started
// for it if none run yet.
func (m *Manager) start(c *Checker) *running {
	k := ShareKey(c.target)
	s := m.shares[k]
	if s == nil {
		s = newShare(m.ctx, k, c, &m.local)
		if m.now != nil {
			s.now = m.now
		}
		m.shares[k] = s
	} else {
		s.add(c)
	}
	return &running{target: c.target, c: c, share: s}
}

// LocalFailures counts the checks this host failed to make (out of file
// descriptors, socket buffers or memory: the backend was never asked),
// which no checker judged.
func (m *Manager) LocalFailures() uint64 { return m.local.Load() }

// Probes is how many checks run a round: one for each set of checkers
// that ask the same thing of the same address (fewer than the checked
// backends when VIPs share backends).
func (m *Manager) Probes() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.shares)
}

func sortedKeys(m map[string]Target) []string { return slices.Sorted(maps.Keys(m)) }

// States returns a snapshot of every backend's status, by key.
func (m *Manager) States() map[string]Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]Status, len(m.checkers))
	for k, r := range m.checkers {
		out[k] = r.c.Status()
	}
	return out
}

// Status returns one backend's status.
func (m *Manager) Status(key string) (Status, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.checkers[key]
	if !ok {
		return Status{}, false
	}
	return r.c.Status(), true
}

// CheckerID is the Event.Checker of the running checker of key; ok is
// false when key is not checked. An event of key with another Checker
// comes from a checker that Set has stopped since (the backend was
// removed, moved or its check turned off, then checked again): it says
// nothing of the backend as it is checked now.
func (m *Manager) CheckerID(key string) (id uint64, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.checkers[key]
	if !ok {
		return 0, false
	}
	return r.c.id, true
}

// Events returns the channel of state changes. It is closed by Close. An
// event may still arrive for a backend that Set has just removed (it was
// already in the channel): consumers ignore keys they do not know.
func (m *Manager) Events() <-chan Event { return m.events.out }

// Close stops every checker, waits for their goroutines and closes the
// Events channel; pending events are dropped. It is safe to call twice.
func (m *Manager) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	m.closed = true
	m.cancel()
	for k, s := range m.shares {
		<-s.done
		delete(m.shares, k)
	}
	clear(m.checkers)
	m.events.close()
}

// coalescer moves events from checkers to a buffered channel without ever
// blocking a checker. One event per key waits beside the channel; a newer
// change of the same key is merged into it.
type coalescer struct {
	out  chan Event
	wake chan struct{}
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	pending map[string]*Event
	order   []string // keys of pending, oldest first
}

func newCoalescer(buffer int) *coalescer {
	return &coalescer{
		out:     make(chan Event, buffer),
		wake:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		pending: map[string]*Event{},
	}
}

// push queues e; it never blocks.
func (q *coalescer) push(e Event) {
	q.mu.Lock()
	if p, ok := q.pending[e.Key]; ok {
		merged := e
		merged.Old = p.Old
		merged.Coalesced = p.Coalesced + e.Coalesced
		*p = merged
	} else {
		q.pending[e.Key] = &e
		q.order = append(q.order, e.Key)
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// drop forgets the pending event of key.
func (q *coalescer) drop(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.pending[key]; !ok {
		return
	}
	delete(q.pending, key)
	for i, k := range q.order {
		if k == key {
			q.order = append(q.order[:i], q.order[i+1:]...)
			break
		}
	}
}

// next takes the oldest pending event.
func (q *coalescer) next() (Event, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.order) == 0 {
		return Event{}, false
	}
	k := q.order[0]
	q.order = q.order[1:]
	e := *q.pending[k]
	delete(q.pending, k)
	return e, true
}

// run forwards pending events to out until close; it is the only sender.
func (q *coalescer) run() {
	defer close(q.done)
	for {
		select {
		case <-q.wake:
		case <-q.stop:
			return
		}
		for {
			e, ok := q.next()
			if !ok {
				break
			}
			select {
			case q.out <- e:
			case <-q.stop:
				return
			}
		}
	}
}

// close stops the forwarder and closes out.
func (q *coalescer) close() {
	close(q.stop)
	<-q.done
	close(q.out)
}
