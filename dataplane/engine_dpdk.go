//go:build dpdk

package dataplane

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/dpdk"
	"github.com/fulcrumlb/fulcrum/internal/prefetch"
)

// Engine runs the forwarding loops on the worker lcores of an initialised
// EAL: it owns the wire port (and an optional separate egress port), the
// exception tap port, one mempool and one Worker per lcore.
type Engine struct {
	cfg     EngineConfig
	shared  *Shared
	log     *slog.Logger
	wire    uint16
	egress  uint16
	tap     uint16
	hasTap  bool
	PortMAC [6]byte
	workers []*Worker
	pools   []*dpdk.Mempool
	launch  *dpdk.Launch
	done    chan error // receives the loops' result if they end before Stop
	stop    atomic.Bool
	start   time.Time
	ports   []uint16         // every port the engine configured (Close stops them)
	mem     []unsafe.Pointer // the conntrack tables' hugepage memory, freed by Close
}

// TapName is the DPDK device name of the exception port.
const TapName = "net_tap_fulcrum"

// NewEngine sets up ports, queues, pools and workers. The EAL must be
// initialised (dpdk.InitEAL(control.EALArgs(cfg))) with one worker lcore
// per forwarding loop.
func NewEngine(cfg EngineConfig, shared *Shared, log *slog.Logger) (*Engine, error) {
	d := &cfg
	e := &Engine{cfg: cfg, shared: shared, log: log, start: time.Now()}
	lcores := dpdk.WorkerLcores()
	if len(lcores) == 0 {
		return nil, errors.New("dataplane: the EAL has no worker lcore (set eal.worker_lcores)")
	}
	nq := uint16(len(lcores))
	var err error
	if e.wire, err = dpdk.PortByName(d.Port); err != nil {
		return nil, fmt.Errorf("dataplane.port %q: %w (ports: %s)", d.Port, err, portNames())
	}
	e.egress = e.wire
	if d.TxPort != "" && d.TxPort != d.Port {
		if e.egress, err = dpdk.PortByName(d.TxPort); err != nil {
			return nil, fmt.Errorf("dataplane.tx_port %q: %w (ports: %s)", d.TxPort, err, portNames())
		}
	}
	mac, err := dpdk.PortMAC(e.wire)
	if err != nil {
		return nil, err
	}
	if mac == ([6]byte{}) {
		// Virtual ports such as net_ring have no address. Use a locally
		// administered one derived from the port name, stable across
		// restarts, for the frames we send and for the exception tap.
		mac = [6]byte{0x02, 0xf1}
		h := uint32(2166136261)
		for _, ch := range []byte(d.Port) {
			h = (h ^ uint32(ch)) * 16777619
		}
		mac[2], mac[3], mac[4], mac[5] = byte(h>>24), byte(h>>16), byte(h>>8), byte(h)
		log.Warn("wire port has no MAC address; using a locally administered one", "port", d.Port, "mac", dpdk.MAC(mac))
	}
	e.PortMAC = mac
	if d.Exception {
		args := fmt.Sprintf("iface=%s,mac=%s", d.ExceptionIf, dpdk.MAC(mac))
		if err := dpdk.VdevInit(TapName, args); err != nil {
			return nil, fmt.Errorf("exception path: %w", err)
		}
		if e.tap, err = dpdk.PortByName(TapName); err != nil {
			return nil, fmt.Errorf("exception path: %w", err)
		}
		e.hasTap = true
	}
	gen := poolGen.Add(1) - 1 // names unique while older pools are retired
	for i, lc := range lcores {
		sock := dpdk.LcoreSocket(lc)
		mp, err := dpdk.NewMempool(fmt.Sprintf("fulcrum_g%d_pool%d", gen, i), uint32(d.MempoolSize), dpdk.DefaultPoolCache, dpdk.DefaultDataRoom, sock)
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("worker %d mempool: %w", i, err)
		}
		e.pools = append(e.pools, mp)
		ct := d.Conntrack
		if dpdk.HasHugepages() {
			// The flow table on the EAL's hugepages, on the lcore's
			// NUMA socket: no TLB misses over hundreds of MiB, and no
			// reliance on transparent huge pages being available.
			ct.Memory = func(n uintptr) (unsafe.Pointer, error) {
				p, err := dpdk.Zmalloc(fmt.Sprintf("fulcrum_ct%d", i), n, 64, sock)
				if err == nil {
					e.mem = append(e.mem, p)
				}
				return p, err
			}
		}
		w, err := NewWorker(i, shared, ct, d.HashKey, mac)
		if err != nil {
			e.Close()
			return nil, err
		}
		e.workers = append(e.workers, w)
	}
	if d.RxDesc < 1 || d.RxDesc > math.MaxUint16 || d.TxDesc < 1 || d.TxDesc > math.MaxUint16 {
		e.Close()
		return nil, fmt.Errorf("rx_desc %d, tx_desc %d: a queue holds 1..65535 descriptors", d.RxDesc, d.TxDesc)
	}
	setup := func(port uint16, name string, rss uint64) error {
		if _, err := dpdk.ConfigurePort(port, dpdk.PortConf{RxQueues: nq, TxQueues: nq, RSS: rss}); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		// From here its queues may hold mbufs of e.pools: Close retires
		// the pools rather than free them under it (retire).
		e.ports = append(e.ports, port)
		for q := uint16(0); q < nq; q++ {
			sock := dpdk.LcoreSocket(lcores[q])
			if _, err := dpdk.SetupRxQueue(port, q, uint16(d.RxDesc), sock, e.pools[q]); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if _, err := dpdk.SetupTxQueue(port, q, uint16(d.TxDesc), sock); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		if err := dpdk.StartPort(port); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	if err := setup(e.wire, "dataplane.port "+d.Port, dpdk.RSSDefault); err != nil {
		e.Close()
		return nil, err
	}
	if err := dpdk.SetPromiscuous(e.wire, true); err != nil {
		log.Warn("promiscuous mode unavailable", "port", d.Port, "err", err)
	}
	if e.egress != e.wire {
		if err := setup(e.egress, "dataplane.tx_port "+d.TxPort, 0); err != nil {
			e.Close()
			return nil, err
		}
	}
	if e.hasTap {
		if err := setup(e.tap, "exception tap", 0); err != nil {
			e.Close()
			return nil, err
		}
	}
	freeRetired(e.ports)
	for i, mp := range e.pools {
		// The queues filled their descriptors at setup: a pool they took
		// whole (or all but a few) starts, but no rx can replace an mbuf.
		if n := mp.Avail(); n < d.Burst {
			e.Close()
			return nil, fmt.Errorf("worker %d mempool: the ports' queues took all but %d of its %d mbufs at setup, less than one burst (%d): raise dataplane.mempool_size or lower rx_desc", i, n, d.MempoolSize, d.Burst)
		}
	}
	log.Info("dataplane ready", "port", d.Port, "mac", dpdk.MAC(mac), "workers", len(lcores), "queues", nq, "exception", e.hasTap,
		"conntrack_bytes", e.workers[0].ct.Bytes(), "conntrack_hugepages", e.workers[0].ct.ExternalMemory())
	return e, nil
}

// Pools of closed engines. A stopped port's rx queues still hold mbufs of
// the engine's pools, which DPDK frees into them when the queues are
// released: when a later engine configures and sets up the port again.
// Freeing a pool at Close would let that release write into freed memory
// (or into another pool made there since). So Close retires its pools,
// and NewEngine frees those whose ports it has all set up again; a pool
// whose port no later engine uses stays until the process ends (the
// daemon closes its engine once, at exit).
var (
	poolGen   atomic.Uint32
	retiredMu sync.Mutex
	retired   []retiredPools
)

type retiredPools struct {
	ports []uint16
	pools []*dpdk.Mempool
}

func retire(ports []uint16, pools []*dpdk.Mempool) {
	if len(pools) == 0 {
		return
	}
	if len(ports) == 0 {
		// No queue was set up on any port: nothing holds their mbufs.
		for _, mp := range pools {
			mp.Free()
		}
		return
	}
	retiredMu.Lock()
	defer retiredMu.Unlock()
	retired = append(retired, retiredPools{slices.Clone(ports), pools})
}

// freeRetired frees the retired pools whose every port is in set up (its
// queues released and set up again with this engine's pools).
func freeRetired(setUp []uint16) {
	retiredMu.Lock()
	defer retiredMu.Unlock()
	kept := retired[:0]
	for _, r := range retired {
		covered := true
		for _, p := range r.ports {
			covered = covered && slices.Contains(setUp, p)
		}
		if !covered {
			kept = append(kept, r)
			continue
		}
		for _, mp := range r.pools {
			mp.Free()
		}
	}
	clear(retired[len(kept):])
	retired = kept
}

func portNames() string {
	s := ""
	for _, p := range dpdk.Ports() {
		n, _ := dpdk.PortName(p)
		if s != "" {
			s += ", "
		}
		s += n
	}
	if s == "" {
		return "none"
	}
	return s
}

// Workers are the engine's workers, one per lcore, for counters.
func (e *Engine) Workers() []*Worker { return e.workers }

// HasTap reports whether the exception path exists.
func (e *Engine) HasTap() bool { return e.hasTap }

// Run launches the forwarding loops and returns at once.
func (e *Engine) Run() error {
	e.begin()
	idx := map[uint]int{}
	for i, lc := range dpdk.WorkerLcores() {
		idx[lc] = i
	}
	l, err := dpdk.LaunchWorkers(func(lc uint) error { return e.loop(idx[lc]) })
	if err != nil {
		return err
	}
	e.launch = l
	e.done = make(chan error, 1)
	go func() {
		err := l.Wait()
		if !e.stop.Load() {
			if err == nil {
				err = errors.New("forwarding loops returned without being asked to")
			}
			e.done <- err
		}
	}()
	return nil
}

// begin readies the loops to run: not stopped, and each worker told
// whether packets for the host have somewhere to go.
func (e *Engine) begin() {
	e.stop.Store(false)
	for _, w := range e.workers {
		w.SetExceptionPath(e.hasTap)
	}
}

// Failed delivers an error if a forwarding loop dies (a panic on an lcore
// is a bug: the daemon must not carry on without forwarding).
func (e *Engine) Failed() <-chan error { return e.done }

// Stop asks the loops to finish their burst and return, and waits.
func (e *Engine) Stop() error {
	e.stop.Store(true)
	if e.launch == nil {
		return nil
	}
	err := e.launch.Wait()
	e.launch = nil
	return err
}

// ErrLoopsStuck: a forwarding loop did not return within StopWithin's
// time (stuck: control.stall_timeout's stalled worker).
var ErrLoopsStuck = errors.New("a forwarding loop did not stop (stuck)")

// StopWithin is Stop that waits at most d for the loops: ErrLoopsStuck
// if one still runs then. The engine must then not be closed (the stuck
// loop may still use its ports and memory); the process should exit.
func (e *Engine) StopWithin(d time.Duration) error {
	e.stop.Store(true)
	if e.launch == nil {
		return nil
	}
	ok, err := e.launch.WaitWithin(d)
	if !ok {
		return ErrLoopsStuck
	}
	e.launch = nil
	return err
}

// Close stops the loops and the ports and retires the pools (freed once
// a later engine has set their ports up again: retire). The EAL stays
// up (dpdk.CleanupEAL ends it).
func (e *Engine) Close() error {
	errs := []error{e.Stop()}
	for _, p := range e.ports {
		errs = append(errs, dpdk.StopPort(p))
	}
	if e.hasTap {
		// Uninit releases the tap's queues, and their mbufs, now.
		errs = append(errs, dpdk.VdevUninit(TapName))
		e.hasTap = false
		e.ports = slices.DeleteFunc(e.ports, func(p uint16) bool { return p == e.tap })
	}
	retire(e.ports, e.pools)
	e.ports = nil
	e.pools = nil
	// The workers' tables live here: the workers are not to be used after
	// Close.
	for _, p := range e.mem {
		dpdk.Free(p)
	}
	e.mem = nil
	return errors.Join(errs...)
}

// PortStats are the wire port's driver counters.
func (e *Engine) PortStats() (dpdk.Stats, error) { return dpdk.PortStats(e.wire) }

// loop is worker i's polling loop. It allocates nothing per burst: every
// buffer it uses is made before the loop starts.
func (e *Engine) loop(i int) error {
	d := &e.cfg
	w := e.workers[i]
	q := uint16(i)
	burst := d.Burst
	rx, err := dpdk.NewBurst(burst)
	if err != nil {
		return err
	}
	defer rx.Free()
	drops, _ := dpdk.NewBurst(dpdk.MaxBurst)
	defer drops.Free()
	txWire, _ := dpdk.NewTxBuffer(e.egress, q, burst)
	defer txWire.Free()
	var txTap *dpdk.TxBuffer
	var tapRx *dpdk.Burst
	if e.hasTap {
		txTap, _ = dpdk.NewTxBuffer(e.tap, q, burst)
		defer txTap.Free()
		tapRx, _ = dpdk.NewBurst(burst)
		defer tapRx.Free()
	}
	tapPkts := make([]Pkt, burst)
	pkts := make([]Pkt, burst)
	mbIdx := make([]int, burst)
	lines := make([]uintptr, 2*burst)
	c := w.Local()
	base := txBase{c.TxPackets, c.TxFull, c.TxBytes}
	backoff := d.IdleBackoff
	maxSleep := d.IdleMaxSleep
	idle := 0
	sleep := time.Microsecond
	for !e.stop.Load() {
		now := conntrack.Time(time.Since(e.start) / conntrack.Resolution)
		if e.hasTap {
			// The kernel's side of the exception path: ARP/ND replies,
			// BGP, ICMP from the host go out on the wire. One call sends
			// the last burst's punts to the kernel and receives.
			if m := txTap.FlushRx(e.tap, q, tapRx); m > 0 {
				if w.SteersFromKernel() {
					steerFromKernel(w, tapRx, tapPkts, txWire, drops) // healthpath_dpdk.go
				} else {
					for _, mb := range tapRx.Mbufs() {
						txWire.Add(mb)
					}
				}
				tapRx.Reset()
				c.FromKernel += uint64(m)
			}
		}
		// One call sends what the last burst (and the kernel's side)
		// made and receives the next burst: a polling loop's turn costs
		// one crossing into C on a port without an exception path.
		n := txWire.FlushRx(e.wire, q, rx)
		// Both buffers are flushed now (the tap's above): what the ports
		// took and refused is counted on every turn, busy or idle, so
		// the counters are whole once the loop has turned after a burst.
		countTx(c, base, txWire, txTap)
		if n == 0 {
			c.IdlePolls++
			w.Idle(now)
			w.ct.Sweep(now, idleSweep(sleep))
			if backoff {
				idle++
				if idle > 64 {
					time.Sleep(sleep)
					sleep = min(2*sleep, maxSleep) // never longer than idle_max_sleep
				} else if idle > 16 {
					runtime.Gosched()
				}
			}
			continue
		}
		idle, sleep = 0, time.Microsecond
		k := 0
		for j, mb := range rx.Mbufs() {
			if mb.NbSegs() != 1 {
				c.RxPackets++
				c.RxBytes += uint64(mb.PktLen())
				c.Drops[DropMultiSeg]++
				drops.Add(mb)
				continue
			}
			// Field by field: a composite literal is built in a stack
			// temporary and copied in 16-byte moves that stall on the
			// stores just made (store forwarding), per packet.
			p := &pkts[k]
			p.Buf = mb.Buffer()
			p.Off = mb.Headroom()
			p.Len = mb.DataLen()
			mbIdx[k] = j
			// The frame's first line (a NIC's DMA leaves it in the L3 at
			// best) and the headroom line before it, which the tunnel
			// headers are written into: unused since the mbuf's last
			// trip, and its store misses otherwise stall Encap.
			data := uintptr(unsafe.Pointer(unsafe.SliceData(p.Buf))) + uintptr(p.Off)
			lines[2*k], lines[2*k+1] = data, data-1
			k++
		}
		prefetch.Lines(lines[:2*k])
		cp := w.capture.Load() // capture.go: nil unless a capture runs
		if cp != nil {
			cp.captureBefore(pkts[:k])
		}
		w.Process(pkts[:k], now)
		if cp != nil {
			cp.captureAfter(pkts[:k], w.Verdicts[:k], w.why[:k])
		}
		for j := 0; j < k; j++ {
			mb := rx.At(mbIdx[j])
			switch w.Verdicts[j] {
			case Tx:
				if !mb.SetFrame(pkts[j].Off, pkts[j].Len) {
					c.Drops[DropBadBuffer]++
					drops.Add(mb)
					continue
				}
				txWire.Add(mb)
			case Punt:
				if txTap != nil {
					txTap.Add(mb)
				} else {
					c.Punted-- // decided as a punt, but there is nowhere to punt to
					c.Drops[DropNoException]++
					drops.Add(mb)
				}
			default:
				drops.Add(mb)
			}
		}
		rx.Reset()
		// The burst's packets wait in txWire and txTap until the next
		// turn's FlushRx, right after this, which also counts them.
		drops.FreeAll()
		w.ct.SweepPaced(now)
		c.Bursts++
	}
	// The last burst's packets, and their counts.
	txWire.Flush()
	if txTap != nil {
		txTap.Flush()
	}
	countTx(c, base, txWire, txTap)
	return nil
}

// txBase is what a worker's counters held when its loop began: a loop run
// again (Run after Stop) has new tx buffers, whose counts start at 0.
type txBase struct{ sent, full, bytes uint64 }

// countTx publishes what the wire port took (TxPackets, TxBytes: the
// forwarded packets and the kernel's frames alike) and what it and the
// tap (nil: none) refused (TxFull) into the worker's counters, on top of
// base. A packet waiting in wire counts in TxBytes until the port
// refuses it, in TxPackets once the port takes it.
func countTx(c *Counters, base txBase, wire, tap *dpdk.TxBuffer) {
	c.TxPackets = base.sent + wire.Sent
	c.TxBytes = base.bytes + wire.SentBytes
	c.TxFull = base.full + wire.Dropped
	if tap != nil {
		c.TxFull += tap.Dropped
	}
}
