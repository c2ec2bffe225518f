package maglev

import "errors"

// Limits and defaults an operator may need, in one place.
const (
	// DefaultSize is the table size M used when the configuration names none.
	// 65537 is the prime the Maglev paper's experiments use (section 5.3) and
	// Envoy's default (maglev.proto). The paper recommends M > 100 × N so that
	// backends' shares differ by at most 1%: 65537 suits up to about 650
	// equally weighted backends per VIP.
	DefaultSize = 65537

	// MaxSize is the largest table size Build accepts. It is Envoy's upper
	// bound for table_size (maglev.proto): 5,000,011 slots keep a 1%
	// balance for 50,000 backends and cost at most 20 MB per table. The
	// bound also keeps a typo in a configuration from allocating gigabytes.
	// The primality test (IsPrime) is exact for every size up to 2^32.
	MaxSize = 5000011
)

// Errors Build returns, wrapped with the backend or the value at fault.
// Test for them with errors.Is.
var (
	ErrNoBackends      = errors.New("no backends")
	ErrEmptyKey        = errors.New("empty key")
	ErrDuplicateKey    = errors.New("duplicate key")
	ErrAllWeightsZero  = errors.New("all weights are zero")
	ErrSizeNotPrime    = errors.New("not prime")
	ErrSizeTooLarge    = errors.New("too large")
	ErrTooManyBackends = errors.New("more backends than slots")
	ErrSizeMismatch    = errors.New("tables differ in size")
)
