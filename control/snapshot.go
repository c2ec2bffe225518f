package control

import (
	"fmt"
	"net/netip"
	"strconv"

	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/flow"
)

// This file is the one place where the configuration becomes what the
// dataplane runs: the snapshot the workers load once per burst (tables,
// encapsulator, next hop) and the start-up settings of the engine. The
// dataplane itself knows nothing of package config.

// NewEncapsulator makes the encapsulator the [dataplane] section
// describes; package config decoded it into encap.Config.
func NewEncapsulator(cfg *config.Config) (*encap.Encapsulator, error) {
	e, err := encap.New(cfg.Dataplane.Config)
	if err != nil {
		return nil, fmt.Errorf("%s: dataplane: %w", cfg.File, err)
	}
	return e, nil
}

// StaticNextHop is the configured next_hop_mac as a next hop for both
// families; ok is false when none is configured (the gateways' MACs come
// from the kernel's neighbour table).
func StaticNextHop(cfg *config.Config) (nh dataplane.NextHop, ok bool) {
	d := &cfg.Dataplane
	if !d.NextHopMAC.Set {
		return nh, false
	}
	return dataplane.NextHop{MAC4: d.NextHopMAC.HW, MAC6: d.NextHopMAC.HW, Has4: true, Has6: true}, true
}

// VIPSpecs maps the [[vip]] sections to the dataplane's terms, with every
// backend's effective state from over (backends not in it take their
// configured weight and are up).
func VIPSpecs(cfg *config.Config, over dataplane.Overrides) []dataplane.VIPSpec {
	out := make([]dataplane.VIPSpec, 0, len(cfg.VIPs))
	for _, cv := range cfg.VIPs {
		kind := cfg.Dataplane.Encap
		if cv.Encap != nil { // always, after config.Parse
			kind = *cv.Encap
		}
		v := dataplane.VIPSpec{Key: cv.Key(), Name: cv.Name, Addr: cv.Address.Addr, Port: uint16(cv.Port), Proto: cv.Proto(),
			Encap: kind, Sched: cv.Scheduler, SchedOpt: cv.Options, TableSize: uint64(cv.TableSize),
			HealthTunnel: healthEnabled(cfg, &cv) && cv.Health.Tunnelled(), Hash: cv.HashFields()}
		if cv.QUIC {
			q := cv.QUICConfig
			v.QUIC = &q
		}
		if cv.SecondChance != nil && *cv.SecondChance && kind != encap.IPIP { // ipip has no field for it
			v.SecondChance = cfg.Dataplane.SecondChanceWindow // docs/second-chance.md
		}
		for _, cb := range cv.Backends {
			w := *cb.Weight
			eff, ok := over[dataplane.BackendRef{VIP: cv.Name, Backend: cb.Name}]
			if !ok {
				eff = dataplane.Effective{Weight: w}
			}
			bs := dataplane.BackendSpec{Name: cb.Name, Addr: cb.Address.Addr, Config: w, Eff: eff}
			if cb.QUICID != nil {
				bs.QUICID, bs.HasQUICID = uint64(*cb.QUICID), true
			}
			v.Backends = append(v.Backends, bs)
		}
		out = append(out, v)
	}
	return out
}

// BuildServices builds the snapshot a validated configuration describes:
// its tables (keeping the ids of prev, see dataplane.NewServices), its
// encapsulator and next hop nh. The daemon's control plane publishes it;
// `fulcrum check` and tests build one to validate a configuration.
func BuildServices(cfg *config.Config, prev *dataplane.Services, over dataplane.Overrides, nh dataplane.NextHop) (*dataplane.Services, error) {
	enc, err := NewEncapsulator(cfg)
	if err != nil {
		return nil, err
	}
	s, err := dataplane.NewServices(prev, enc, nh, VIPSpecs(cfg, over))
	if err != nil {
		return nil, err
	}
	var peers []netip.Addr
	if cfg.BGP != nil {
		for _, n := range cfg.BGP.Neighbors {
			if a, err := netip.ParseAddr(n.Address); err == nil {
				peers = append(peers, a)
			}
		}
	}
	s.SetPunt(cfg.Dataplane.Punt, peers)
	return s, nil
}

// EngineConfig is the start-up configuration of the DPDK engine: ports,
// queues, pools, the exception tap, the flow hash key and conntrack.
func EngineConfig(cfg *config.Config) (dataplane.EngineConfig, error) {
	d := &cfg.Dataplane
	key, err := flow.ParseKey(d.HashKey)
	if err != nil {
		return dataplane.EngineConfig{}, fmt.Errorf("%s: dataplane.hash_key: %w", cfg.File, err)
	}
	return dataplane.EngineConfig{
		Port: d.Port, TxPort: d.TxPort, Burst: d.Burst, RxDesc: d.RxDesc, TxDesc: d.TxDesc, MempoolSize: d.MempoolSize,
		IdleBackoff: d.IdleBackoff == nil || *d.IdleBackoff, IdleMaxSleep: d.IdleMaxSleep,
		Exception: d.Exception == nil || *d.Exception, ExceptionIf: d.ExceptionIf,
		HashKey: key, Conntrack: cfg.Conntrack, // decoded into conntrack's own type
	}, nil
}

// EALArgs turns the [eal] section into DPDK's command line.
func EALArgs(cfg *config.Config) []string {
	e := &cfg.EAL
	lcores := strconv.Itoa(e.MainLcore)
	for _, w := range e.WorkerLcores {
		lcores += "," + strconv.Itoa(w)
	}
	lflag := "-l"
	if e.LcoreMap != "" {
		lflag, lcores = "--lcores", e.LcoreMap
	}
	args := []string{lflag, lcores, "--main-lcore", strconv.Itoa(e.MainLcore), "--file-prefix", e.FilePrefix, "-m", strconv.Itoa(e.MemoryMB)}
	if !e.Hugepages {
		args = append(args, "--no-huge")
	}
	if len(e.PCI) == 0 {
		args = append(args, "--no-pci")
	}
	for _, p := range e.PCI {
		args = append(args, "-a", p)
	}
	for _, v := range e.Vdevs {
		args = append(args, "--vdev", v)
	}
	return append(args, e.ExtraArgs...)
}
