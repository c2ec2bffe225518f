package gen_test

import (
	"fmt"

	"github.com/fulcrumlb/fulcrum/gen"
)

// A mix of SYNs and established traffic to one IPv4 and one IPv6 VIP, with
// 1% malformed frames, generated into one reused buffer.
func Example() {
	vips, _ := gen.ParseVIPs("203.0.113.7:80,[2001:db8::7]:443")
	g, err := gen.New(gen.Config{VIPs: vips, Mode: gen.ModeMix, IPv6: 0.5, Flows: 1000, Malformed: 0.01, Seed: 1})
	if err != nil {
		panic(err)
	}
	buf := make([]byte, 0, g.MaxFrameLen())
	for range 10000 {
		buf, _ = g.Next(buf)
	}
	fmt.Println(g.Counts())
	// Output:
	// valid-v4=4957 valid-v6=4947 malformed=96 non-vip=0 arp=0 (syn=4980 established=4924 udp=0 truncated-ip=17 bad-ip-header=15 bad-ip-length=24 truncated-l4=19 bad-l4-length=21)
}
