//go:build dpdk

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fulcrumlb/fulcrum/admin"
	"github.com/fulcrumlb/fulcrum/bgp"
	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/control"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/dpdk"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/exception"
	"github.com/fulcrumlb/fulcrum/health"
	"github.com/fulcrumlb/fulcrum/internal/sdnotify"
)

const dpdkSupport = "22.11+ built in"

func dpdkVersion() string { return dpdk.Version() }

func cmdRun(args []string, stdout, stderr io.Writer) (code int) {
	opt, code, done := parseRun(args, stdout, stderr)
	if done {
		return code
	}
	// A reader of stdout or stderr that goes away (`| head`, a log
	// shipper restarted) must not kill the daemon with SIGPIPE and leave
	// its runtime files behind: the write fails instead, and is handled
	// (before the first line is logged).
	signal.Ignore(syscall.SIGPIPE)
	if _, err := newLogger(opt.logFormat, opt.logLevel, io.Discard); err != nil {
		fmt.Fprintf(stderr, "fulcrum run: %v\n", err)
		return 2
	}
	// A reader that stays but stops reading (a stalled journald, `| less`
	// left open) must not block the daemon: everything written to stderr
	// and stdout from here on goes through a queue that drops what it
	// cannot hold (outqueue.go), and is flushed, for a bounded time, at
	// exit.
	errQ := newOutQueue(stderr, outQueueBytes, nil)
	errQ.notice = droppedNotice(opt.logFormat, "stderr")
	outQ := newOutQueue(stdout, outQueueBytes, nil)
	defer outQ.flush(exitFlushTimeout)
	defer func() {
		// Lines of the EAL's own threads still in the dpdk package's
		// queue, also on the ways out that skip CleanupEAL (a loop
		// stuck, an error before the EAL).
		dpdk.FlushLog()
		errQ.flush(exitFlushTimeout)
	}()
	stderr, stdout = errQ, outQ
	log, _ := newLogger(opt.logFormat, opt.logLevel, errQ)
	// One logger for everything: the standard log package's lines and
	// DPDK's own (EAL, drivers) go through it too.
	slog.SetDefault(log)
	if err := dpdk.SetLogger(log); err != nil {
		log.Warn("DPDK log stays on stderr", "err", err)
	}
	// DPDK's last words (rte_panic's reason and stack, rte_exit's) come
	// right before abort() or exit(), which skip the deferred flushes
	// above: each is flushed out as it is logged.
	dpdk.SetFatalHook(fatalFlush(errQ, exitFlushTimeout))
	log.Info("fulcrum starting", buildInfo()...)
	// Signals are caught from here on, before anything is set up: a
	// SIGHUP during start-up must not kill the daemon (its default
	// action) and a SIGTERM or SIGINT must stop it through the clean-up
	// below (ports, EAL, runtime directory), never at the kernel's hand.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	// SIGHUPs have a channel of their own: os/signal drops a signal that
	// finds its channel full, and SIGHUPs queued behind a slow reload
	// must never take the room of a SIGTERM. Reloads coalesce anyway.
	hups := make(chan os.Signal, 1)
	signal.Notify(hups, syscall.SIGHUP)
	defer signal.Stop(hups)
	// During start-up (the EAL, the ports, the tables) a watcher takes
	// the signals: a SIGHUP is remembered and reloads once forwarding; a
	// SIGTERM or SIGINT stops the daemon at the next safe point (startSig),
	// through the clean-up; a second one, for a start-up that hangs,
	// exits at once (status 1), without clean-up.
	var reloadPending atomic.Bool
	startStop := make(chan os.Signal, 1)
	watchEnd, watchDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watchDone)
		stopping := false
		for {
			select {
			case <-watchEnd:
				return
			case <-hups:
				reloadPending.Store(true)
			case s := <-sigs:
				switch {
				case !stopping:
					stopping = true
					log.Info("stopping once start-up reaches a safe point; a second signal exits at once", "signal", s.String())
					startStop <- s
				default:
					log.Error("second signal during start-up: exiting now, without clean-up", "signal", s.String())
					dpdk.FlushLog()
					errQ.flush(exitFlushTimeout)
					os.Exit(1)
				}
			}
		}
	}()
	endWatch := sync.OnceFunc(func() { close(watchEnd); <-watchDone })
	defer endWatch()
	// startSig returns the stop signal that arrived during start-up, if any.
	startSig := func() os.Signal {
		select {
		case s := <-startStop:
			return s
		default:
			return nil
		}
	}
	raiseNoFileLimit(log) // before anything opens descriptors; see rlimit.go
	path := &opt.config
	// Through the logger, so --log-format json stays one object a line
	// even when the configuration is refused.
	cfg, err := config.Load(opt.config)
	if err != nil {
		for _, line := range config.Lines(err) {
			log.Error("configuration refused", "problem", line)
		}
		return 2
	}
	for _, w := range cfg.Warnings {
		log.Warn("configuration", "warning", w)
	}
	shared := &dataplane.Shared{}
	// Validate every table, the engine settings and the BGP section before
	// touching DPDK: a bad config exits 2.
	if _, err := control.BuildServices(cfg, nil, nil, dataplane.NextHop{}); err != nil {
		fmt.Fprintf(stderr, "fulcrum: %s: %v\n", cfg.File, err)
		return 2
	}
	engCfg, err := control.EngineConfig(cfg)
	if err != nil {
		fmt.Fprintf(stderr, "fulcrum: %v\n", err)
		return 2
	}
	// The profile's file is made once the configuration is accepted: a
	// refused one (exit 2) leaves no file that the next run, with the
	// file fixed, would refuse as existing.
	if opt.cpuProfile != "" {
		stop, err := startCPUProfile(opt.cpuProfile)
		if err != nil {
			log.Error("CPU profile", "file", opt.cpuProfile, "err", err)
			return 2
		}
		defer func() {
			if err := stop(); err != nil {
				log.Error("CPU profile", "file", opt.cpuProfile, "err", err)
			}
		}()
		log.Info("writing a CPU profile at exit", "file", opt.cpuProfile)
	}
	var bgpCfg bgp.Config
	if cfg.BGP != nil {
		bgpCfg = *cfg.BGP // validated, defaults filled in, by config.Load
		// A BGP port another program holds is named now, before the
		// NIC, the tap and the tables are set up and systemd is told
		// the daemon is ready.
		if err := bgp.CheckListen(bgpCfg); err != nil {
			log.Error("BGP", "err", err)
			return 1
		}
	}

	// The exception tap's name must be free before anything is set up:
	// net_tap would attach to an existing tap of that name (another
	// Fulcrum's) and the kernel side of both would then be ours to
	// change and to set down at exit. The interface's lock comes first,
	// held until the tap is gone (this defer runs after eng.Close's) or
	// the process dies: of two daemons started at the same instant only
	// one may check the name and go on to create the tap.
	if engCfg.Exception {
		lock, err := exception.Lock(exception.LockDir, engCfg.ExceptionIf)
		if err != nil {
			log.Error("exception path", "err", err)
			return 1
		}
		defer func() {
			if err := lock.Release(); err != nil {
				log.Warn("exception interface lock", "file", lock.Path(), "err", err)
			}
		}()
		if err := exception.CheckAbsent(engCfg.ExceptionIf); err != nil {
			log.Error("exception path", "err", err)
			return 1
		}
	}
	// A full runtime filesystem (/run) is refused here: the EAL writes
	// its mmapped files there and a full tmpfs makes that a SIGBUS.
	if err := dpdk.CheckRuntimeSpace(ealRuntimeBytes(cfg)); err != nil {
		log.Error("EAL initialisation", "err", err)
		return 1
	}
	ealArgs := control.EALArgs(cfg)
	log.Info("starting EAL", "args", ealArgs)
	if err := dpdk.InitEAL(ealArgs); err != nil {
		log.Error("EAL initialisation failed", "err", err)
		if err := dpdk.RemoveFailedRuntimeDir(cfg.EAL.FilePrefix); err != nil {
			log.Warn("DPDK runtime files", "err", err)
		}
		return 1
	}
	if cfg.EAL.Hugepages { // dpdk-dumpcap attaches through the EAL's shared hugepage memory
		if err := dpdk.PdumpInit(); err != nil {
			log.Warn("dpdk-dumpcap support is off", "err", err)
		}
	}
	runDir := dpdk.RuntimeDir()
	loopsStuck := false // a forwarding loop did not stop: the EAL is left as it is
	defer func() {
		if loopsStuck {
			if runDir != "" {
				if err := dpdk.RemoveRuntimeDir(runDir); err != nil {
					log.Warn("DPDK runtime files", "err", err)
				}
			}
			return
		}
		if err := dpdk.CleanupEAL(); err != nil {
			log.Warn("EAL cleanup", "err", err)
		}
		// DPDK leaves its runtime directory behind; a restart with the
		// same file prefix must not trip over it.
		if runDir != "" {
			if err := dpdk.RemoveRuntimeDir(runDir); err != nil {
				log.Warn("DPDK runtime files", "err", err)
			}
		}
	}()
	if startSig() != nil {
		return 0
	}
	eng, err := dataplane.NewEngine(engCfg, shared, log)
	if err != nil {
		log.Error("dataplane setup failed", "err", err)
		return 1
	}
	defer func() {
		// A loop stuck in a driver or in Go (control.stall_timeout) never
		// returns: waiting for it kept a SIGTERM'd daemon running until
		// systemd killed it (TimeoutStopSec, 11 minutes). Its ports and
		// memory are then left to the process's exit.
		if err := eng.StopWithin(loopStopTimeout); errors.Is(err, dataplane.ErrLoopsStuck) {
			log.Error("a forwarding loop did not stop; exiting without closing the ports and the EAL", "waited", loopStopTimeout)
			loopsStuck = true
			code = 1
			return
		}
		if err := eng.Close(); err != nil {
			log.Warn("dataplane close", "err", err)
		}
	}()
	// The control plane publishes the first snapshot before any loop runs.
	plane, err := control.New(cfg, shared, eng.Workers(), log)
	if err != nil {
		log.Error("control plane", "err", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go plane.Run(ctx.Done())
	go plane.RunSignals(ctx.Done()) // passive health
	if err := plane.StartHealth(ctx, health.ManagerOptions{}); err != nil {
		log.Error("health checks", "err", err)
		return 1
	}
	adm := admin.New(plane, cfg.Admin, *path, log)
	adm.SetVersion(version)
	adm.SetPortStats(func() (admin.PortStats, error) { st, err := eng.PortStats(); return admin.PortStats(st), err })
	admLn, err := adm.Listen()
	if err != nil && !errors.Is(err, admin.ErrDisabled) {
		log.Error("admin API", "listen", cfg.Admin.Listen, "err", err)
		return 1
	}
	if admLn != nil {
		go func() {
			if err := adm.Serve(ctx, admLn); err != nil {
				log.Error("admin API stopped", "err", err)
			}
		}()
	}
	if eng.HasTap() {
		tap := func(_, cur *config.Config) error { return exception.Configure(exceptionIface(cur, eng.PortMAC), "") }
		if err := tap(nil, cfg); err != nil {
			log.Error("exception path", "err", err)
			return 1
		}
		plane.SetOnApply(tap) // a reload moves the kernel's address and MTU too
	}
	// A static next hop is in the first snapshot; a gateway's MAC follows
	// as soon as the kernel has resolved it, and again after a reload that
	// changes the gateway.
	res := &exception.Resolver{Iface: cfg.Dataplane.ExceptionIf, Interval: time.Second, Log: log}
	go res.Run(ctx, func() exception.Gateways {
		v4, v6 := plane.Gateways()
		return exception.Gateways{IPv4: v4, IPv6: v6}
	}, plane.GatewaysChanged(), func(g exception.Gateways, nh dataplane.NextHop) bool { return plane.SetNextHop(g.IPv4, g.IPv6, nh) })
	if startSig() != nil {
		return 0
	}
	if err := eng.Run(); err != nil {
		log.Error("launching forwarding loops", "err", err)
		return 1
	}
	plane.WorkersStarted() // a loop that stops answering from now on is stalled
	// gomaxprocs: the loops hold one P each; dpdk.LaunchWorkers raised it
	// to leave two for the rest unless GOMAXPROCS is set.
	log.Info("forwarding", "vips", len(cfg.VIPs), "config", cfg.File, "gomaxprocs", runtime.GOMAXPROCS(0))
	// Ports up, tables built, loops running: systemd may now start what
	// is ordered after fulcrum.service (Type=notify).
	notify(log, sdnotify.Ready)
	if wd := sdnotify.WatchdogInterval(); wd > 0 { // the unit's WatchdogSec=
		go watchdog(ctx, plane, wd, log)
	}

	// BGP: the VIPs are announced only now that the loops forward, and only
	// those that can serve (the control plane decides, after every rebuild).
	var speaker *bgp.Speaker
	// The main loop below takes the signals from here on.
	endWatch()
	if startSig() != nil { // before anything is announced
		notify(log, sdnotify.Stopping)
		return 0
	}
	if cfg.BGP != nil {
		if speaker, err = bgp.New(bgpCfg, log); err == nil {
			err = speaker.Start(ctx)
		}
		if err != nil {
			log.Error("BGP speaker", "err", err)
			return 1
		}
		defer speaker.Stop()
		plane.SetAnnouncer(func(set []netip.Prefix) {
			m := make(map[netip.Prefix]bgp.VIPAttrs, len(set))
			for _, p := range set {
				m[p] = bgp.VIPAttrs{}
			}
			if err := speaker.SetAnnounced(m); err != nil {
				log.Error("BGP announce", "err", err)
			} else {
				log.Info("BGP announcements", "vips", fmt.Sprint(set))
			}
		}, func() []control.PeerInfo { return peerInfo(speaker) })
	}
	// withdraw takes every VIP off the routers and keeps forwarding for the
	// drain time, so the routers move the flows to the other instances
	// before this one stops (every instance has the same tables, so the
	// flows keep their backends).
	withdraw := func(why string) {
		if speaker == nil {
			return
		}
		plane.SetAnnouncer(nil, nil)
		if err := speaker.WithdrawAll(); err != nil {
			log.Error("BGP withdraw", "err", err)
		}
		log.Info("VIPs withdrawn; still forwarding while the routers converge", "reason", why, "drain_time", bgpCfg.DrainTime)
		// A second SIGTERM or SIGINT ends the drain at once (an operator
		// who cannot wait); a SIGHUP changes nothing now.
		t := time.NewTimer(bgpCfg.DrainTime)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				return
			case s := <-sigs:
				log.Info("drain cut short", "signal", s.String())
				return
			}
		}
	}

	var stats, idleTick <-chan time.Time
	if opt.statsEvery > 0 {
		t := time.NewTicker(opt.statsEvery)
		defer t.Stop()
		stats = t.C
	}
	if opt.exitIdle > 0 {
		// At least a millisecond: a ticker of 0 panics (--exit-when-idle 3ns).
		t := time.NewTicker(max(opt.exitIdle/4, time.Millisecond))
		defer t.Stop()
		idleTick = t.C
	}
	workers := make([]snapshotter, len(eng.Workers()))
	for i, w := range eng.Workers() {
		workers[i] = w
	}
	sr := newStatsReader(workers)
	defer sr.stop()
	// finalStats logs the counters at exit, and writes them as a last
	// --stats-json line too.
	finalStats := func() {
		logStats(log, eng, sr, "final counters")
		if opt.statsJSON {
			sr.writeJSON(stdout, time.Now())
		}
	}
	reload := func() {
		notify(log, sdnotify.Reloading)
		if err := plane.Reload(*path); errors.Is(err, control.ErrExceptionNotUpdated) {
			log.Error("reload applied, but the exception interface was not updated (the next reload retries it)", "file", *path, "err", err)
		} else if err != nil {
			log.Error("reload rejected; the running configuration stays in force", "file", *path, "err", err)
		}
		notify(log, sdnotify.Ready)
	}
	if reloadPending.Load() { // a SIGHUP during start-up
		reload()
	}
	var lastRx, statsDropped uint64
	lastChange := time.Now()
	for {
		select {
		case <-hups:
			reload()
		case s := <-sigs:
			log.Info("stopping", "signal", s.String())
			if ch := plane.APIChanges(); len(ch) > 0 {
				log.Warn("stopping: these changes made through the admin API are not in the config, and a restart starts without them", "changes", ch)
			}
			notify(log, sdnotify.Stopping)
			withdraw(s.String())
			finalStats()
			return 0
		case err := <-eng.Failed():
			log.Error("forwarding stopped", "err", err)
			if speaker != nil {
				plane.SetAnnouncer(nil, nil)
				speaker.WithdrawAll()
			}
			return 1
		case t := <-stats:
			if !opt.statsJSON {
				logStats(log, eng, sr, "counters")
			} else if err := sr.writeJSON(stdout, t); err != nil {
				log.Error("writing --stats-json", "err", err)
			} else if n := outQ.Dropped(); n != statsDropped {
				statsDropped = n
				log.Warn("--stats-json lines dropped: stdout is not being read", "dropped_total", n)
			}
		case <-idleTick:
			rx := sr.totalRx()
			if rx != lastRx {
				lastRx, lastChange = rx, time.Now()
			} else if rx > 0 && time.Since(lastChange) >= opt.exitIdle {
				log.Info("input idle, exiting", "idle", opt.exitIdle)
				withdraw("input idle")
				finalStats()
				return 0
			}
		}
	}
}

// loopStopTimeout bounds the wait for the forwarding loops at exit: a
// loop ends its burst within microseconds when asked.
const loopStopTimeout = 5 * time.Second

// watchdog tells systemd's watchdog (WatchdogSec=) that the daemon
// works, every quarter of its interval, as long as the control plane's
// lock can be taken within a quarter of it: a control plane deadlocked
// (or its lock held for ever) leaves the instance announcing tables that
// health checks and reloads no longer change, and systemd then restarts
// it (SIGABRT first: Go's goroutine dump in the journal shows where).
// The forwarding loops are the stall watch's (control/stall.go), which
// withdraws the VIPs instead. It ends with ctx.
func watchdog(ctx context.Context, plane *control.Plane, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval / 4)
	defer t.Stop()
	silent := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if plane.Responsive(interval / 4) {
			if silent {
				silent = false
				log.Warn("the control plane answers again; telling systemd's watchdog")
			}
			notify(log, sdnotify.Watchdog)
		} else if !silent {
			silent = true
			log.Error("the control plane's lock was not free within a quarter of the watchdog interval: not telling systemd's watchdog, which restarts the daemon once the interval passes without a word", "watchdog_interval", interval)
		}
	}
}

// notify tells systemd the daemon's state when it runs as a Type=notify
// unit; elsewhere it does nothing.
func notify(log *slog.Logger, state string) {
	if _, err := sdnotify.Notify(state); err != nil {
		log.Warn("telling systemd", "state", state, "err", err)
	}
}

func logStats(log *slog.Logger, eng *dataplane.Engine, sr *statsReader, msg string) {
	cs := sr.read()
	for i := range cs {
		c := &cs[i]
		log.Info(msg, "worker", i, "rx", c.RxPackets, "tx", c.TxPackets, "forwarded", c.Encap[encap.Forward],
			"icmp_replies", c.Encap[encap.ICMPReply], "echo_replies", c.EchoReplies, "punted", c.Punted, "from_kernel", c.FromKernel, "dropped", c.Dropped(),
			"ct_hits", c.CTHits, "ct_misses", c.CTMisses, "flows", c.Flows, "moved", c.Moved, "tx_full", c.TxFull,
			"drops_by_reason", dataplane.DropSummary(c), "quic", dataplane.QUICSummary(c))
	}
	if st, err := eng.PortStats(); err == nil {
		log.Info(msg+" (port)", "ipackets", st.IPackets, "opackets", st.OPackets, "imissed", st.IMissed, "rx_nombuf", st.RxNoMbuf, "ierrors", st.IErrors, "oerrors", st.OErrors)
	}
}

func peerInfo(s *bgp.Speaker) []control.PeerInfo {
	var out []control.PeerInfo
	for _, p := range s.Peers() {
		out = append(out, control.PeerInfo{Address: p.Address.String(), ASN: p.ASN, State: string(p.State),
			UptimeSec: p.Uptime.Seconds(), PrefixesSent: p.PrefixesSent, PrefixesReceived: p.PrefixesReceived, LastError: p.LastError})
	}
	return out
}

// exceptionIface is how cfg wants the kernel's end of the tap: the wire
// port's MAC, the wire's MTU, the LB's addresses and the routes of the
// VIPs checked through the tunnel.
func exceptionIface(cfg *config.Config, mac [6]byte) exception.Iface {
	d := &cfg.Dataplane
	// net_tap receives a frame into one mbuf and drops a longer one
	// (counted only in the tap's own rx errors): the kernel must not
	// send what one mbuf cannot hold, whatever dataplane.mtu says.
	room := dpdk.DefaultDataRoom - dpdk.Headroom - 14
	ifc := exception.Iface{Name: d.ExceptionIf, MAC: mac, MTU: min(d.MTU, room)}
	for _, r := range control.TunnelCheckedVIPs(cfg) {
		ifc.Routes = append(ifc.Routes, exception.Route{Addr: r.Addr, MTU: min(r.MTU, room)})
	}
	if d.LBIPv4.IsValid() {
		ifc.Addrs = append(ifc.Addrs, netip.PrefixFrom(d.LBIPv4.Addr, d.LBPrefix4))
	}
	if d.LBIPv6.IsValid() {
		ifc.Addrs = append(ifc.Addrs, netip.PrefixFrom(d.LBIPv6.Addr, d.LBPrefix6))
	}
	return ifc
}

// ealRuntimeBytes is about what the EAL writes into its runtime directory
// for cfg: its shared config and memzone array (under 1 MiB), and the
// memory segment arrays: 48 bytes a 4 KiB page of memory_mb without
// hugepages, a few MiB per NUMA node of the hugepage lists otherwise.
func ealRuntimeBytes(cfg *config.Config) uint64 {
	if !cfg.EAL.Hugepages {
		return 1<<20 + uint64(cfg.EAL.MemoryMB)*(1<<20/4096)*48
	}
	return 16 << 20
}
