package main

import (
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// Two VIPs of one backend each: every flow of a VIP belongs to its only
// backend, whatever the hash and the table, so the expected answer does
// not come from the code that checks it.
const verifyConfig = `
[dataplane]
port = "net_pcap0"
lb_ipv4 = "192.0.2.10"
next_hop_mac = "02:00:00:00:00:fe"
encap = "gre"
hash_key = "000102030405060708090a0b0c0d0e0f"

[[vip]]
name = "a"
address = "203.0.113.1"
port = 80
  [[vip.backend]]
  address = "10.1.0.1"

[[vip]]
name = "b"
address = "203.0.113.2"
port = 80
  [[vip.backend]]
  address = "10.1.0.2"
`

// greFrame is a GRE tunnel from the LB to backend carrying a TCP packet
// from the client to vip, built with gopacket.
func greFrame(t *testing.T, backend, vip net.IP, sport uint16) []byte {
	t.Helper()
	inner := gopacket.NewSerializeBuffer()
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: net.IP{198, 51, 100, 7}, DstIP: vip}
	tcp := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: 80, SYN: true, Window: 1000}
	_ = tcp.SetNetworkLayerForChecksum(ip)
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(inner, opts, ip, tcp); err != nil {
		t.Fatal(err)
	}
	out := gopacket.NewSerializeBuffer()
	err := gopacket.SerializeLayers(out, opts,
		&layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 0xfe}, EthernetType: layers.EthernetTypeIPv4},
		&layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolGRE, SrcIP: net.IP{192, 0, 2, 10}, DstIP: backend},
		&layers.GRE{Protocol: layers.EthernetTypeIPv4},
		gopacket.Payload(inner.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func TestCheckFrames(t *testing.T) {
	a, b := net.IP{203, 0, 113, 1}, net.IP{203, 0, 113, 2}
	beA, beB := net.IP{10, 1, 0, 1}, net.IP{10, 1, 0, 2}
	var good [][]byte
	for i := 0; i < 20; i++ {
		good = append(good, greFrame(t, beA, a, uint16(1000+i)), greFrame(t, beB, b, uint16(2000+i)))
	}
	res, err := checkFrames(verifyConfig, good)
	if err != nil {
		t.Fatal(err)
	}
	if res.Frames != 40 || res.Wrong != 0 {
		t.Errorf("right backends: %+v, want 40 frames, 0 wrong", res)
	}
	bad := append(good[:4:4],
		greFrame(t, beB, a, 3000), // VIP a's flow at VIP b's backend
		greFrame(t, beA, b, 3001),
		[]byte{1, 2, 3}, // not a tunnel frame
	)
	res, err = checkFrames(verifyConfig, bad)
	if err != nil {
		t.Fatal(err)
	}
	if res.Frames != 7 || res.Wrong != 3 {
		t.Errorf("wrong backends: %+v, want 7 frames, 3 wrong", res)
	}
}
