package main

import (
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/fulcrumlb/fulcrum/admin/admintest"
	"github.com/fulcrumlb/fulcrum/config"
	"github.com/fulcrumlb/fulcrum/dataplane"
)

// echo is a ping from the test client to the web VIP's address.
func echo(t *testing.T, seq uint16) []byte {
	t.Helper()
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 60, Protocol: layers.IPProtocolICMPv4,
		SrcIP: net.IP{198, 51, 100, 10}, DstIP: net.IP(webVIP.Addr().AsSlice())}
	icmp := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: 7, Seq: seq}
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 0xaa}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, EthernetType: layers.EthernetTypeIPv4}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, icmp, gopacket.Payload("ping")); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

// TestStatusAccountsEveryPacket: `fulcrumctl status` lists, per
// worker and in total, RX and the outcome columns (forwarded, replies,
// punted, dropped). docs/drop-reasons.md's identity
// rx = forwarded + icmp-reply + echo replies + punted + drops
// must be readable from the table: pings to a VIP answered by the LB
// (echo replies) are in RX, and must be in some outcome column.
func TestStatusAccountsEveryPacket(t *testing.T) {
	t.Setenv("FULCRUM_TOKEN", "")
	t.Setenv("FULCRUM_ADDR", "")
	p := admintest.New(t, admintest.Config)
	addr := daemon(t, p, config.Admin{Listen: "127.0.0.1:0"})
	sendFlows(t, p, 1000, 10)
	echoes := 0
	for i := range 10 {
		if p.Send(echo(t, uint16(i))).Verdict == dataplane.Tx {
			echoes++
		}
	}
	if echoes != 10 {
		t.Fatalf("%d of 10 pings answered", echoes)
	}
	out := mustRun(t, "--addr", addr, "status")
	var header []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "WORKER" {
			header = f
		}
	}
	if header == nil {
		t.Fatalf("no worker table:\n%s", out)
	}
	outcome := map[string]bool{"FORWARDED": true, "ICMP-REPLIES": true, "ECHO-REPLIES": true, "PUNTED": true, "DROPPED": true}
	total := rowOf(t, out, "total")
	var rx, sum uint64
	for i, h := range header {
		n, err := strconv.ParseUint(total[i], 10, 64)
		if err != nil {
			continue
		}
		if h == "RX" {
			rx = n
		}
		if outcome[h] {
			sum += n
		}
	}
	if rx != 20 || sum != rx {
		t.Errorf("status: RX %d, outcome columns add up to %d (10 SYNs forwarded, 10 pings answered)\n%s", rx, sum, out)
	}
}
