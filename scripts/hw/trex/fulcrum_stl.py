"""TRex stateless profile: the traffic of Fulcrum's benchmark scenarios
(issue 6, scripts/bench.sh) on real NICs.

One continuous stream of TCP frames from many client flows toward the
scenario's VIP(s); the field engine varies the client address and port
(STLVmTupleGen), so flow k is always the same 5-tuple and the number of
distinct flows is exactly --flows. TRex port 0 sends to Fulcrum's wire port;
Fulcrum's tunnelled output comes back to TRex port 1 (set Fulcrum's
next_hop_mac to that port's MAC, or route it there).

From the TRex console (trex-console, server started with ./t-rex-64 -i):

    start -f fulcrum_stl.py -p 0 -m 10mpps -t --scenario est-1m --lb-mac 3c:fd:fe:00:00:01
    stats                     # opackets on port 0, ipackets on port 1

Raise -m until port 1 receives less than port 0 sends: that is Fulcrum's
no-drop rate for the scenario (or use TRex's NDR benchmark,
stl/ndr_bench.py). The VIPs and backends of Fulcrum's configuration must
match the scenario: `fulcrum-bench -vips SCENARIO` prints them.
"""

import argparse
import ipaddress

from trex_stl_lib.api import *  # noqa: F401,F403 (TRex's documented profile import)

# name: (TCP flags, frame size with FCS, flows, VIPs, IPv6)
# Same shapes as cmd/fulcrum-bench/scenario.go.
SCENARIOS = {
    "syn-1m": ("S", 64, 1000000, 1, False),
    "est-10k": ("A", 64, 10000, 1, False),
    "est-1m": ("A", 64, 1000000, 1, False),
    "est-10k-1518": ("A", 1518, 10000, 1, False),
    "ipv6-10k": ("A", 78, 10000, 1, True),
    "vips-100": ("A", 64, 10000, 100, False),
    "backends-1000": ("A", 64, 10000, 1, False),  # 1000 backends: Fulcrum's config
}

PORT_MIN, PORT_MAX = 1025, 65535  # client source ports, as fulcrum-gen uses
VIP_PORT = 80


class FulcrumScenario(object):
    def get_streams(self, tunables, **kwargs):
        parser = argparse.ArgumentParser(description="Fulcrum benchmark scenarios")
        parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="est-10k")
        parser.add_argument("--lb-mac", default="02:00:00:00:00:02", help="MAC of Fulcrum's wire port")
        parser.add_argument("--src-mac", default="02:00:00:00:00:01")
        parser.add_argument("--flows", type=int, default=0, help="override the scenario's flow count")
        args = parser.parse_args(tunables)
        flags, size, flows, vips, ipv6 = SCENARIOS[args.scenario]
        flows = args.flows or flows

        # Enough client addresses that addresses x ports covers the flows;
        # TupleGen steps the address first, then the port, and wraps after
        # limit_flows, so the flow population is exactly `flows`.
        per_ip = PORT_MAX - PORT_MIN + 1
        n_ips = (flows + per_ip - 1) // per_ip
        if ipv6:
            vip = "2001:db8:ffff::7"
            base = Ether(dst=args.lb_mac, src=args.src_mac) / IPv6(src="2001:db8:c::", dst=vip) / TCP(sport=PORT_MIN, dport=VIP_PORT, flags=flags)
            ip_min, ip_max = "0.0.0.1", str(ipaddress.IPv4Address(n_ips))
            l3 = "IPv6"
            write_ip = STLVmWrFlowVar(fv_name="tuple.ip", pkt_offset="IPv6.src", offset_fixup=12)  # low 32 bits
        else:
            vip = "203.0.113.7" if vips == 1 else "203.0.113.1"
            base = Ether(dst=args.lb_mac, src=args.src_mac) / IP(src="198.51.100.1", dst=vip) / TCP(sport=PORT_MIN, dport=VIP_PORT, flags=flags)
            first = ipaddress.IPv4Address("198.51.100.1")
            ip_min, ip_max = str(first), str(first + n_ips - 1)
            l3 = "IP"
            write_ip = STLVmWrFlowVar(fv_name="tuple.ip", pkt_offset="IP.src")
        pad = max(0, size - 4 - len(base)) * b"x"  # the NIC adds the 4-byte FCS

        ops = [
            STLVmTupleGen(name="tuple", ip_min=ip_min, ip_max=ip_max, port_min=PORT_MIN, port_max=PORT_MAX, limit_flows=flows),
            write_ip,
            STLVmWrFlowVar(fv_name="tuple.port", pkt_offset="TCP.sport"),
        ]
        if vips > 1:
            # One VIP per flow: both variables step once per packet and the
            # flow count is a multiple of the VIP count.
            ops += [
                STLVmFlowVar(name="vip", min_value="203.0.113.1", max_value="203.0.113.%d" % vips, size=4, op="inc"),
                STLVmWrFlowVar(fv_name="vip", pkt_offset="IP.dst"),
            ]
        ops.append(STLVmFixChecksumHw(l3_offset=l3, l4_offset="TCP", l4_type=CTRexVmInsFixHwCs.L4_TYPE_TCP))

        return [STLStream(packet=STLPktBuilder(pkt=base / pad, vm=STLScVmRaw(ops)), mode=STLTXCont())]


def register():
    return FulcrumScenario()
