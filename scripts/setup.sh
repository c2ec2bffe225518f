#!/usr/bin/env bash
# Installs what every make target needs (build, test, demo, lab, bench,
# deb, deb-test) on a Debian 12 machine, down to a debootstrap minbase
# root with git, make, gcc, libc6-dev, pkg-config, sudo, procps, iproute2,
# curl, python3 and Go. Idempotent: it installs only what is missing, and
# says what in one line per group. Debian packages and Go modules only.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each group: a name, then "check:package" pairs; the check is a command
# (found on PATH), a file (an absolute path) or "pc:NAME" (pkg-config).
groups=(
	"build (cgo, DPDK 22.11 headers and libraries)|gcc:gcc /usr/include/stdio.h:libc6-dev pkg-config:pkg-config pc:libdpdk:libdpdk-dev"
	"reference scripts (tests compare with the chapter's Python)|python3:python3"
	"lab: router, clients, plumbing (scripts/lab)|bird:bird2 birdc:bird2 wrk:wrk curl:curl ethtool:ethtool ip:iproute2 sysctl:procps"
	"lab: service names for wrk and curl (/etc/services)|/etc/services:netbase"
	"benchmark: dpdk-testpmd, the I/O ceiling (make bench)|dpdk-testpmd:dpdk-dev stdbuf:coreutils"
	"packaging: dpkg-deb, systemd-analyze verify, a fresh root for deb-test|dpkg-deb:dpkg systemd-analyze:systemd debootstrap:debootstrap gzip:gzip"
	"admin tests: promtool (metrics check), headless chromium (status page)|promtool:prometheus chromium:chromium"
	"TLS for go mod download|/etc/ssl/certs/ca-certificates.crt:ca-certificates"
)

present() {
	case $1 in
	pc:*) pkg-config --exists "${1#pc:}" 2>/dev/null ;;
	/*) [ -e "$1" ] ;;
	*) command -v "$1" >/dev/null 2>&1 ;;
	esac
}

need=()
for g in "${groups[@]}"; do
	name=${g%%|*}
	pkgs=()
	for pair in ${g#*|}; do
		check=${pair%:*} pkg=${pair##*:}
		present "$check" || [[ " ${pkgs[*]} " == *" $pkg "* ]] || pkgs+=("$pkg")
	done
	if ((${#pkgs[@]})); then
		need+=("${pkgs[@]}")
	fi
done

if ((${#need[@]})); then
	if [ "$(id -u)" != 0 ]; then
		echo "setup: need root to install: ${need[*]}" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	# Wait for another apt or dpkg (unattended-upgrades on a fresh box,
	# another setup) to let go of its lock instead of failing at once.
	lock=(-o DPkg::Lock::Timeout=600)
	echo "setup: apt-get update"
	apt-get "${lock[@]}" update -qq
	# One apt-get per group, so each line is followed by its work and
	# a failure names its group.
	for g in "${groups[@]}"; do
		name=${g%%|*}
		pkgs=()
		for pair in ${g#*|}; do
			check=${pair%:*} pkg=${pair##*:}
			present "$check" || [[ " ${pkgs[*]} " == *" $pkg "* ]] || pkgs+=("$pkg")
		done
		((${#pkgs[@]})) || continue
		echo "setup: installing $name: ${pkgs[*]}"
		apt-get "${lock[@]}" install -y -qq --no-install-recommends "${pkgs[@]}" >/tmp/fulcrum-setup.log 2>&1 || {
			cat /tmp/fulcrum-setup.log >&2
			echo "setup: installing ${pkgs[*]} failed" >&2
			exit 1
		}
	done
fi

# The prometheus package is here for promtool only: its server (which
# would listen on :9090 beside the tests) must not run.
if command -v systemctl >/dev/null 2>&1 && systemctl is-enabled prometheus >/dev/null 2>&1; then
	systemctl disable --now prometheus >/dev/null 2>&1 || true
fi

command -v go >/dev/null 2>&1 || { echo "setup: Go is not installed (need Go 1.26)" >&2; exit 1; }
# Module hashes are pinned in go.sum, so a plain download verifies them.
[ -d "$(go env GOMODCACHE)/github.com/yerden" ] || echo "setup: Go modules (go mod download)"
go mod download
