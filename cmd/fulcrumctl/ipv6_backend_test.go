package main

import (
	"strings"
	"testing"

	"github.com/fulcrumlb/fulcrum/config/configtest"
)

// TestFlushBackendByNonCanonicalIPv6Address: --backend ADDRESS without
// --vip is matched by fulcrumctl against the printed (canonical) address
// as a string, while the daemon parses it. An IPv6 backend written in
// another valid form (upper case, zeros, IPv4-mapped) is "no VIP has it"
// without --vip, and flushed with --vip.
func TestFlushBackendByNonCanonicalIPv6Address(t *testing.T) {
	toml := configtest.New().
		Dataplane(`next_hop_mac = "02:00:00:00:00:fe"`, `lb_ipv6 = "2001:db8:1::10"`).
		Section("conntrack", "capacity = 65536").
		Section("[vip]", `name = "web6"`, `address = "2001:db8:ffff::7"`, `port = 80`).
		Backend("c1", "2001:db8:2::11").
		String()
	_, base := probeDaemon(t, toml)
	for _, ref := range []string{"2001:db8:2::11", "2001:DB8:2::11", "2001:db8:2:0:0:0:0:11"} {
		withVIP, _, errs1 := ctl(with(base, "flush", "--vip", "web6", "--backend", ref)...)
		without, _, errs2 := ctl(with(base, "flush", "--backend", ref)...)
		if withVIP != exitOK || without != exitOK {
			t.Errorf("flush --backend %s: with --vip exit %d (%s), without exit %d (%s)", ref, withVIP, strings.TrimSpace(errs1), without, strings.TrimSpace(errs2))
		}
	}
	for _, ref := range []string{"2001:DB8:2::11"} {
		without, _, errs := ctl(with(base, "conns", "--backend", ref)...)
		if without != exitOK {
			t.Errorf("conns --backend %s: exit %d (%s)", ref, without, strings.TrimSpace(errs))
		}
	}
}
