//go:build linux

package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestPeersTooWideRefused: -peers 0.0.0.0/0 and ::/0 were refused, but the
// same sets written as halves (0.0.0.0/1,128.0.0.0/1; ::/1,8000::/1) were
// accepted, and the agent would then forward a forged second chance to any
// address. A prefix wider than /8 (IPv4) or /16 (IPv6) is refused; those
// widths are accepted.
func TestPeersTooWideRefused(t *testing.T) {
	for _, v := range []string{"0.0.0.0/1,128.0.0.0/1", "::/1,8000::/1", "10.0.0.0/7", "fc00::/7", "2000::/3"} {
		if _, err := parseFlags([]string{"-peers", v}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "-peers") {
			t.Errorf("-peers %s: err %v, want it refused", v, err)
		}
	}
	for _, v := range []string{"10.0.0.0/8", "fd00::/16", "10.0.2.0/24,2001:db8::/32"} {
		if _, err := parseFlags([]string{"-peers", v}, &bytes.Buffer{}); err != nil {
			t.Errorf("-peers %s: %v, want it accepted", v, err)
		}
	}
}
