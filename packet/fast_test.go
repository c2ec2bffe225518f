package packet

import (
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// checkParseFlow asserts ParseFlow's contract on one frame: when it accepts
// a frame, Parse accepts it too and every field ParseFlow sets equals
// Parse's, whatever the Parsed held before; when it declines, fine (Parse
// decides).
func checkParseFlow(t *testing.T, frame []byte) (accepted bool) {
	t.Helper()
	var want Parsed
	r := Parse(frame, &want)
	got := Parsed{FragID: 77, NumVLANs: 2, ICMPType: 9, Fragment: true} // stale fields from an earlier packet
	stale := got
	if !ParseFlow(frame, &got) {
		return false
	}
	if r != OK {
		t.Fatalf("ParseFlow accepted a frame Parse refuses (%v): % x", r, frame)
	}
	// The fields ParseFlow leaves alone keep their old values.
	want.FragID, want.NumVLANs, want.ICMPType, want.Fragment = stale.FragID, stale.NumVLANs, stale.ICMPType, stale.Fragment
	if got != want {
		t.Fatalf("ParseFlow\n got %+v\nwant %+v", got, want)
	}
	return true
}

func TestParseFlowAgreesWithParse(t *testing.T) {
	p := gopacket.Payload([]byte("0123456789abcdef"))
	tcpFlags := func(l *layers.TCP, syn, ack, fin, rst bool) *layers.TCP {
		l.SYN, l.ACK, l.FIN, l.RST = syn, ack, fin, rst
		return l
	}
	opts := ip4("198.51.100.10", "203.0.113.7", layers.IPProtocolTCP)
	opts.Options = []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}
	tos := ip4("198.51.100.10", "203.0.113.7", layers.IPProtocolUDP)
	tos.TOS = 0xb9
	tc6 := ip6("2001:db8::1", "2001:db8::7", layers.IPProtocolTCP)
	tc6.TrafficClass = 0x2e
	tests := []struct {
		name   string
		frame  []byte
		accept bool
	}{
		{"ipv4 tcp ack", build(t, eth(layers.EthernetTypeIPv4), ip4("198.51.100.10", "203.0.113.7", layers.IPProtocolTCP), tcpFlags(tcp(40000, 80, false, true), false, true, false, false), p), true},
		{"ipv4 tcp syn", build(t, eth(layers.EthernetTypeIPv4), ip4("198.51.100.10", "203.0.113.7", layers.IPProtocolTCP), tcp(40000, 80, true, false), p), true},
		{"ipv4 tcp syn+rst", build(t, eth(layers.EthernetTypeIPv4), ip4("198.51.100.10", "203.0.113.7", layers.IPProtocolTCP), tcpFlags(tcp(40000, 80, true, false), true, false, false, true), p), false},
		{"ipv4 udp tos", build(t, eth(layers.EthernetTypeIPv4), tos, udp(1, 2), p), true},
		{"ipv4 options", build(t, eth(layers.EthernetTypeIPv4), opts, tcp(40000, 80, false, true), p), false},
		{"ipv6 tcp", build(t, eth(layers.EthernetTypeIPv6), tc6, tcp(1, 443, false, true), p), true},
		{"ipv6 udp", build(t, eth(layers.EthernetTypeIPv6), ip6("2001:db8::1", "2001:db8::7", layers.IPProtocolUDP), udp(5, 53), p), true},
	}
	seeds := seedFrames(t)
	for i, f := range seeds {
		tests = append(tests, struct {
			name   string
			frame  []byte
			accept bool
		}{"seed " + string(rune('a'+i)), f, i < 2}) // the seeds' plain TCP and UDP frames
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := checkParseFlow(t, tt.frame); got != tt.accept {
				t.Fatalf("ParseFlow accepted = %v, want %v", got, tt.accept)
			}
			// Every truncation and a trailing pad keep the contract.
			for n := 0; n < len(tt.frame); n++ {
				checkParseFlow(t, tt.frame[:n])
			}
			checkParseFlow(t, append(append([]byte(nil), tt.frame...), 0, 0, 0, 0))
		})
	}
}

// FuzzParseFlow checks ParseFlow against Parse on arbitrary frames.
func FuzzParseFlow(f *testing.F) {
	for _, fr := range seedFrames(f) {
		f.Add(fr)
	}
	f.Fuzz(func(t *testing.T, frame []byte) { checkParseFlow(t, frame) })
}
