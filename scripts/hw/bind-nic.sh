#!/usr/bin/env bash
# Binds NIC ports to vfio-pci for DPDK (Fulcrum's wire port, or a packet
# generator's ports), or gives them back to their kernel driver.
#
#   scripts/hw/bind-nic.sh status
#   scripts/hw/bind-nic.sh bind 0000:03:00.0 [0000:03:00.1 ...]
#   scripts/hw/bind-nic.sh unbind ixgbe 0000:03:00.0   # back to the kernel driver
#
# Notes:
# - The kernel loses the interface when it is bound: do not bind the port you
#   are logged in through. Fulcrum's exception path (net_tap, `fulcrum0`)
#   gives the host its addresses, ARP and BGP back on that port.
# - vfio-pci needs the IOMMU on (intel_iommu=on or amd_iommu=on, iommu=pt on
#   the kernel command line); without one, `modprobe vfio enable_unsafe_noiommu_mode=1`.
# - Mellanox/NVIDIA ConnectX ports stay on mlx5_core (bifurcated PMD): do not
#   bind them; pass their PCI address to DPDK as is.
# - Put the port's NUMA node (`cat /sys/bus/pci/devices/ADDR/numa_node`)
#   into worker_lcores and hugepages (NODE=... scripts/hw/hugepages.sh).
set -euo pipefail
cmd=${1:-status}
shift || true
[ "$(id -u)" = 0 ] || { echo "bind-nic: run as root" >&2; exit 1; }
command -v dpdk-devbind.py >/dev/null || { echo "bind-nic: dpdk-devbind.py not found (Debian package dpdk)" >&2; exit 1; }

case "$cmd" in
status)
	dpdk-devbind.py --status-dev net
	;;
bind)
	[ $# -ge 1 ] || { echo "usage: bind-nic.sh bind PCI..." >&2; exit 2; }
	modprobe vfio-pci
	for dev in "$@"; do
		for ifc in /sys/bus/pci/devices/"$dev"/net/*; do
			[ -e "$ifc" ] && ip link set dev "$(basename "$ifc")" down
		done
	done
	dpdk-devbind.py -b vfio-pci "$@"
	dpdk-devbind.py --status-dev net
	;;
unbind)
	[ $# -ge 2 ] || { echo "usage: bind-nic.sh unbind KERNEL_DRIVER PCI..." >&2; exit 2; }
	drv=$1
	shift
	dpdk-devbind.py -b "$drv" "$@"
	dpdk-devbind.py --status-dev net
	;;
*)
	echo "usage: bind-nic.sh status | bind PCI... | unbind KERNEL_DRIVER PCI..." >&2
	exit 2
	;;
esac
