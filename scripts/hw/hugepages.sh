#!/usr/bin/env bash
# Reserves hugepages for Fulcrum on a real LB host (not used by `make bench`,
# which runs with --no-huge). With hugepages the mbuf pools and rings sit in
# few TLB entries; set `hugepages = true` in [eal] and size `memory_mb` to fit.
#
#   scripts/hw/hugepages.sh 4G          # 4 GiB of 2 MiB pages on every NUMA node
#   PAGESIZE=1G scripts/hw/hugepages.sh 8G
#   NODE=0 scripts/hw/hugepages.sh 4G   # only on node 0 (the NIC's node)
#
# Persistent across reboots: put the same on the kernel command line, e.g.
# `default_hugepagesz=1G hugepagesz=1G hugepages=8` (1 GiB pages are best
# reserved at boot, before memory fragments).
set -euo pipefail
size=${1:?usage: hugepages.sh SIZE (e.g. 4G)}
pagesize=${PAGESIZE:-2M}
[ "$(id -u)" = 0 ] || { echo "hugepages: run as root" >&2; exit 1; }
command -v dpdk-hugepages.py >/dev/null || { echo "hugepages: dpdk-hugepages.py not found (Debian package dpdk)" >&2; exit 1; }

args=(-p "$pagesize" --setup "$size")
[ -n "${NODE:-}" ] && args+=(-n "$NODE")
dpdk-hugepages.py "${args[@]}"
dpdk-hugepages.py -s
