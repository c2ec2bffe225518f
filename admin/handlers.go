package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fulcrumlb/fulcrum/admin/api"
	"github.com/fulcrumlb/fulcrum/conntrack"
	"github.com/fulcrumlb/fulcrum/control"
	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/encap"
	"github.com/fulcrumlb/fulcrum/punt"
)

// maxWeight is the largest weight a backend may have (config and
// control.Plane.SetWeight check the same bound).
const maxWeight = 65535

// httpError is an error with the status code it is answered with.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &httpError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// statusOf maps an error to its HTTP status: 404 for unknown VIPs and
// backends, 503 when a worker did not answer, 500 for the rest.
func statusOf(err error) int {
	var he *httpError
	switch {
	case errors.As(err, &he):
		return he.code
	case errors.Is(err, control.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, dataplane.ErrTimeout), errors.Is(err, dataplane.ErrBusy):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// apiFunc answers a request with a document to encode, or an error.
type apiFunc func(r *http.Request) (any, error)

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(api.StatusPath, s.read(s.getStatus))
	mux.Handle(api.VIPsPath, s.read(s.getVIPs))
	mux.Handle(api.VIPsPath+"/{vip}", s.read(s.getVIP))
	mux.Handle(api.VIPsPath+"/{vip}/table", s.methods(http.HandlerFunc(s.serveTable), http.MethodGet, http.MethodHead)) // table.go
	mux.Handle(api.VIPsPath+"/{vip}/backends/{backend}", s.read(s.getBackend))
	mux.Handle(api.VIPsPath+"/{vip}/backends/{backend}/{action}", s.mutate(s.postAction))
	mux.Handle(api.LookupPath, s.read(s.getLookup))
	mux.Handle(api.ConnsPath, s.read(s.getConns))
	mux.Handle(api.CapturePath, s.methods(http.HandlerFunc(s.postCapture), http.MethodPost))
	mux.Handle(api.ReloadPath, s.mutate(s.postReload))
	metrics := promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{
		ErrorLog:      promLogger{s.log},
		ErrorHandling: promhttp.ContinueOnError,
	})
	mux.Handle(api.MetricsPath, s.methods(s.gateMetrics(metrics), http.MethodGet, http.MethodHead))
	mux.Handle("/{$}", s.methods(http.HandlerFunc(s.getPage), http.MethodGet, http.MethodHead))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, &httpError{http.StatusNotFound, fmt.Sprintf("no endpoint %s", r.URL.Path)})
	})
	return s.guard(mux)
}

// guard is the outermost layer: the DNS-rebinding check, the token on
// every call off loopback, and a recover so a bug answers 500 instead of
// killing the daemon.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("admin API handler panicked", "method", r.Method, "path", r.URL.Path, "panic", v)
				s.writeError(w, r, fmt.Errorf("internal error: %v", v))
			}
		}()
		if !s.hostAllowed(r) {
			s.writeError(w, r, &httpError{http.StatusForbidden, fmt.Sprintf("Host %q is not an address: refused (DNS rebinding guard; connect by IP or localhost)", r.Host)})
			return
		}
		if !s.local && !s.authorized(r) {
			s.unauthorized(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// unauthorized answers 401. Off loopback the connection is closed after
// it, so a peer without the token cannot keep a max_conns slot alive.
func (s *Server) unauthorized(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="fulcrum"`)
	if !s.local {
		w.Header().Set("Connection", "close")
	}
	s.writeError(w, r, &httpError{http.StatusUnauthorized, "missing or wrong token: send Authorization: Bearer <admin.token>"})
}

// methods answers 405 (as JSON, with Allow) to any other method.
func (s *Server) methods(h http.Handler, allowed ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, m := range allowed {
			if r.Method == m {
				h.ServeHTTP(w, r)
				return
			}
		}
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		s.writeError(w, r, &httpError{http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed: use %s", r.Method, strings.Join(allowed, " or "))})
	})
}

// read serves a GET endpoint: open to whoever can connect to a local
// listener (guard asks for the token on any other).
func (s *Server) read(f apiFunc) http.Handler {
	return s.methods(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, err := f(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.writeJSON(w, r, http.StatusOK, v)
	}), http.MethodGet, http.MethodHead)
}

// mutate serves a POST endpoint: same-origin only, token checked, logged.
func (s *Server) mutate(f apiFunc) http.Handler {
	return s.methods(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.cop.Check(r); err != nil {
			s.writeError(w, r, &httpError{http.StatusForbidden, "cross-origin request refused: " + err.Error()})
			return
		}
		if !s.authorized(r) {
			s.unauthorized(w, r)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
		v, err := f(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		attrs := []any{"method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "status", http.StatusOK}
		if f, ok := v.(api.Flush); ok {
			attrs = append(attrs, "flushed", f.Flushed)
		}
		s.log.Info("admin API call", attrs...)
		s.writeJSON(w, r, http.StatusOK, v)
	}), http.MethodPost)
}

func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, code int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		code = http.StatusInternalServerError
		b, _ = json.Marshal(api.Error{Error: "encoding the answer: " + err.Error()})
	}
	b = append(b, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		w.Write(b)
	}
}

// writeError answers err and logs it with the caller's address: every
// failed call of the token's holder is in the log, those of other callers
// within a budget (loglimit.go), at warning level when it is a refused
// change (any POST), a refused caller (401, 403) or a server error.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := statusOf(err)
	level := slog.LevelInfo
	if code >= 500 || code == http.StatusUnauthorized || code == http.StatusForbidden || r.Method == http.MethodPost {
		level = slog.LevelWarn
	}
	log := s.refusedLog
	if s.token.Load().token != "" && s.authorized(r) {
		log = s.log // the token's holder: every failure logged
	}
	log.Log(r.Context(), level, "admin API call failed", "method", r.Method, "path", r.URL.Path,
		"remote", r.RemoteAddr, "status", code, "err", err)
	s.writeJSON(w, r, code, api.Error{Error: err.Error()})
}

// promLogger passes promhttp's errors to slog.
type promLogger struct {
	log interface{ Warn(string, ...any) }
}

func (l promLogger) Println(v ...any) {
	l.log.Warn("metrics: " + strings.TrimSpace(fmt.Sprintln(v...)))
}

// --- reads ---

func (s *Server) getStatus(r *http.Request) (any, error) {
	st := s.status(false)
	out := api.Status{
		Generation: st.Generation, Rebuilds: st.Rebuilds, LastRebuildMs: st.LastRebuildMs, LastError: st.LastError,
		ConfigFile: s.plane.Config().File, VIPs: len(st.VIPs), PanicVIPs: []string{},
		Workers: make([]api.Worker, len(st.Workers)), StaleWorkers: st.Stale, StalledWorkers: st.Stalled, StallWithdrawn: st.StallWithdrawn, FlowsMissingWorkers: st.FlowsMissing, Announced: st.Announced,
		Converging: st.Converging, ConvergingNewFlows: st.ConvergingNewFlows, HealthProbes: st.HealthProbes, HealthChecksFailedLocally: st.HealthLocalFailures,
	}
	for _, p := range st.BGP {
		out.BGPPeers = append(out.BGPPeers, api.BGPPeer(p))
	}
	for _, v := range st.VIPs {
		if v.Panic {
			out.PanicVIPs = append(out.PanicVIPs, v.Name)
		}
	}
	total := &dataplane.Counters{}
	capacity, huge := s.plane.ConntrackCapacity(), s.plane.ConntrackOnHugepages()
	for i := range st.Workers {
		c := &st.Workers[i]
		out.Workers[i] = workerJSON(i, c)
		if i < len(capacity) && i < len(huge) {
			out.Workers[i].Conntrack.Capacity, out.Workers[i].Conntrack.Hugepages = capacity[i], huge[i]
		}
		total.Add(c)
	}
	out.Total = workerJSON(-1, total)
	return out, nil
}

func workerJSON(id int, c *dataplane.Counters) api.Worker {
	w := api.Worker{
		Worker: id, RxPackets: c.RxPackets, RxBytes: c.RxBytes, TxPackets: c.TxPackets, TxBytes: c.TxBytes,
		Forwarded: c.Encap[encap.Forward], ICMPReplies: c.Encap[encap.ICMPReply], EchoReplies: c.EchoReplies, Punted: c.Punted,
		FromKernel: c.FromKernel, HealthTunnelTx: c.HealthTunnelTx, Fragments: c.Fragments, ICMPErrors: c.ICMPErrors, Moved: c.Moved, SYNKept: c.SYNKept, SYNsByTable: c.SYNsByTable,
		TxFull: c.TxFull, Dropped: c.Dropped(), Drops: map[string]uint64{},
		SecondChance: c.SecondChance, SecondChanceFlows: c.SecondChanceFlows,
		Conntrack: api.Conntrack{Flows: c.Flows, Hits: c.CTHits, Misses: c.CTMisses, Inserts: c.Conntrack.Inserts,
			InsertFailed: c.Conntrack.InsertFailed, Expired: c.Conntrack.Expired, Evictions: map[string]uint64{}},
	}
	dataplane.ForEachDrop(c, func(reason string, n uint64) {
		if n > 0 {
			w.Drops[reason] += n
		}
	})
	for st, n := range c.Conntrack.Evicted {
		w.Conntrack.Evictions[conntrack.State(st).String()] = n
	}
	for k, n := range c.PuntLimited {
		if n > 0 {
			if w.PuntLimited == nil {
				w.PuntLimited = map[string]uint64{}
			}
			w.PuntLimited[punt.Class(k).String()] = n
		}
	}
	for p, n := range c.QUIC {
		if n > 0 {
			if w.QUIC == nil {
				w.QUIC = map[string]uint64{}
			}
			w.QUIC[dataplane.QUICPath(p).String()] = n
		}
	}
	return w
}

func (s *Server) getVIPs(r *http.Request) (any, error) {
	withBackends := false
	if q := r.URL.Query().Get("backends"); q != "" {
		var err error
		if withBackends, err = strconv.ParseBool(q); err != nil {
			return nil, badRequest("backends %q: not true or false", q)
		}
	}
	return s.vipsNow(withBackends), nil
}

// vipsNow is every VIP with rates (and, with backends, their backends with
// rates and check results).
func (s *Server) vipsNow(withBackends bool) []api.VIP {
	st := s.status(true)
	now := time.Now()
	out := make([]api.VIP, 0, len(st.VIPs))
	for i := range st.VIPs {
		v := vipJSON(&st.VIPs[i])
		v.FlowsMissingWorkers = st.FlowsMissing
		if len(st.Stale) == 0 {
			s.withRates(&v, now)
		}
		if withBackends {
			for j := range v.Backends {
				v.Backends[j].FlowsMissingWorkers = st.FlowsMissing
			}
			s.withChecks(&v)
		} else {
			v.Backends = nil
		}
		out = append(out, v)
	}
	return out
}

func (s *Server) getVIP(r *http.Request) (any, error) {
	name, err := s.resolveVIP(r.PathValue("vip"))
	if err != nil {
		return nil, err
	}
	st := s.status(true)
	v := findVIP(&st, name)
	if v == nil {
		return nil, vipNotFound(name)
	}
	out := vipJSON(v)
	out.FlowsMissingWorkers = st.FlowsMissing
	for i := range out.Backends {
		out.Backends[i].FlowsMissingWorkers = st.FlowsMissing
	}
	if len(st.Stale) == 0 {
		s.withRates(&out, time.Now())
	}
	s.withChecks(&out)
	return out, nil
}

func (s *Server) getBackend(r *http.Request) (any, error) {
	vip, backend, err := s.resolveBackend(r.PathValue("vip"), r.PathValue("backend"))
	if err != nil {
		return nil, err
	}
	return s.backendNow(vip, backend)
}

// backendNow is a backend's current state, with its flow count.
func (s *Server) backendNow(vip, backend string) (api.Backend, error) {
	st := s.status(true)
	if v := findVIP(&st, vip); v != nil {
		for i := range v.Backends {
			if v.Backends[i].Name == backend {
				b := backendJSON(&v.Backends[i])
				b.FlowsMissingWorkers = st.FlowsMissing
				return b, nil
			}
		}
	}
	return api.Backend{}, fmt.Errorf("vip %q backend %q: %w", vip, backend, control.ErrNotFound)
}

func findVIP(st *control.Status, name string) *control.VIPStatus {
	for i := range st.VIPs {
		if st.VIPs[i].Name == name {
			return &st.VIPs[i]
		}
	}
	return nil
}

func vipNotFound(name string) error { return fmt.Errorf("vip %q: %w", name, control.ErrNotFound) }

func vipJSON(v *control.VIPStatus) api.VIP {
	out := api.VIP{
		Name: v.Name, Address: v.Address, Port: v.Port, Protocol: v.Protocol, Encap: v.Encap, HashFields: v.Hash,
		TableSize: v.TableSize, Panic: v.Panic, Serving: v.Serving, Packets: v.Packets, Bytes: v.Bytes,
		BackendCount: len(v.Backends), Backends: make([]api.Backend, 0, len(v.Backends)),
	}
	// The VIP's own counter, like Packets and Bytes: every new flow is
	// counted on its VIP and its backend together (dataplane.Worker.pin),
	// but the backends' sum falls when a backend is removed or moves to a
	// new address (a new incarnation), and fulcrum_vip_new_flows_total is
	// a counter.
	out.NewFlows = v.NewFlows
	// Each connection once: a flow with a second chance counts for two
	// backends (the pin and the chance), so the backends' sum is not it.
	out.ActiveFlows = v.Flows
	for i := range v.Backends {
		b := backendJSON(&v.Backends[i])
		if b.Health != "down" {
			out.Healthy++
		}
		if b.EffectiveWeight > 0 {
			out.Usable++
		}
		out.Backends = append(out.Backends, b)
	}
	return out
}

func backendJSON(b *control.BackendStatus) api.Backend {
	out := api.Backend{
		VIP: b.VIP, Name: b.Name, Address: b.Address, ID: b.ID, Health: b.Health, Reason: b.Reason,
		Weight: b.Weight, EffectiveWeight: effectiveWeight(b), Drained: b.Drained, Down: b.Down,
		SlowStart: b.SlowStart, Outlier: b.Outlier, Ejections: b.Ejections, TableSlots: b.Slots, TableShare: b.Share, ActiveFlows: b.Flows,
		Packets: b.Packets, Bytes: b.Bytes, NewFlows: b.NewFlows,
	}
	out.State = backendState(&out)
	if out.State == "slow-start" && out.Weight > 0 {
		out.RampPercent = 100 * out.EffectiveWeight / float64(out.Weight)
	}
	return out
}

// effectiveScale is what control multiplies weights by so slow start can
// ramp weight-1 backends in fine steps: BackendStatus.Effective is in
// hundredths of a configured weight (control's weightScale).
const effectiveScale = control.WeightScale

func effectiveWeight(b *control.BackendStatus) float64 {
	return float64(b.Effective) / effectiveScale
}

func (s *Server) getLookup(r *http.Request) (any, error) {
	q := r.URL.Query()
	addr := func(key string) (netip.Addr, error) {
		v := q.Get(key)
		if v == "" {
			return netip.Addr{}, badRequest("%s: missing (an IP address)", key)
		}
		a, err := netip.ParseAddr(v)
		if err != nil || a.Zone() != "" {
			return netip.Addr{}, badRequest("%s %q: not an IP address", key, v)
		}
		return a.Unmap(), nil
	}
	port := func(key string) (uint16, error) {
		v := q.Get(key)
		if v == "" {
			return 0, badRequest("%s: missing (a port number)", key)
		}
		n, err := strconv.ParseUint(v, 10, 16)
		if err != nil {
			return 0, badRequest("%s %q: not a port (0..65535)", key, v)
		}
		return uint16(n), nil
	}
	src, err := addr("src")
	if err != nil {
		return nil, err
	}
	dst, err := addr("dst")
	if err != nil {
		return nil, err
	}
	if src.Is4() != dst.Is4() {
		return nil, badRequest("src %v and dst %v are of different address families", src, dst)
	}
	sport, err := port("sport")
	if err != nil {
		return nil, err
	}
	dport, err := port("dport")
	if err != nil {
		return nil, err
	}
	protoName := strings.ToLower(q.Get("proto"))
	var proto uint8
	switch protoName {
	case "", "tcp", "6":
		proto, protoName = 6, "tcp"
	case "udp", "17":
		proto, protoName = 17, "udp"
	default:
		return nil, badRequest("proto %q: not tcp or udp", q.Get("proto"))
	}
	res, err := s.plane.Lookup(src, dst, sport, dport, proto)
	if err != nil {
		return nil, err
	}
	out := api.Lookup{
		Src: src.String(), Dst: dst.String(), Sport: sport, Dport: dport, Proto: protoName,
		VIP: res.VIP, Backend: res.Backend, Address: res.Address, Reason: res.Reason, Worker: -1,
		State: res.State, IdleMs: res.IdleMs, Slot: res.Slot, Hash: res.Hash, HashFields: res.HashFields, Scheduler: res.Scheduler,
	}
	if strings.HasPrefix(res.Reason, "conntrack") {
		out.Worker = res.Worker
	}
	if u := res.Untracked; u != nil {
		out.Untracked = &api.LookupSlot{Slot: u.Slot, Backend: u.Backend, Address: u.Address}
	}
	for _, c := range res.Candidates {
		out.Candidates = append(out.Candidates, api.Candidate{
			Backend: c.Backend, Address: c.Address, Weight: float64(c.Weight) / effectiveScale,
			Active: c.Active, LatencyUs: c.LatencyUs,
		})
	}
	return out, nil
}

// defaultConnsPage is the entries of a listing page when the caller
// names no limit.
const defaultConnsPage = 1000

func (s *Server) getConns(r *http.Request) (any, error) {
	q := r.URL.Query()
	cq := control.ConnQuery{Limit: defaultConnsPage}
	var err error
	if v := q.Get("vip"); v != "" {
		if cq.VIP, err = s.resolveVIP(v); err != nil {
			return nil, err
		}
	}
	if b := q.Get("backend"); b != "" {
		if cq.VIP == "" {
			return nil, badRequest("backend %q: name its vip too (vip=...)", b)
		}
		if _, cq.Backend, err = s.resolveBackend(cq.VIP, b); err != nil {
			return nil, err
		}
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > control.MaxConnsPage {
			return nil, badRequest("limit %q: not a number in 1..%d", l, control.MaxConnsPage)
		}
		cq.Limit = n
	}
	if c := q.Get("cursor"); c != "" {
		w, b, ok := strings.Cut(c, ".")
		wi, err1 := strconv.Atoi(w)
		bi, err2 := strconv.Atoi(b)
		if !ok || err1 != nil || err2 != nil || wi < 0 || bi < 0 {
			return nil, badRequest("cursor %q: not a cursor from an earlier page (WORKER.BUCKET)", c)
		}
		// A cursor the server never gave: refused, rather than answered
		// with an empty last page that looks like the end of a listing.
		buckets := s.plane.ConnBuckets()
		if wi >= len(buckets) || bi >= buckets[wi] {
			each := "no buckets"
			if len(buckets) > 0 {
				each = fmt.Sprintf("%d buckets each", buckets[0])
			}
			return nil, badRequest("cursor %q: past the end (%d workers, %s): not a cursor from an earlier page", c, len(buckets), each)
		}
		cq.From = control.ConnCursor{Worker: wi, Bucket: bi}
	}
	conns, next, done, err := s.plane.Conns(cq)
	if err != nil {
		return nil, err
	}
	out := api.Conns{Conns: make([]api.Conn, 0, len(conns))}
	for _, c := range conns {
		out.Conns = append(out.Conns, api.Conn{Client: c.Client, VIPAddress: c.VIPAddr, Proto: c.Proto, VIP: c.VIP,
			Backend: c.Backend, BackendAddress: c.BackendAddress, State: c.State, IdleMs: c.IdleMs, Worker: c.Worker, Stale: c.Stale, SecondChance: c.SecondChance})
	}
	if !done {
		out.Next = fmt.Sprintf("%d.%d", next.Worker, next.Bucket)
	}
	return out, nil
}

// --- operator actions ---

func (s *Server) postAction(r *http.Request) (any, error) {
	action := r.PathValue("action")
	switch action {
	case api.ActionDrain, api.ActionUndrain, api.ActionWeight, api.ActionFlush:
	default:
		return nil, &httpError{http.StatusNotFound, fmt.Sprintf("no backend action %q (drain, undrain, weight, flush)", action)}
	}
	w := 0
	if action == api.ActionWeight {
		var err error
		if w, err = weightOf(r); err != nil {
			return nil, err
		}
	}
	// The VIP and backend named by address (or "address:port") are the
	// ones acted on: no reload between the look-up and the action.
	var vip, backend string
	var flushed uint64
	var flush func() (uint64, error)
	var left control.BackendStatus
	err := s.plane.HoldReloads(func() error {
		var err error
		if vip, backend, err = s.resolveBackend(r.PathValue("vip"), r.PathValue("backend")); err != nil {
			return err
		}
		if s.afterResolve != nil {
			s.afterResolve()
		}
		switch action {
		case api.ActionFlush:
			// Found under the hold, flushed outside it: the workers'
			// operation may take connsOpTimeout each, and a reload
			// (the daemon's main loop) must not wait for it.
			flush, err = s.plane.FlushOf(vip, backend)
		case api.ActionDrain:
			err = s.plane.Drain(vip, backend)
		case api.ActionUndrain:
			err = s.plane.Undrain(vip, backend)
		case api.ActionWeight:
			err = s.plane.SetWeight(vip, backend, w)
		}
		if err == nil && action != api.ActionFlush {
			// The state this action left, read before a reload or
			// another action may change it (its flows are counted
			// after the hold: that waits for every worker).
			left, err = s.plane.BackendNow(vip, backend)
		}
		return err
	})
	if err == nil && flush != nil {
		flushed, err = flush()
	}
	if err != nil {
		return nil, err
	}
	if action == api.ActionFlush {
		return api.Flush{VIP: vip, Backend: backend, Flushed: flushed}, nil
	}
	return s.withCounts(left), nil
}

// withCounts is b with its counters and flows read now: those of the same
// backend (its id at its address), whatever its VIP is named since.
func (s *Server) withCounts(b control.BackendStatus) api.Backend {
	st := s.status(true)
	for i := range st.VIPs {
		for j := range st.VIPs[i].Backends {
			if c := &st.VIPs[i].Backends[j]; c.ID == b.ID && c.Address == b.Address {
				b.Flows, b.Packets, b.Bytes, b.NewFlows = c.Flows, c.Packets, c.Bytes, c.NewFlows
				out := backendJSON(&b)
				out.FlowsMissingWorkers = st.FlowsMissing
				return out
			}
		}
	}
	return backendJSON(&b)
}

// weightOf reads the weight from ?weight=N or the body {"weight": N}.
func weightOf(r *http.Request) (int, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return 0, badRequest("body: larger than %d bytes", mbe.Limit)
		}
		return 0, badRequest("body: %v", err)
	}
	body = bytes.TrimSpace(body)
	qs, inQuery := r.URL.Query()["weight"]
	var w int
	switch {
	case inQuery && len(body) > 0:
		return 0, badRequest("weight: give it in the query or in the body, not both")
	case inQuery && len(qs) != 1:
		return 0, badRequest("weight: given %d times in the query; give it once", len(qs))
	case inQuery:
		if w, err = strconv.Atoi(qs[0]); err != nil {
			return 0, badRequest("weight %q: not an integer", qs[0])
		}
	case len(body) > 0:
		var req api.WeightRequest
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			return 0, badRequest("body: %v (want {\"weight\": N})", err)
		}
		if dec.More() {
			return 0, badRequest("body: trailing data after the JSON object")
		}
		if req.Weight == nil {
			return 0, badRequest("weight: missing from the body (want {\"weight\": N})")
		}
		w = *req.Weight
	default:
		return 0, badRequest("weight: missing (?weight=N or {\"weight\": N})")
	}
	if w < 0 || w > maxWeight {
		return 0, badRequest("weight %d: outside 0..%d", w, maxWeight)
	}
	return w, nil
}

func (s *Server) postReload(r *http.Request) (any, error) {
	if s.reloadPath == "" {
		return nil, &httpError{http.StatusConflict, "reload: the daemon was not started from a configuration file"}
	}
	if err := s.plane.Reload(s.reloadPath); errors.Is(err, control.ErrExceptionNotUpdated) {
		// Applied: the snapshot is published; the kernel's side failed
		// (the next reload retries it).
		return nil, &httpError{http.StatusInternalServerError, fmt.Sprintf("reload %s: %v", s.reloadPath, err)}
	} else if err != nil {
		return nil, &httpError{http.StatusUnprocessableEntity, fmt.Sprintf("reload %s rejected, the running configuration stays: %v", s.reloadPath, err)}
	}
	st := s.status(false)
	return api.Reload{File: s.reloadPath, Generation: st.Generation, VIPs: len(st.VIPs)}, nil
}

// --- names ---

// resolveVIP finds a VIP by its name, by "[address]:port/protocol", or by
// "address:port" or "address" when exactly one VIP matches. Unknown names are ErrNotFound.
func (s *Server) resolveVIP(ref string) (string, error) {
	if ref == "" {
		return "", badRequest("vip: empty name")
	}
	vips := s.plane.Config().VIPs
	for i := range vips {
		if vips[i].Name == ref {
			return ref, nil
		}
	}
	var match []string
	// "[address]:port/protocol", as the status page and fulcrumctl print
	// a VIP: an unnamed IPv6 VIP's name is its key unbracketed
	// (flow.VIPKey.String), which an operator copying the printed form
	// would not type.
	if i := strings.LastIndexByte(ref, '/'); i > 0 {
		if ap, err := netip.ParseAddrPort(ref[:i]); err == nil {
			for j := range vips {
				if vips[j].Address.Addr == ap.Addr().Unmap() && vips[j].Port == int(ap.Port()) && vips[j].Protocol == ref[i+1:] {
					match = append(match, vips[j].Name)
				}
			}
		}
	}
	if ap, err := netip.ParseAddrPort(ref); err == nil && len(match) == 0 {
		for i := range vips {
			if vips[i].Address.Addr == ap.Addr().Unmap() && vips[i].Port == int(ap.Port()) {
				match = append(match, vips[i].Name)
			}
		}
	} else if a, err := netip.ParseAddr(ref); err == nil {
		for i := range vips {
			if vips[i].Address.Addr == a.Unmap() {
				match = append(match, vips[i].Name)
			}
		}
	}
	switch len(match) {
	case 0:
		return "", vipNotFound(ref)
	case 1:
		return match[0], nil
	}
	return "", badRequest("vip %q: matches %d VIPs (%s): use a name", ref, len(match), strings.Join(match, ", "))
}

// resolveBackend finds a backend of a VIP by its name, or by its address
// when exactly one backend of the VIP has it.
func (s *Server) resolveBackend(vipRef, ref string) (vip, backend string, err error) {
	if vip, err = s.resolveVIP(vipRef); err != nil {
		return "", "", err
	}
	if ref == "" {
		return "", "", badRequest("backend: empty name")
	}
	cfg := s.plane.Config()
	for i := range cfg.VIPs {
		v := &cfg.VIPs[i]
		if v.Name != vip {
			continue
		}
		var match []string
		a, aerr := netip.ParseAddr(ref)
		for j := range v.Backends {
			b := &v.Backends[j]
			if b.Name == ref {
				return vip, ref, nil
			}
			if aerr == nil && b.Address.Addr == a.Unmap() {
				match = append(match, b.Name)
			}
		}
		switch len(match) {
		case 0:
		case 1:
			return vip, match[0], nil
		default:
			return "", "", badRequest("backend %q: matches %d backends of vip %q (%s): use a name", ref, len(match), vip, strings.Join(match, ", "))
		}
	}
	return "", "", fmt.Errorf("vip %q backend %q: %w", vip, ref, control.ErrNotFound)
}
