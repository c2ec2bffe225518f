package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/flow"
	"github.com/fulcrumlb/fulcrum/maglev"
	"github.com/fulcrumlb/fulcrum/packet"
	"github.com/fulcrumlb/fulcrum/punt"
	"github.com/fulcrumlb/fulcrum/sched"
)

// Limits of one snapshot. Counter arrays are sized by them, so they are
// deliberately modest; raise them together with the memory budget.
const (
	// MaxVIPs bounds the VIP ids (conntrack stores a VIP id in 16 bits).
	MaxVIPs = conntrack.MaxVIPs
	// MaxBackends bounds the backend ids across all VIPs. Per-backend
	// counters cost 16 bytes per id per worker.
	MaxBackends = conntrack.MaxBackends
)

// Backend is one backend of one VIP as the dataplane sees it. The same
// server behind two VIPs is two Backends (each VIP weighs it separately).
type Backend struct {
	ID     uint32 // index in Services.Backends; stable while the backend exists
	Gen    uint32 // incarnation of ID: conntrack entries pinned to an older Gen are stale
	VIP    uint16 // owning VIP's id
	Name   string
	Addr   netip.Addr
	Weight int  // effective weight in the VIP's table (0: no new flows)
	Config int  // configured weight
	Down   bool // established flows must leave it too (health down, drain timed out)
	// Unhealthy: its checks say down (or passive checks ejected it), even
	// where on_down "keep" leaves its established flows on it (Down
	// false). A SYN on such a flow starts a connection elsewhere: the
	// pin's backend may be dead (selectBackend).
	Unhealthy bool
	Target    encap.Backend // pre-resolved tunnel destination
	// Hdr is Target's tunnel headers for the VIP's kind and family,
	// prepared with the snapshot (encap.Header): both paths encapsulate
	// through it when the packet carries no second chance.
	Hdr encap.Header
}

// Holder is the backend that holds id in incarnation gen (a conntrack
// entry's pin, or a count kept with one), or nil when id has gone or
// belongs to a later backend since (Backend.Gen).
func (s *Services) Holder(id, gen uint32) *Backend {
	if int(id) < len(s.Backends) {
		if be := s.Backends[id]; be != nil && be.Gen == gen {
			return be
		}
	}
	return nil
}

// VIP is one service with its current Maglev table.
type VIP struct {
	ID       uint16
	Gen      uint32      // incarnation of ID: counters of an older Gen are another VIP's
	Key      flow.VIPKey // what identifies the VIP across reloads
	Name     string
	Addr     netip.Addr
	Port     uint16 // 0: every port
	Proto    uint8
	Encap    encap.Kind
	Table    *maglev.Table // nil when no backend may take new flows
	Backends []uint32      // Table's backend index -> Backend id
	Members  []uint32      // every backend id of the VIP, in config order
	Sched    sched.Kind    // how new flows pick a backend (Maglev: Table)
	SchedOpt sched.Options
	Hash     flow.Fields // what the fleet hash covers (hashfields.go)
	QUIC     *quicRoutes // nil: QUIC routing off (quic.go)

	SecondChance time.Duration // the second chance's window; 0: off (secondchance.go)
	Prev         *PrevTable    // the table before the last changes, while SecondChance allows
	TableSince   time.Time     // when Table became the VIP's table (its last change)
	// Ramping: a backend of the VIP is in a slow start, so Table is one
	// of its steps; a step never becomes the previous table (prevTable).
	Ramping bool
	// HealthTunnel: the VIP's backends are checked through the tunnel
	// (healthpath.go).
	HealthTunnel bool
}

// vipKey finds a VIP by destination; port 0 is the every-port VIP. The
// address is held as two words so the fast path compares three words.
type vipKey struct {
	a, b uint64 // the 16-byte (IPv4-mapped) address, little-endian words
	pp   uint64 // port<<8 | protocol
}

func makeVIPKey(addr *[16]byte, port uint16, proto uint8) vipKey {
	return vipKey{
		a:  binary.LittleEndian.Uint64(addr[0:8]),
		b:  binary.LittleEndian.Uint64(addr[8:16]),
		pp: uint64(port)<<8 | uint64(proto),
	}
}

// Services is an immutable snapshot of every VIP and backend. The control
// plane builds a new one off to the side and publishes it with one atomic
// pointer store; each worker loads the pointer once per burst.
//
// It is everything a worker's fast path reads that the control plane may
// change: the tables, the encapsulator (outer addresses, TTL, DF, MTU, GUE
// port) and the next hop's MACs. One store publishes a reload's tables,
// tunnel settings and gateway together, so no burst sees half of a reload.
type Services struct {
	Gen      uint64
	VIPs     []*VIP              // by id; nil where an id is free
	Backends []*Backend          // by id; nil where an id is free
	Enc      *encap.Encapsulator // built with the snapshot: every Backend.Target comes from it
	NextHop  NextHop             // where tunnelled packets go on the wire

	byKey   map[vipKey]*VIP
	index   vipIndex                // byKey for the fast path
	addrIdx vipIndex                // every VIP address, as (addr, 0, 0)
	fragVIP map[vipKey]*VIP         // (addr, proto) -> the VIP fragments go to (see fragment policy)
	ids     map[backendIdent]uint32 // -> id, for the next build
	gens    []uint32                // last generation of every id ever used
	vipGens []uint32                // the same for VIP ids
	vipIDs  map[flow.VIPKey]uint16  // -> id, for the next build
	health  healthSlots             // checks through the tunnel (healthpath.go)
	// The LB's own addresses (Enc's outer sources) in flow.Tuple's form,
	// for isSelf; an unset one is all zero, which no tuple's source
	// reaching isSelf is (martian refuses it first).
	self4, self6 [16]byte
	// The exception path's budgets and classes (punt.go): the limits, the
	// BGP neighbours' addresses and every backend's, in flow.Tuple's form.
	punt         punt.Rates
	peers        [][16]byte
	backendAddrs map[[16]byte]struct{}
}

// NumBackendIDs is one past the highest backend id in use.
func (s *Services) NumBackendIDs() int { return len(s.Backends) }

// Effective is what the control plane decided for one backend: its weight
// in the table and whether its established flows must move.
type Effective struct {
	Weight    int
	Down      bool
	Unhealthy bool // Backend.Unhealthy
	// Ramping: Weight is a step of a slow start, not the backend's
	// weight (VIP.Ramping).
	Ramping bool
}

// Overrides holds the backends' effective state; backends not in it take
// their configured weight and are up.
type Overrides map[BackendRef]Effective

// BackendRef names a backend as the operator does: by its VIP's name and
// its own. It is a comparable value, the key of Overrides and of the
// control plane's backend state.
type BackendRef struct {
	VIP, Backend string
}

// String is "vip/backend", as logs and the admin API's paths spell it
// (neither name may contain a '/', but a VIP's default name may: split at
// the last '/').
func (r BackendRef) String() string { return r.VIP + "/" + r.Backend }

// backendIdent is what keeps a backend's id across snapshots: its VIP's
// key (the VIP may be renamed), its name within the VIP and its address.
// A reload that gives a name another address names another server: it
// gets a new id and incarnation, as a removed backend and an added one
// would, so that its tracked flows choose again instead of following the
// name to a server that never saw them.
type backendIdent struct {
	vip  flow.VIPKey
	name string
	addr netip.Addr
}

// VIPSpec is one VIP as the control plane wants it in a snapshot: the
// configuration already mapped to dataplane terms and the backends' weights
// already decided (health, drain, slow start).
type VIPSpec struct {
	Key       flow.VIPKey // identity across reloads: keeps the VIP's id
	Name      string
	Addr      netip.Addr
	Port      uint16 // 0: every port
	Proto     uint8  // 6 or 17
	Encap     encap.Kind
	Sched     sched.Kind
	SchedOpt  sched.Options
	TableSize uint64 // Maglev table size (prime)
	Hash      flow.Fields
	Backends  []BackendSpec
	QUIC      *packet.QUICConfig // non-nil: route QUIC short headers by server id (quic.go)

	SecondChance time.Duration // window of the previous table (secondchance.go); 0: off
	// HealthTunnel: the backends are checked through the tunnel, each
	// from its own source port (Services.HealthPort).
	HealthTunnel bool
}

// BackendSpec is one backend of a VIPSpec.
type BackendSpec struct {
	Name   string // identity within the VIP: keeps the backend's id across reloads
	Addr   netip.Addr
	Config int       // configured weight
	Eff    Effective // weight in the table, and whether its flows must move
	// QUICID is the server id the backend writes in its QUIC connection
	// IDs, if HasQUICID (a QUIC VIP's backend).
	QUICID    uint64
	HasQUICID bool
}

// NewServices builds a snapshot of vips whose packets enc tunnels to nh.
// Ids of VIPs and backends that also exist in prev are kept (so conntrack
// entries stay valid across a reload); a backend that is new gets a free
// id with a new generation. A VIP whose backends all have effective weight
// 0 gets no table: its new flows are dropped (no-backend) while established
// flows keep their backends.
func NewServices(prev *Services, enc *encap.Encapsulator, nh NextHop, vips []VIPSpec) (*Services, error) {
	return NewServicesAt(prev, enc, nh, vips, time.Now())
}

// NewServicesAt is NewServices at the time now, which dates the changes
// of the VIPs' tables (the second chance's window).
func NewServicesAt(prev *Services, enc *encap.Encapsulator, nh NextHop, vips []VIPSpec, now time.Time) (*Services, error) {
	if enc == nil {
		return nil, errors.New("services: no encapsulator")
	}
	s := &Services{
		Enc:     enc,
		NextHop: nh,
		byKey:   map[vipKey]*VIP{},
		fragVIP: map[vipKey]*VIP{},
		ids:     map[backendIdent]uint32{},
		vipIDs:  map[flow.VIPKey]uint16{},
	}
	var prevIDs map[backendIdent]uint32
	var prevVIPIDs map[flow.VIPKey]uint16
	if prev != nil {
		s.Gen = prev.Gen + 1
		prevIDs, prevVIPIDs = prev.ids, prev.vipIDs
		s.gens = append(s.gens, prev.gens...)
		s.vipGens = append(s.vipGens, prev.vipGens...)
	}
	// Keep the ids of what survives first, then hand out free ids.
	// Ids in use by the previous snapshot are not handed to anything new
	// in this one while other ids are free, so entries of a removed VIP or
	// backend can be told apart (and cleared) under their own number. Only
	// when every id the previous snapshot left unused is taken does a new
	// VIP or backend get one that it used for something this snapshot no
	// longer has (a backend's new incarnation, Gen, still tells its
	// entries from the old ones'): a configuration within MaxVIPs and
	// MaxBackends builds whatever configuration came before it, as it does
	// on a fresh instance; otherwise a reload near the limits that replaces
	// backends or VIPs would be refused on the instances that had the old
	// ones and run on the others, and the fleet's tables would differ.
	takenB, beforeB := map[uint32]bool{}, map[uint32]bool{}
	takenV, beforeV := map[uint16]bool{}, map[uint16]bool{}
	if prev != nil {
		for id, v := range prev.VIPs {
			if v != nil {
				beforeV[uint16(id)] = true
			}
		}
		for id, b := range prev.Backends {
			if b != nil {
				beforeB[uint32(id)] = true
			}
		}
	}
	for _, v := range vips {
		if id, ok := prevVIPIDs[v.Key]; ok {
			takenV[id] = true
		}
		for _, b := range v.Backends {
			if id, ok := prevIDs[backendIdent{v.Key, b.Name, b.Addr}]; ok {
				takenB[id] = true
			}
		}
	}
	var nextV, reuseV uint16
	var nextB, reuseB uint32
	freeV := func() (uint16, error) {
		for ; int(nextV) < MaxVIPs; nextV++ {
			if !takenV[nextV] && !beforeV[nextV] {
				takenV[nextV] = true
				return nextV, nil
			}
		}
		for ; int(reuseV) < MaxVIPs; reuseV++ {
			if !takenV[reuseV] {
				takenV[reuseV] = true
				return reuseV, nil
			}
		}
		return 0, fmt.Errorf("more than %d VIPs", MaxVIPs)
	}
	freeB := func() (uint32, error) {
		for ; nextB < MaxBackends; nextB++ {
			if !takenB[nextB] && !beforeB[nextB] {
				takenB[nextB] = true
				return nextB, nil
			}
		}
		for ; reuseB < MaxBackends; reuseB++ {
			if !takenB[reuseB] {
				takenB[reuseB] = true
				return reuseB, nil
			}
		}
		return 0, fmt.Errorf("more than %d backends in all", MaxBackends)
	}
	for _, cv := range vips {
		vk := cv.Key
		vid, ok := prevVIPIDs[vk]
		if !ok {
			var err error
			if vid, err = freeV(); err != nil {
				return nil, err
			}
			for int(vid) >= len(s.vipGens) {
				s.vipGens = append(s.vipGens, 0)
			}
			s.vipGens[vid]++ // a new incarnation of a possibly reused id
		}
		if err := cv.Hash.Validate(); err != nil {
			return nil, fmt.Errorf("vip %s: hash: %w", cv.Name, err)
		}
		v := &VIP{ID: vid, Gen: s.vipGens[vid], Key: vk, Name: cv.Name, Addr: cv.Addr, Port: cv.Port, Proto: cv.Proto, Encap: cv.Encap,
			Sched: cv.Sched, SchedOpt: cv.SchedOpt, HealthTunnel: cv.HealthTunnel, Hash: cv.Hash}
		s.vipIDs[vk] = vid
		var mb []maglev.Backend
		ids := map[string]uint32{}
		for _, cb := range cv.Backends {
			ident := backendIdent{vk, cb.Name, cb.Addr}
			id, ok := prevIDs[ident]
			if !ok {
				var err error
				if id, err = freeB(); err != nil {
					return nil, err
				}
				for int(id) >= len(s.gens) {
					s.gens = append(s.gens, 0)
				}
				s.gens[id]++ // a new incarnation of a possibly reused id
			}
			tgt, err := enc.Backend(cb.Addr)
			if err != nil {
				return nil, fmt.Errorf("vip %s: backend %q: %w", cv.Name, cb.Name, err)
			}
			b := &Backend{ID: id, Gen: s.gens[id], VIP: vid, Name: cb.Name, Addr: cb.Addr, Weight: cb.Eff.Weight, Config: cb.Config, Down: cb.Eff.Down, Unhealthy: cb.Eff.Unhealthy, Target: tgt}
			b.Hdr = enc.Prepare(cv.Encap, &b.Target, cv.Addr.Unmap().Is6())
			s.ids[ident] = id
			ids[cb.Name] = id
			setAt(&s.Backends, int(id), b)
			v.Members = append(v.Members, id)
			if cb.Eff.Weight > 0 {
				mb = append(mb, maglev.Backend{Key: cb.Name, Weight: uint32(cb.Eff.Weight)})
			}
		}
		if len(mb) > 0 {
			if old := sameTableInputs(prev, vid, vk, mb, ids, cv.TableSize); old != nil {
				// Maglev is a pure function of the keys, weights and
				// size: the previous table is this one, and a rebuild
				// for another VIP's change does not build it again.
				v.Table, v.Backends = old.Table, old.Backends
			} else {
				t, err := maglev.Build(mb, cv.TableSize)
				if err != nil {
					return nil, fmt.Errorf("vip %s: %w", cv.Name, err)
				}
				v.Table = t
				v.Backends = make([]uint32, t.Len())
				for i := range v.Backends {
					v.Backends[i] = ids[t.Backend(i).Key]
				}
			}
		}
		if cv.QUIC != nil {
			r, err := newQUICRoutes(&cv, ids)
			if err != nil {
				return nil, err
			}
			v.QUIC = r
		}
		v.SecondChance, v.TableSince = cv.SecondChance, now
		for i := range cv.Backends {
			v.Ramping = v.Ramping || cv.Backends[i].Eff.Ramping
		}
		if prev != nil && int(vid) < len(prev.VIPs) && prev.VIPs[vid] != nil && prev.VIPs[vid].Key == vk {
			// Only a VIP with the second chance on pays for the
			// comparison; one turned on later dates its table from then.
			if old := prev.VIPs[vid]; cv.SecondChance > 0 {
				// New hash fields move flows as a new table does
				// (README, "Hash fields").
				changed := tableChanged(old, v) || old.Hash != v.Hash
				if !changed {
					v.TableSince = old.TableSince
				}
				v.Prev = prevTable(prev, old, v, changed, cv.SecondChance, now)
			}
		}
		setAt(&s.VIPs, int(vid), v)
		a16 := v.Addr.As16()
		s.byKey[makeVIPKey(&a16, v.Port, v.Proto)] = v
		// Fragment policy: fragments after the first carry no ports, so they
		// go to the every-port VIP of their address and protocol if there is
		// one, otherwise to the VIP with the lowest port.
		fk := makeVIPKey(&a16, 0, v.Proto)
		if cur, ok := s.fragVIP[fk]; !ok || cur.Port != 0 && (v.Port == 0 || v.Port < cur.Port) {
			s.fragVIP[fk] = v
		}
	}
	s.index = newVIPIndex(s.byKey)
	addrs := map[vipKey]*VIP{}
	for k, v := range s.byKey {
		addrs[vipKey{a: k.a, b: k.b}] = v
	}
	s.addrIdx = newVIPIndex(addrs)
	if cfg := enc.Config(); cfg.SrcV4.IsValid() {
		s.self4 = cfg.SrcV4.As16()
	}
	if cfg := enc.Config(); cfg.SrcV6.IsValid() {
		s.self6 = cfg.SrcV6.As16()
	}
	if err := s.health.assign(prev, s); err != nil {
		return nil, err
	}
	s.punt = defaultPunt
	s.backendAddrs = make(map[[16]byte]struct{}, len(s.Backends))
	for _, b := range s.Backends {
		if b != nil {
			s.backendAddrs[b.Addr.Unmap().As16()] = struct{}{}
		}
	}
	return s, nil
}

// WithNextHop is s with the next hop nh: the same tables and encapsulator,
// published when only the neighbour changed (the kernel resolved a gateway).
func (s *Services) WithNextHop(nh NextHop) *Services {
	c := *s
	c.NextHop = nh
	return &c
}

func setAt[T any](s *[]*T, i int, v *T) {
	for len(*s) <= i {
		*s = append(*s, nil)
	}
	(*s)[i] = v
}

// lookup finds the VIP for a destination, trying the exact port first and
// then the every-port VIP.
func (s *Services) lookup(addr *[16]byte, port uint16, proto uint8) *VIP {
	k := makeVIPKey(addr, port, proto)
	if v := s.index.get(&k); v != nil {
		return v
	}
	if port != 0 {
		k.pp = uint64(proto)
		return s.index.get(&k)
	}
	return nil
}

// isVIPAddr reports whether addr is any VIP's address.
func (s *Services) isVIPAddr(addr *[16]byte) bool {
	k := makeVIPKey(addr, 0, 0)
	return s.addrIdx.get(&k) != nil
}

// LookupVIP is lookup for the slow path (admin API, tests).
func (s *Services) LookupVIP(addr netip.Addr, port uint16, proto uint8) *VIP {
	a := addr.As16() // IPv4 in its mapped form, as in flow.Tuple
	return s.lookup(&a, port, proto)
}

// Loads are the control plane's view of every backend's load, by backend
// id, published about once a second for the schedulers other than Maglev:
// active flows summed over all workers and a latency average (peak EWMA of
// handshake times and health-check round trips).
type Loads struct {
	Active  []int64
	Latency []sched.EWMA
	// Gen is the incarnation (Backend.Gen) each id's figures belong to: a
	// snapshot published since may have given the id to a new backend,
	// which must not inherit them. Nil: the figures belong to the
	// snapshot's backends (tests).
	Gen []uint32
}

// For reports whether the figures of id belong to be's incarnation.
func (l *Loads) For(id uint32, be *Backend) bool {
	return int(id) < len(l.Active) && (l.Gen == nil || (int(id) < len(l.Gen) && be != nil && l.Gen[id] == be.Gen))
}

// sameTableInputs returns the VIP of prev under id vid and key vk if its
// table was built from exactly mb (keys and weights, in any order) at
// size m, with the same backend ids: its table and index are the ones a
// build would give. nil otherwise.
func sameTableInputs(prev *Services, vid uint16, vk flow.VIPKey, mb []maglev.Backend, ids map[string]uint32, m uint64) *VIP {
	if prev == nil || int(vid) >= len(prev.VIPs) {
		return nil
	}
	old := prev.VIPs[vid]
	if old == nil || old.Key != vk || old.Table == nil || uint64(old.Table.Size()) != m || old.Table.Len() != len(mb) || len(old.Backends) != len(mb) {
		return nil
	}
	// old.Table's backends are in key order, and keys are unique.
	at := make(map[string]int, len(mb))
	for i := range old.Table.Len() {
		at[old.Table.Backend(i).Key] = i
	}
	for _, b := range mb {
		i, ok := at[b.Key]
		if !ok || old.Table.Backend(i).Weight != b.Weight || old.Backends[i] != ids[b.Key] {
			return nil
		}
	}
	return old
}
