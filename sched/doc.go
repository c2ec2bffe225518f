// Package sched chooses a backend for a new flow when a VIP's scheduler is
// not Maglev: weighted random, weighted round robin, least connections,
// power of two choices (HAProxy's random(<draws>)) and peak EWMA. The
// dataplane calls these pickers once per new flow (conntrack then pins the
// choice) and fulcrum-sim drives the very same code in its simulations, so
// the simulator's tables show what these rules do with what they are
// given. What the dataplane gives them is less than the simulator's
// servers tell: connections in progress as each lcore sees them, and for
// peak EWMA handshake and health-check round trips, not response times
// (README, the simulator).
//
// # Only Maglev is the same everywhere
//
// Maglev (the default, Kind Maglev) is not a Picker: the dataplane looks the
// flow up in the VIP's Maglev table, which every instance of the fleet
// computes identically, so a flow that ECMP moves to another instance keeps
// its backend. Every picker here decides from local state (its own random
// numbers, its own counts of active flows), so two instances choose
// differently for the same flow: a flow moved by ECMP to an instance that
// has not seen it lands wherever that instance's picker sends it.
//
// # Inputs and ownership
//
// A choice reads a slice of Load, one per backend position. Weight 0 means
// "not eligible" (down, draining, ejected). Active is the backend's load
// signal, normally the active flows the LB holds for it. Pick returns the
// chosen position, or -1 if no backend is eligible. Pick never allocates
// (RoundRobin allocates its state once per change of the backend count).
//
// Each lcore owns its pickers and its Rand: nothing here locks. Every lcore
// running its own weighted round robin still gives each backend its
// weighted share, since each lcore's sequence does.
//
// # Weights
//
// Load-aware pickers compare (Active+1)/Weight, by cross-multiplication in
// 128 bits, never in floating point. The +1 is HAProxy's leastconn and
// Envoy's weighted LEAST_REQUEST (weight / (active+1), least_request.proto):
// with idle backends the heavier one wins, where Active/Weight would call
// every idle backend equal and ignore the weights. Ties go to a uniformly
// random one of the tied backends, so no position is favoured.
//
// # Distinct draws
//
// P2C and PeakEWMA draw their candidates without replacement, weighted: a
// choice never compares a backend with itself. Drawing with replacement, as
// HAProxy's random(<draws>) did before the patch in seed 002, loses one
// choice out of N to a single-candidate "comparison" (one in four with 4
// backends and 2 draws). The WithReplacement option keeps that behaviour for
// the simulator's comparison only.
//
// # Latency: EWMA
//
// EWMA is the seed 003 exercise's average, bit for bit: microseconds (the
// exercise's thousandths of a millisecond) as integers, new = (3*sample +
// 7*old) / 10 truncating, the first sample starts the average. PeakEWMA's
// cost is latency × (Active+1) / Weight, where a backend with no sample yet
// costs Options.Penalty instead of 0: the exercise's cold-start trap (an
// unscored backend looks infinitely fast and takes every flow) is exactly
// what a production balancer must not do.
//
// The average decays per sample, not per unit of time, so a backend that
// gets no flows keeps its last (bad) average: feed it health-check round
// trips as samples too (issue 7), which is how a recovered backend wins
// flows back. fulcrum-sim policies shows the price of the latency signal in
// a fleet of equal servers (a request's latency there is mostly queueing
// noise, and peak EWMA does worse than p2c on counts); fulcrum-sim slow
// shows what it buys when one server is slow.
//
// # Cost
//
// Every picker but round robin walks the loads once per choice (to learn
// the eligible weights; least-conn to compare them all): O(backends) per
// new flow, with no allocation and no floating point.
package sched
