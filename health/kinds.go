package health

import "strings"

// Kinds of check (Config.Kind).
const (
	KindTCP   = "tcp"   // TCP connect, then close
	KindHTTP  = "http"  // HTTP/1.1 GET, status code checked
	KindHTTPS = "https" // the same over TLS
)

// kindInfo is everything the package knows about one kind of check.
type kindInfo struct {
	name string
	// request: the check sends a request, so Path, Host and ExpectStatus
	// apply and Validate checks them.
	request bool
	// newProber builds the prober of a Config that Validate accepted,
	// connecting with dial.
	newProber func(Config, dialFunc) Prober
}

// kinds is the registry of checks, in the order error messages list them:
// Validate, NewProber and Kinds read it, and package config asks Kinds
// rather than naming any. Adding a kind is a constant above, a row here and
// the prober's own file (see docs/architecture.md).
var kinds = []kindInfo{
	{name: KindTCP, newProber: func(_ Config, d dialFunc) Prober { return &TCPProber{dial: d} }},
	{name: KindHTTP, request: true, newProber: func(c Config, d dialFunc) Prober { return newHTTPProber(c, d) }},
	{name: KindHTTPS, request: true, newProber: func(c Config, d dialFunc) Prober { return newHTTPProber(c, d) }},
}

// Kinds lists the names of every kind of check, for help and error texts.
func Kinds() []string {
	names := make([]string, len(kinds))
	for i := range kinds {
		names[i] = kinds[i].name
	}
	return names
}

// lookupKind finds a kind by name; nil if there is none.
func lookupKind(name string) *kindInfo {
	for i := range kinds {
		if kinds[i].name == name {
			return &kinds[i]
		}
	}
	return nil
}

// kindList is the names for an error message: "tcp, http, https".
func kindList() string { return strings.Join(Kinds(), ", ") }

// AnswersPerCheck is about how many packets a backend sends the LB for one
// check of kind: a TCP connect's SYN-ACK and the close's FIN and ACK; an
// HTTP check's answer segments besides; a TLS handshake's records on top
// for HTTPS. The exception path must let that many through for every
// check (package punt's health budget, sized from it by package config).
func AnswersPerCheck(kind string) int {
	switch kind {
	case KindTCP:
		return 3
	case KindHTTPS:
		return 12
	}
	return 6
}
