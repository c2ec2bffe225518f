#!/usr/bin/env bash
# Writes DEBIAN/control and DEBIAN/conffiles into a staged root (make deb).
# Depends: the packages that own the shared libraries the staged binaries
# link (ldd, dpkg -S), plus the DPDK drivers the EAL loads as plugins
# (mempool ring, tap for the exception path, pcap for captures), of the
# same ABI as the linked librte_eal.
# usage: deb-control.sh STAGE VERSION ARCH
set -euo pipefail
stage=$1 version=$2 arch=$3

owner() { # the package that owns library path $1 (merged /usr aware)
	local p
	for p in "$1" "/usr$1" "$(readlink -f "$1")" "/usr$(readlink -f "$1")"; do
		dpkg -S "$p" 2>/dev/null | head -1 | cut -d: -f1 && return 0
	done
	echo "deb-control: no package owns $1" >&2
	return 1
}

declare -A deps=()
for f in "$stage"/usr/bin/*; do
	file=$(head -c4 "$f" | od -An -c | tr -d ' ')
	[ "$file" = '177ELF' ] || continue
	while read -r lib; do
		pkg=$(owner "$lib")
		deps[$pkg]=1
	done < <(ldd "$f" 2>/dev/null | awk '$3 ~ /^\// {print $3}')
done
eal=$(printf '%s\n' "${!deps[@]}" | sed -n 's/^librte-eal\([0-9]*\)$/\1/p' | head -1)
if [ -n "$eal" ]; then
	for p in mempool-ring net-tap net-pcap; do deps[librte-$p$eal]=1; done
	recommends="dpdk, librte-net-ixgbe$eal, librte-net-i40e$eal, librte-net-ice$eal, librte-net-mlx5-$eal"
else
	echo "deb-control: the binaries link no librte_eal: built without DPDK?" >&2
	exit 1
fi
depends=$(printf '%s\n' "${!deps[@]}" | sort | paste -sd, - | sed 's/,/, /g')
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)

# dpkg-deb refuses a control directory below 0755 (a umask of 027).
mkdir -p "$stage/DEBIAN" && chmod 0755 "$stage/DEBIAN"
cat >"$stage/DEBIAN/control" <<CONTROL
Package: fulcrum
Version: $version
Architecture: $arch
Maintainer: Fulcrum developers <fulcrum@example.org>
Section: net
Priority: optional
Installed-Size: $size
Depends: $depends
Recommends: $recommends
Homepage: https://github.com/fulcrumlb/fulcrum
Description: Maglev L4 load balancer over DPDK
 Fulcrum forwards packets for virtual IPs to backends chosen with a
 Maglev lookup table, in GRE, IPIP or GUE tunnels, with connection
 tracking, health checks, an admin API (fulcrumctl) and a BGP speaker
 that announces the VIPs. Runs as the systemd unit fulcrum.service,
 configured in /etc/fulcrum/fulcrum.toml.
CONTROL
# Every file under /etc is the operator's: dpkg keeps their edits.
(cd "$stage" && find etc -type f | sed 's|^|/|') >"$stage/DEBIAN/conffiles"
cat >"$stage/DEBIAN/postinst" <<'POSTINST'
#!/bin/sh
set -e
if [ "$1" = configure ] && [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
POSTINST
cat >"$stage/DEBIAN/prerm" <<'PRERM'
#!/bin/sh
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
	systemctl stop fulcrum.service >/dev/null 2>&1 || true
fi
PRERM
cat >"$stage/DEBIAN/postrm" <<'POSTRM'
#!/bin/sh
set -e
# An enabled unit's link would dangle once the unit is gone.
if [ "$1" = purge ]; then
	rm -f /etc/systemd/system/multi-user.target.wants/fulcrum.service
fi
if { [ "$1" = remove ] || [ "$1" = purge ]; } && [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || true
fi
POSTRM
chmod 0644 "$stage/DEBIAN/control" "$stage/DEBIAN/conffiles"
chmod 0755 "$stage/DEBIAN/postinst" "$stage/DEBIAN/prerm" "$stage/DEBIAN/postrm"
echo "deb-control: Depends: $depends"
