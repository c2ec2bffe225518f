#!/usr/bin/env bash
# Installs what Fulcrum needs to build, test and run its demo on a Debian 12
# machine. Idempotent: it installs only what is missing. Debian packages and
# Go modules only.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages, by the command or file that shows they are present.
#   libdpdk-dev  DPDK 22.11 headers and libraries (pkg-config libdpdk)
#   dpdk-dev     dpdk-testpmd, the I/O ceiling benchmarks compare against
#   pkg-config   how cgo finds DPDK
#   python3      runs the seed chapter's reference scripts in tests
#   bird2, wrk, curl, ethtool, iproute2   the lab's router, clients and plumbing
need=()
pkg-config --exists libdpdk 2>/dev/null || need+=(libdpdk-dev)
command -v dpdk-testpmd >/dev/null 2>&1 || need+=(dpdk-dev)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v python3 >/dev/null 2>&1 || need+=(python3)
command -v gcc >/dev/null 2>&1 || need+=(gcc)
# The lab (scripts/lab): a real router, real clients, namespaces.
command -v bird >/dev/null 2>&1 || need+=(bird2)
command -v wrk >/dev/null 2>&1 || need+=(wrk)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v ethtool >/dev/null 2>&1 || need+=(ethtool)
command -v ip >/dev/null 2>&1 || need+=(iproute2)

if ((${#need[@]})); then
	if [ "$(id -u)" != 0 ]; then
		echo "setup: need root to install: ${need[*]}" >&2
		exit 1
	fi
	echo "setup: installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

command -v go >/dev/null 2>&1 || { echo "setup: Go is not installed (need Go 1.26)" >&2; exit 1; }
# Module hashes are pinned in go.sum, so a plain download verifies them.
go mod download
