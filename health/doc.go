// Package health runs active health checks against backends and turns their
// results into a damped Up/Down state per backend, with events for every
// change. It is slow-path code (goroutines, timers, allocations, blocking
// syscalls); the dataplane never calls it. The control plane reads states and
// events and rebuilds the Maglev tables from them.
//
// # Checks
//
// A Prober asks a backend one question and measures the round trip:
// TCPProber opens a TCP connection and closes it, HTTPProber sends
// GET path (optionally with a Host header, over TLS for https) and compares
// the status code with the expected ranges (2xx and 3xx by default, as
// HAProxy's httpchk); a response whose body is cut short (EOF before its
// length, a reset) fails with ErrRequest. A check that does not finish
// within Config.Timeout, body included, fails with ErrTimeout.
//
// A check goes to the backend's own address (Config.Through "direct"), or,
// with "tunnel", to the VIP from the LB's address and a source port that
// names the backend (Target.Tunnel): the dataplane encapsulates it like
// real traffic, as Maglev and GLB check, so it proves the backend
// decapsulates and answers for the VIP. Such a check's socket closes with
// a RST, so its fixed source port is free again at once (tunnel.go).
//
// Checks of one backend start Config.Interval apart (start to start), each
// delay randomised by ±Config.Jitter so that the checks of many backends, all
// started by one config load, do not fire in lockstep (HAProxy's
// spread-checks does the same).
//
// # States
//
// Every backend is Unknown, Up or Down; only Up is routable. Rise consecutive
// passing checks take a backend Up, fall consecutive failing ones take it
// Down (HAProxy's rise and fall). The counts protect a serving backend from a
// single lost probe and keep a recovering one out until it has shown it
// works.
//
// A new backend starts Unknown, which routes like Down: it receives traffic
// only after rise passing checks. This is the safe choice for an L4 balancer
// whose tables every instance of the fleet must agree on: a backend that is
// not listening yet would otherwise black-hole a share of new flows for
// fall×interval. HAProxy starts servers up by default (its init-state
// option makes that configurable); Config.StartUp gives that behaviour for
// operators who prefer it: the backend starts Up, and its first failing
// check takes it Down at once (it has not yet earned fall's tolerance). An
// Unknown backend goes Down after fall failing checks, like an Up one, and
// also after rise+fall checks that gave neither rise passes nor fall
// failures in a row (a backend that fails every other check): a backend
// that cannot pass rise checks in a row is not working, and a checker must
// not stay without a verdict for ever. This Down is a first verdict, not a
// flap.
//
// # Flap damping
//
// Section 5.2 of the seed chapter shows a backend that a passing check kept
// bringing back while real traffic kept failing it: down six times in 13 s,
// each return costing more errors. Checks must never fight. A backend that
// goes Down within the flap window after it came Up (Config.FlapWindow, a
// number of checks, 20 by default: 4 s at a 200 ms interval, 40 s at the
// default 2 s) has flapped: it goes Down and is ejected for a backoff
// time, during which passing checks are counted but cannot bring it Up. The
// first ejection lasts Config.BackoffBase; each further flap doubles it, up
// to Config.BackoffMax (Envoy's outlier detection also lengthens each
// ejection, base_ejection_time × times ejected, capped by max_ejection_time,
// 300 s by default). The backoff returns to zero once
// the backend has stayed Up for a whole flap window. The window is counted
// in checks, not derived from rise and fall, so that a flap of any period
// shorter than the window is damped (the old 2×(rise+fall)×interval was
// 1.6 s in the lab and let a 2 s flap through). One flap is enough to
// eject: a backend that cannot stay up for one window is not worth the
// errors of finding out again.
//
// # Reload
//
// Manager.Set takes the complete desired set of targets. A target whose
// address and config are unchanged keeps its checker and its state.
// Checkers whose targets ask the same thing of the same address
// (ShareKey: backends of several VIPs on one server) take their answers
// from one run of checks, each judging them with its own rise, fall and
// flap settings; a checker that joins one is checked within firstDelay,
// as a checker of its own would be. A target whose config changed but whose address did not gets a new
// checker that inherits the old state (counters, ejection, RTT), so that
// editing a check parameter does not send a whole VIP back to Unknown; a
// running ejection longer than a lowered flap_backoff_max is cut to end that
// long after it began. A target whose address changed starts afresh.
//
// # Events
//
// Every state change is an Event. A Checker hands it to a callback; the
// Manager queues it on a buffered channel. A slow consumer never blocks a
// checker: when the channel is full, events are held per backend, and a
// further change of the same backend is merged into the held event (Old from
// the first, New and Status from the latest, Coalesced counting both). The
// consumer therefore sees every backend's latest state, in order per backend,
// with memory bounded by the number of backends; it may miss intermediate
// states, never the last one.
//
// # Round-trip times
//
// Each passing check records its round trip (TCP: connect time; HTTP: time
// to the response headers) as Status.LastRTT and folds it into
// Status.RTTEWMA, for load-aware scheduling. Failing checks are left out:
// a backend that refuses fast must not look fast (the chapter's black hole,
// section 5.3).
package health
