package main

import (
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/fulcrumlb/fulcrum/dataplane"
	"github.com/fulcrumlb/fulcrum/encap"
)

// snapshotter is what the stats path needs of a worker.
type snapshotter interface {
	Snapshot(dst *dataplane.Counters, timeout time.Duration) bool
}

// statsReader reads the workers' counters for the periodic stats (log
// lines, --stats-json, the idle check) into memory it keeps from one
// reading to the next, so that a reading a second allocates nothing once
// the configuration stops growing (issue 13: no GC cycle in steady state).
type statsReader struct {
	workers []snapshotter
	bufs    []dataplane.Counters
	line    []byte // the last --stats-json line
	flows   []newFlowCount
	asks    []chan struct{} // asks[i-1] makes worker i's helper goroutine read it (worker 0: read's own goroutine)
	asked   sync.WaitGroup  // the helpers' readings in flight
}

// newFlowCount keeps one worker's new_flows cumulative. The worker counts
// new flows by VIP id, and a VIP's counts leave the snapshot with it (a
// reload removed it) or restart when its id goes to another VIP (a new
// Gen): retired holds what such VIPs had counted.
type newFlowCount struct {
	retired uint64
	total   uint64                  // the new flows since start, at the last reading
	seen    []dataplane.PacketBytes // the VIPs' counts at the last reading
}

// update takes the worker's VIP counts vips and returns its new flows
// since start.
func (f *newFlowCount) update(vips []dataplane.PacketBytes) uint64 {
	for id := range f.seen {
		if id >= len(vips) || vips[id].Gen != f.seen[id].Gen {
			f.retired += f.seen[id].NewFlows
		}
	}
	f.seen = append(f.seen[:0], vips...)
	f.total = f.retired
	for i := range vips {
		f.total += vips[i].NewFlows
	}
	return f.total
}

func newStatsReader(workers []snapshotter) *statsReader {
	r := &statsReader{workers: workers, bufs: make([]dataplane.Counters, len(workers)), flows: make([]newFlowCount, len(workers))}
	// One goroutine per further worker, for the reader's life: a
	// goroutine started per reading allocates (its first sleep's timer).
	for i := 1; i < len(workers); i++ {
		ask := make(chan struct{}, 1)
		r.asks = append(r.asks, ask)
		go func() {
			for range ask {
				workers[i].Snapshot(&r.bufs[i], time.Second)
				r.asked.Done()
			}
		}()
	}
	return r
}

// stop ends the reader's goroutines.
func (r *statsReader) stop() {
	for _, ask := range r.asks {
		close(ask)
	}
}

// read snapshots every worker; a worker that does not answer within a
// second (stopped or stuck) keeps its last reading. The workers are asked
// at once: one after the other, k stuck workers held the main loop (and
// the signals it serves) k seconds at every interval. Snapshot takes
// turns with the admin API's readers.
func (r *statsReader) read() []dataplane.Counters {
	r.asked.Add(len(r.asks))
	for _, ask := range r.asks {
		ask <- struct{}{}
	}
	if len(r.workers) > 0 {
		r.workers[0].Snapshot(&r.bufs[0], time.Second)
	}
	r.asked.Wait()
	return r.bufs
}

// totalRx is the packets received by all workers.
func (r *statsReader) totalRx() uint64 {
	var n uint64
	for i := range r.read() {
		n += r.bufs[i].RxPackets
	}
	return n
}

// writeJSON reads the counters and writes them to w as one JSON object on
// one line (--stats-json): the cumulative counters summed over the
// workers, then each worker's. t is the reading's time.
func (r *statsReader) writeJSON(w io.Writer, t time.Time) error {
	cs := r.read()
	r.line = appendStatsJSON(r.line[:0], t, cs, r.flows)
	_, err := w.Write(r.line)
	return err
}

// appendStatsJSON appends the --stats-json line of cs (built by hand, with
// strconv, so that it allocates nothing): {"time_unix_ms":..,"workers":N,
// "rx":..,...,"per_worker":[{...},...]}\n. Every counter is cumulative
// since start (new_flows through flows, one per worker, which keeps what
// removed VIPs counted); docs/benchmarks.md names the fields.
func appendStatsJSON(b []byte, t time.Time, cs []dataplane.Counters, flows []newFlowCount) []byte {
	var total uint64
	for i := range cs {
		total += flows[i].update(cs[i].VIPs)
	}
	var sum dataplane.Counters
	for i := range cs {
		sum.Add(&cs[i])
	}
	b = append(b, `{"time_unix_ms":`...)
	b = strconv.AppendInt(b, t.UnixMilli(), 10)
	b = append(b, `,"workers":`...)
	b = strconv.AppendInt(b, int64(len(cs)), 10)
	b = append(b, ',')
	b = appendCounterFields(b, &sum, total)
	b = append(b, `,"per_worker":[`...)
	for i := range cs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		b = appendCounterFields(b, &cs[i], flows[i].total)
		b = append(b, '}')
	}
	return append(b, "]}\n"...)
}

func appendCounterFields(b []byte, c *dataplane.Counters, newFlows uint64) []byte {
	field := func(b []byte, name string, v uint64, comma bool) []byte {
		if comma {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, `":`...)
		return strconv.AppendUint(b, v, 10)
	}
	b = field(b, "rx", c.RxPackets, false)
	b = field(b, "rx_bytes", c.RxBytes, true)
	b = field(b, "tx", c.TxPackets, true)
	b = field(b, "tx_bytes", c.TxBytes, true)
	b = field(b, "forwarded", c.Encap[encap.Forward], true)
	b = field(b, "icmp_replies", c.Encap[encap.ICMPReply], true)
	b = field(b, "echo_replies", c.EchoReplies, true)
	b = field(b, "punted", c.Punted, true)
	b = field(b, "from_kernel", c.FromKernel, true)
	b = field(b, "dropped", c.Dropped(), true)
	b = field(b, "tx_full", c.TxFull, true)
	b = field(b, "ct_hits", c.CTHits, true)
	b = field(b, "ct_misses", c.CTMisses, true)
	b = field(b, "ct_inserts", c.Conntrack.Inserts, true)
	b = field(b, "ct_insert_failed", c.Conntrack.InsertFailed, true)
	b = field(b, "new_flows", newFlows, true)
	b = field(b, "moved", c.Moved, true)
	b = field(b, "flows", uint64(c.Flows), true)
	return b
}
