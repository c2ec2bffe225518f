-- pktgen-DPDK range configuration: the established-traffic scenarios of
-- Fulcrum's benchmark (issue 6, scripts/bench.sh) on real NICs. pktgen's TCP
-- frames carry the ACK flag, so this is established traffic; the SYN and
-- IPv6 scenarios are in ../trex/fulcrum_stl.py.
--
--   pktgen -l 0-4 -n 4 -a 0000:03:00.0 -a 0000:03:00.1 -- -P -T \
--          -m "[1:2].0,[3:4].1" -f scripts/hw/pktgen/fulcrum-range.lua
--   Pktgen:/> start 0
--   Pktgen:/> page main        -- Tx pps on port 0, Rx pps on port 1
--
-- Port 0 sends to Fulcrum's wire port; Fulcrum's tunnels come back to port 1
-- (Fulcrum's next_hop_mac = port 1's MAC). Lower `set 0 rate N` (percent of
-- line rate) until port 1 receives what port 0 sends: the no-drop rate.
--
-- pktgen's range mode steps every field once per packet, each wrapping on its
-- own: the number of distinct flows is the least common multiple of the
-- ranges, so source addresses and ports use coprime counts
-- (16 x 62501 = 1,000,016 flows).

package.path = package.path .. ";?.lua;test/?.lua;app/?.lua;"
require "Pktgen"

local SCENARIO = "est-10k"          -- est-10k, est-1m, est-10k-1518, vips-100, backends-1000
local LB_MAC   = "02:00:00:00:00:02" -- Fulcrum's wire port
local SRC_MAC  = "02:00:00:00:00:01"

-- size: frame with FCS; ips x ports: client flows; vips: VIP addresses.
local scenarios = {
    ["est-10k"]       = { size = 64,   ips = 1,  ports = 10000, vips = 1 },
    ["est-1m"]        = { size = 64,   ips = 16, ports = 62501, vips = 1 },
    ["est-10k-1518"]  = { size = 1518, ips = 1,  ports = 10000, vips = 1 },
    ["vips-100"]      = { size = 64,   ips = 1,  ports = 10000, vips = 100 },
    ["backends-1000"] = { size = 64,   ips = 1,  ports = 10000, vips = 1 }, -- 1000 backends: Fulcrum's config
}
local s = scenarios[SCENARIO]
local port = "0"

pktgen.range.dst_mac(port, "start", LB_MAC)
pktgen.range.src_mac(port, "start", SRC_MAC)

pktgen.range.src_ip(port, "start", "198.51.100.1")
pktgen.range.src_ip(port, "inc", "0.0.0.1")
pktgen.range.src_ip(port, "min", "198.51.100.1")
pktgen.range.src_ip(port, "max", "198.51.100." .. s.ips)

local vip_first = (s.vips == 1) and "203.0.113.7" or "203.0.113.1"
local vip_last  = (s.vips == 1) and "203.0.113.7" or ("203.0.113." .. s.vips)
pktgen.range.dst_ip(port, "start", vip_first)
pktgen.range.dst_ip(port, "inc", (s.vips == 1) and "0.0.0.0" or "0.0.0.1")
pktgen.range.dst_ip(port, "min", vip_first)
pktgen.range.dst_ip(port, "max", vip_last)

pktgen.set_proto(port, "tcp")
pktgen.range.ip_proto(port, "tcp")

pktgen.range.src_port(port, "start", 1025)
pktgen.range.src_port(port, "inc", 1)
pktgen.range.src_port(port, "min", 1025)
pktgen.range.src_port(port, "max", 1025 + s.ports - 1)

pktgen.range.dst_port(port, "start", 80)
pktgen.range.dst_port(port, "inc", 0)
pktgen.range.dst_port(port, "min", 80)
pktgen.range.dst_port(port, "max", 80)

pktgen.range.pkt_size(port, "start", s.size)
pktgen.range.pkt_size(port, "inc", 0)
pktgen.range.pkt_size(port, "min", s.size)
pktgen.range.pkt_size(port, "max", s.size)

pktgen.set_range(port, "on")
printf("fulcrum-range: scenario %s on port %s (%d flows, %d-byte frames); `start %s` to send\n",
    SCENARIO, port, s.ips * s.ports, s.size, port)
