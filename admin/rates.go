package admin

import (
	"sync"
	"time"

	"github.com/fulcrumlb/fulcrum/admin/api"
)

// rateSampleTTL is how long a sample is kept without a look: VIPs and
// backends removed by a reload must not stay in memory forever.
const rateSampleTTL = 10 * time.Minute

// minRateWindow is the shortest interval rates are measured over: looks
// closer together than this reuse the last rates, so two viewers (or a
// page and fulcrumctl) do not turn each other's rates into noise.
const minRateWindow = time.Second

// rates turns the packet and byte totals of VIPs and backends into rates
// over the time since an earlier look (the status page, fulcrumctl show).
// There is no background sampler: the first look has no rates, every later
// one measures from the previous sample at least minRateWindow old.
type rates struct {
	mu      sync.Mutex
	samples map[string]*rateSample
	pruned  time.Time
}

type rateSample struct {
	packets, bytes uint64
	at             time.Time
	pps, bps, secs float64 // the last rates and their window
}

// rate updates the sample of key with totals seen at now and returns the
// packet and byte rates and the window in seconds (0: no rate yet).
func (r *rates) rate(key string, packets, bytes uint64, now time.Time) (pps, bps, secs float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.samples == nil {
		r.samples = map[string]*rateSample{}
	}
	if len(r.samples) > 0 && now.Sub(r.pruned) > rateSampleTTL {
		for k, old := range r.samples {
			if now.Sub(old.at) > rateSampleTTL {
				delete(r.samples, k)
			}
		}
		r.pruned = now
	}
	s := r.samples[key]
	if s == nil || packets < s.packets || bytes < s.bytes {
		// New, or its counters restarted (a backend id reused).
		r.samples[key] = &rateSample{packets: packets, bytes: bytes, at: now}
		return 0, 0, 0
	}
	if d := now.Sub(s.at); d >= minRateWindow {
		secs := d.Seconds()
		*s = rateSample{packets: packets, bytes: bytes, at: now,
			pps: float64(packets-s.packets) / secs, bps: float64(bytes-s.bytes) / secs, secs: secs}
	}
	return s.pps, s.bps, s.secs
}

// withRates fills in the rates of v and its backends. Callers skip it
// when a worker did not answer the status's counter snapshot: its counts
// read 0 there, and the rates would take the fall for a reset and report
// the worker's whole history as the next window's traffic.
func (s *Server) withRates(v *api.VIP, now time.Time) {
	v.PacketRate, v.ByteRate, v.RateSeconds = s.rates.rate(v.Name, v.Packets, v.Bytes, now)
	for i := range v.Backends {
		b := &v.Backends[i]
		b.PacketRate, b.ByteRate, _ = s.rates.rate(v.Name+"\x00"+b.Name, b.Packets, b.Bytes, now)
	}
}

// withChecks fills in the last health check result and latency of v's
// backends.
func (s *Server) withChecks(v *api.VIP) {
	for i := range v.Backends {
		b := &v.Backends[i]
		hs, ok := s.plane.HealthStatus(v.Name, b.Name)
		if !ok || hs.Checks == 0 {
			continue
		}
		b.CheckResult = "ok"
		if hs.LastError != "" {
			b.CheckResult = hs.LastError
		}
		b.CheckLatencyMs = float64(hs.LastRTT.Microseconds()) / 1000
	}
}

// backendState is a backend's one-word state for people (the status page,
// fulcrumctl show): down (failing its checks), outlier (ejected by the
// passive checks), draining (taking no new flows; its pinned flows
// finish), slow-start (ramping up), unknown (checked, no verdict yet:
// routed like up), or up.
func backendState(b *api.Backend) string {
	switch {
	case b.Drained:
		return "draining"
	case b.Health == "down":
		return "down"
	case b.Outlier:
		return "outlier"
	case b.SlowStart:
		return "slow-start"
	case b.Health == "unknown":
		return "unknown"
	}
	return "up"
}
