// Package punt is the policy of the exception path: the classes of the
// traffic the dataplane hands to the host's kernel, and the budget of
// packets a second each class may spend on a forwarding lcore. It owns the
// [dataplane.punt] settings (their keys, defaults and limits); package
// dataplane classifies packets and enforces the budgets.
//
// A packet handed to the kernel costs the lcore a write to the tap and the
// kernel's work on it: microseconds, where a forwarded packet costs tens of
// nanoseconds. A flood aimed at the LB's own address (or at a broadcast or
// multicast address) would otherwise take the core from the VIPs' traffic.
// So every punt takes a token from its class's budget on its lcore, and a
// packet over the budget is dropped and counted. The classes keep the
// traffic the LB itself needs alive while an attacker spends another
// class's budget, in the way a router polices its control plane:
//   - neighbour: ARP and IPv6 neighbour discovery (neighbour
//     solicitations and advertisements, router advertisements,
//     redirects), without which the next hop and the LB's own address
//     stop resolving. Neighbour discovery counts here only as the kernel
//     takes it (hop limit 255, code 0, not fragmented), so that it comes
//     from the link: a lookalike from the internet is other, and so is a
//     router solicitation, which a host drops. So are multicast listener
//     queries from the link (link-local source, hop limit 1), which keep
//     snooping switches sending the LB its neighbour solicitations; other
//     hosts' listener reports, which a host needs not, are other;
//   - bgp: anything from a configured BGP neighbour's address (the
//     session, and ICMP about it);
//   - health: the health checks' answers: anything from a backend's
//     address (checks sent directly) and TCP from a VIP's address to the
//     checks' source ports (checks through the tunnel, answered by DSR);
//   - other: the rest (ping and ssh to the LB, DHCP, LLDP, multicast).
//
// Classes are told apart by source address and protocol, which a spoofer
// can forge: a flood forged from a BGP neighbour's address spends the bgp
// budget, not the others'. Whatever the traffic, the budgets bound the
// core's time on the exception path.
package punt

import (
	"errors"
	"fmt"
)

// Class is a class of the exception path's traffic.
type Class uint8

// The classes.
const (
	Neighbour Class = iota
	BGP
	Health
	Other

	NumClasses = 4
)

var names = [NumClasses]string{"neighbour", "bgp", "health", "other"}

// String is the class's name: its key in [dataplane.punt] and its label in
// the metrics.
func (c Class) String() string {
	if c < NumClasses {
		return names[c]
	}
	return "invalid"
}

// Config is [dataplane.punt]: the packets a second each class may hand to
// the kernel, per forwarding lcore (a flow's packets all reach one lcore,
// so a budget shared among lcores would starve the one that has the BGP
// session). 0 (or absent) takes the default.
type Config struct {
	Neighbour int `toml:"neighbour"`
	BGP       int `toml:"bgp"`
	Health    int `toml:"health"`
	Other     int `toml:"other"`
}

// Default: about 15,000 punts a second an lcore at most, a small share of
// the core. The health class is the largest: a few thousand backends
// checked every few seconds answer with several packets a check (package
// config raises it where the configured checks need more).
var Default = Config{Neighbour: 2000, BGP: 2000, Health: 10000, Other: 1000}

// MaxRate bounds each class's rate: more would let the exception path
// take the whole core.
const MaxRate = 1_000_000

// MinBurst is the smallest burst a budget allows, so that a receive burst
// of one class is never cut by a low rate alone.
const MinBurst = 64

// Burst is what a budget of rate packets a second may spend at once: a
// tenth of a second's worth, at least MinBurst.
func Burst(rate int) int { return max(rate/10, MinBurst) }

// Rates are a Config's rates by Class.
type Rates [NumClasses]int

// Rates is c by class, defaults filled in.
func (c Config) Rates() Rates {
	c = c.WithDefaults()
	return Rates{Neighbour: c.Neighbour, BGP: c.BGP, Health: c.Health, Other: c.Other}
}

// WithDefaults is c with every zero rate set to Default's.
func (c Config) WithDefaults() Config {
	for _, f := range []struct{ v, def *int }{{&c.Neighbour, &Default.Neighbour}, {&c.BGP, &Default.BGP}, {&c.Health, &Default.Health}, {&c.Other, &Default.Other}} {
		if *f.v == 0 {
			*f.v = *f.def
		}
	}
	return c
}

// FieldError is a problem with one key of Config.
type FieldError struct {
	Key string // the class's name
	Msg string
}

func (e *FieldError) Error() string { return e.Key + ": " + e.Msg }

// Validate checks every rate: 0 (the default) to MaxRate. It joins one
// *FieldError per bad key.
func (c Config) Validate() error {
	var errs []error
	for cl, v := range [NumClasses]int{c.Neighbour, c.BGP, c.Health, c.Other} {
		if v < 0 || v > MaxRate {
			errs = append(errs, &FieldError{Key: Class(cl).String(), Msg: fmt.Sprintf("%d is outside 0..%d (packets a second an lcore; 0: the default)", v, MaxRate)})
		}
	}
	return errors.Join(errs...)
}
