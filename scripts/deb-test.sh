#!/usr/bin/env bash
# The Debian package on a fresh machine (make deb-test, run by make test as
# root): in an overlay over a debootstrap minbase Debian 12 root (made once
# and cached, the same base as ../shared/tools/fresh-check.sh's), install
# the .deb with dpkg (apt-get fetches its Depends), run `fulcrum check` on
# the installed conffile, and run the unit's ExecStart line (no systemd in
# a chroot) on a capture, checking that it forwarded. Then
# `systemd-analyze verify` on the installed unit. Mounts are undone on any
# exit. usage: deb-test.sh PACKAGE.deb
set -euo pipefail
deb=$(readlink -f "${1:?usage: deb-test.sh PACKAGE.deb}")
[ "$(id -u)" = 0 ] || { echo "deb-test: needs root (debootstrap, chroot, DPDK)" >&2; exit 1; }
# The mounts below live in a mount namespace of this run's own, so that
# they go with it however it ends: the EXIT trap does not run on SIGKILL
# (a CI job's hard kill, the OOM killer), and a run killed so left its
# tmpfs (the installed packages, in memory) and binds of the host's /dev
# and /sys under /tmp for good.
if [ "${FULCRUM_DEBTEST_NS:-}" != 1 ]; then
	exec env FULCRUM_DEBTEST_NS=1 unshare -m --propagation private "$(readlink -f "$0")" "$deb"
fi
cd "$(dirname "$0")/.."
start=$SECONDS

base=${FRESH_BASE:-${XDG_CACHE_HOME:-$HOME/.cache}/fresh-debian12}
# debootstrap removes its working directory, $base/debootstrap, only once
# the root is complete: one still there is a run that was interrupted
# (Ctrl-C, a power cut) after unpacking bash, whose root is not usable.
if [ ! -x "$base/bin/bash" ] || [ -d "$base/debootstrap" ]; then
	echo "deb-test: making a minimal Debian 12 root in $base (once; cached)"
	rm -rf "$base"
	mirror=$(grep -rhoE '^(URIs:[[:space:]]*|deb[[:space:]]+)[a-z]+://[^[:space:]]+' /etc/apt/sources.list /etc/apt/sources.list.d/*.sources /etc/apt/sources.list.d/*.list 2>/dev/null |
		grep -oE "[a-z]+://[^[:space:]]+" | grep -v security | head -1 || true)
	[ -n "$mirror" ] || { echo "deb-test: no Debian mirror in the host's apt sources" >&2; exit 1; }
	mkdir -p "$base"
	debootstrap --variant=minbase --include=ca-certificates,git,make,gcc,libc6-dev,pkg-config,sudo,procps,iproute2,curl,python3 \
		bookworm "$base" "$mirror" >/tmp/fulcrum-debootstrap.log 2>&1 || {
		tail -20 /tmp/fulcrum-debootstrap.log >&2
		rm -rf "$base"
		echo "deb-test: debootstrap failed" >&2
		exit 1
	}
fi

work=$(mktemp -d /tmp/fulcrum-debtest.XXXXXX)
root=$work/root
cleanup() {
	for m in dev/pts dev sys proc; do umount -l "$root/$m" 2>/dev/null || true; done
	umount -l "$root" 2>/dev/null || true
	umount -l "$work" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
# The overlay's upper and work directories on a tmpfs of their own: overlayfs
# refuses an upper directory that is itself on overlayfs, as / is when this
# runs inside a container or a fresh-check root.
mount -t tmpfs -o size=4g,mode=0755 tmpfs "$work"
mkdir -p "$root" "$work/upper" "$work/w"
mount -t overlay overlay -o "lowerdir=$base,upperdir=$work/upper,workdir=$work/w" "$root"
mount -t proc proc "$root/proc"
# Slaves of the host's mounts: on a host whose mounts are shared (systemd
# makes them so), the cleanup's unmounts would otherwise propagate back and
# unmount the host's /dev/pts, /dev/shm, /dev/hugepages, /sys/fs/cgroup...
mount --rbind /sys "$root/sys"
mount --make-rslave "$root/sys"
mount --rbind /dev "$root/dev"
mount --make-rslave "$root/dev"
cp /etc/resolv.conf "$root/etc/resolv.conf"
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root DEBIAN_FRONTEND=noninteractive "$@"; }
fail() { echo "deb-test: FAIL: $*" >&2; exit 1; }

echo "deb-test: installing $(basename "$deb") into a fresh root"
cp "$deb" "$root/tmp/fulcrum.deb"
in_root apt-get update -qq >"$work/apt.log" 2>&1 || { cat "$work/apt.log"; fail "apt-get update"; }
# dpkg -i, with apt-get fetching the Depends it lists.
in_root apt-get install -y -qq --no-install-recommends /tmp/fulcrum.deb >"$work/apt.log" 2>&1 || { cat "$work/apt.log"; fail "installing the package"; }
in_root dpkg-query -W -f='${Status}\n' fulcrum | grep -q "install ok installed" || fail "dpkg does not list fulcrum as installed"
[ "$(in_root dpkg-query -W -f='${Conffiles}' fulcrum | awk '{print $1}')" = /etc/fulcrum/fulcrum.toml ] || fail "/etc/fulcrum/fulcrum.toml is not a conffile"
for f in /usr/bin/fulcrum /usr/bin/fulcrumctl /lib/systemd/system/fulcrum.service /usr/share/man/man8/fulcrum.8.gz /usr/share/fulcrum/hw/hugepages.sh; do
	[ -e "$root$f" ] || fail "$f is not installed"
done

echo "deb-test: fulcrum check (the installed conffile, no -c)"
in_root /usr/bin/fulcrum check >"$work/check.log" 2>&1 || { cat "$work/check.log"; fail "fulcrum check on /etc/fulcrum/fulcrum.toml"; }
grep -q "/etc/fulcrum/fulcrum.toml: valid" "$work/check.log" || { cat "$work/check.log"; fail "fulcrum check did not check the conffile"; }
in_root /usr/bin/fulcrum prereq || fail "fulcrum prereq on the conffile"

echo "deb-test: the unit's ExecStart on a capture"
cp examples/in.pcap "$root/tmp/in.pcap"
sed -e "s|rx_pcap=examples/in.pcap,tx_pcap=/tmp/fulcrum-out.pcap|rx_pcap=/tmp/in.pcap,tx_pcap=/tmp/out.pcap|" \
	-e "s|file_prefix = \"fulcrum-example\"|file_prefix = \"fulcrum-debtest-$$\"|" "$root/usr/share/doc/fulcrum/pcap.toml" >"$root/tmp/pcap.toml"
printf '\n[admin]\nlisten = "unix:/tmp/fulcrum-admin.sock"\n' >>"$root/tmp/pcap.toml"
exec_start=$(sed -n 's/^ExecStart=//p' "$root/lib/systemd/system/fulcrum.service")
[ -n "$exec_start" ] || fail "the unit has no ExecStart"
cmd=${exec_start/\/etc\/fulcrum\/fulcrum.toml//tmp/pcap.toml}
in_root timeout 120 $cmd --exit-when-idle 1s --stats-interval 0 --log-format json >"$work/run.log" 2>&1 || { cat "$work/run.log"; fail "$cmd"; }
grep -q '"msg":"final counters".*"forwarded":[1-9]' "$work/run.log" || { cat "$work/run.log"; fail "fulcrum run forwarded nothing"; }
[ -s "$root/tmp/out.pcap" ] || fail "no output capture"
[ ! -e "$root/run/dpdk/fulcrum-debtest-$$" ] || fail "DPDK's runtime directory left behind"

echo "deb-test: systemd-analyze verify fulcrum.service"
command -v systemd-analyze >/dev/null || fail "systemd-analyze is not installed (scripts/setup.sh installs systemd)"
# verify checks that the unit's programs exist: point them into the root.
mkdir -p "$work/unit"
sed -e "s|/usr/|$root/usr/|g" -e "s|/etc/fulcrum/|$root/etc/fulcrum/|g" "$root/lib/systemd/system/fulcrum.service" >"$work/unit/fulcrum.service"
# verify exits 0 after some warnings (an unknown Type=, say): any output fails.
out=$(systemd-analyze verify --man=no "$work/unit/fulcrum.service" 2>&1) || fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify: $out"
echo "deb-test: the conffile's mode, then purge"
[ "$(stat -c %a:%U:%G "$root/etc/fulcrum/fulcrum.toml")" = 640:root:root ] || fail "/etc/fulcrum/fulcrum.toml is $(stat -c %a:%U:%G "$root/etc/fulcrum/fulcrum.toml"), want 640:root:root"
# As `systemctl enable` would leave it: purge must not leave it dangling.
mkdir -p "$root/etc/systemd/system/multi-user.target.wants"
ln -sf /lib/systemd/system/fulcrum.service "$root/etc/systemd/system/multi-user.target.wants/fulcrum.service"
in_root dpkg --purge fulcrum >"$work/purge.log" 2>&1 || { cat "$work/purge.log"; fail "dpkg --purge fulcrum"; }
[ ! -L "$root/etc/systemd/system/multi-user.target.wants/fulcrum.service" ] || fail "purge left the unit's wants link"
[ ! -e "$root/etc/fulcrum/fulcrum.toml" ] || fail "purge left the conffile"
[ ! -e "$root/usr/bin/fulcrum" ] || fail "purge left /usr/bin/fulcrum"
echo "deb-test: ok ($((SECONDS - start))s)"
