#!/usr/bin/env bash
# The lab demo (make demo): brings the lab up, shows a fleet of two Fulcrum
# instances at work and at failure, prints what happened, and tears the lab
# down again, also on Ctrl-C or an error.
set -euo pipefail
cd "$(dirname "$0")/../.."
LAB=${LAB_DIR:-/tmp/fulcrum-lab}
VIP=203.0.113.7
# One lab at a time on this machine (the namespaces, the lab directory and
# the DPDK prefixes have fixed names): the lab test (lab_test.go) holds
# this lock for its whole run. Taken before the trap, so that a demo that
# cannot have the lab leaves it alone; the lab's commands run without the
# lock's descriptor, so no process the lab leaves running holds it.
exec 9>>/tmp/fulcrum-lab.lock
if ! flock -n 9; then
	echo "demo: another lab run (make lab-test or make demo) holds /tmp/fulcrum-lab.lock; try again when it has finished" >&2
	exit 1
fi
lab() { FULCRUM_LAB_LOCKED=1 scripts/lab/lab.sh "$@" 9>&-; }

# Ctrl-C or SIGTERM ends the demo (through the EXIT trap's teardown): a
# trap that only tore down let the demo resume on a lab that was gone.
trap 'lab down >/dev/null 2>&1 || true' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say() { printf '\n== %s\n' "$*"; }
ctl() { "$LAB/bin/fulcrumctl" --addr "unix:$LAB/lb$1.sock" "${@:2}"; }
forwarded() { ctl "$1" --json status | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"]["forwarded"])'; }
# conncheck N DURATION [ARGS]: starts the checker in the background (its
# JSON report on stdout at the end); $cc is its pid (ip netns exec execs it).
conncheck() { ip netns exec fl-client "$LAB/bin/fulcrum-conncheck" -target $VIP:80 -n "$1" -interval 100ms -timeout 10s -duration "$2" "${@:3}" 9>&- & cc=$!; }
# settled FILE SINCE: the checker's -report FILE was written after SINCE (in
# seconds since the epoch) and shows no stalled connection: every one still
# open has exchanged again since.
settled() { python3 -c 'import json, os, sys; f = sys.argv[1]; sys.exit(not (os.path.exists(f) and os.stat(f).st_mtime > float(sys.argv[2]) and json.load(open(f))["stalled"] == 0))' "$@"; }
# started FILE N: the checker's -report FILE shows its N connections open,
# each with a first exchange (so each break counts against its backend).
started() { python3 -c 'import json, os, sys; f = sys.argv[1]; r = json.load(open(f)) if os.path.exists(f) else {}; sys.exit(not (r.get("connections") == int(sys.argv[2]) and sum((r.get("per_backend") or {}).values()) == r["connections"]))' "$@"; }
# wait_for WHAT SECONDS CMD...: polls CMD every 0.1 s until it succeeds, or
# says what it waited for and fails the demo after SECONDS.
wait_for() {
	local what=$1 end=$(($(date +%s) + $2))
	shift 2
	until "$@"; do
		if [ "$(date +%s)" -ge $end ]; then echo "   gave up waiting for $what"; exit 1; fi
		sleep 0.1
	done
}
# hops N: the router's route to the VIP has N ECMP next hops (0: one or none).
hops() { [ "$(ip netns exec fl-router ip route show $VIP | grep -c nexthop)" = "$1" ]; }
be2_down() { ctl "$1" --json backends web | python3 -c 'import json, sys; sys.exit(not any(b["name"] == "be2" and b["health"] == "down" for b in json.load(sys.stdin)["backends"]))'; }
# summary FILE [BACKEND]: prints the checker's report FILE, and fails the
# demo when a connection broke that should not have: any (no BACKEND), or
# one of another backend than BACKEND (the killed one).
summary() {
	python3 - "$@" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
allowed = sys.argv[2] if len(sys.argv) > 2 else None
per = ", ".join("%s %d" % (k, v) for k, v in sorted(r["per_backend"].items()))
broken = {}
for b in r["broken"] or []:
    broken[b["backend"]] = broken.get(b["backend"], 0) + 1
detail = " (" + ", ".join("%s %d" % kv for kv in sorted(broken.items())) + ")" if broken else ""
print("   %d connections (%s); broken: %d%s; still alive at the end: %d" % (r["connections"], per, sum(broken.values()), detail, r["alive"]))
wrong = sum(v for k, v in broken.items() if k != allowed)
if wrong:
    print("   FAILED: %d connection(s) broke that %s" % (wrong, "should not have" if allowed is None else "were not " + allowed + "'s"))
    sys.exit(1)
PY
}

say "Setting up the lab: client, bird2 router (ECMP), 2 Fulcrum instances, 4 backends (about a minute)"
lab up >"$LAB-up.log" 2>&1 || { cat "$LAB-up.log"; exit 1; }
ip netns exec fl-router ip route show $VIP | sed 's/^/   router: /'

say "1. 1000 HTTP requests to the VIP, each on a new connection"
b1=$(forwarded 1); b2=$(forwarded 2)
for i in $(seq 1 1000); do echo "-o /dev/null http://$VIP/"; done |
	xargs ip netns exec fl-client curl -s -m 5 -H 'Connection: close' -w 'HTTP %{http_code} from %header{x-backend}\n' 2>/dev/null |
	sort | uniq -c | sed 's/^/   /'
echo "   packets forwarded: lb1 $(($(forwarded 1) - b1)), lb2 $(($(forwarded 2) - b2))  (the router spreads flows over both)"

say "3. 200 long-lived connections; lb1 is killed (SIGKILL) once all are open"
rm -f "$LAB/cc1-progress.json"
# A connection may wait out TCP's backoff (over 10 s) across the
# withdrawal: as the lab's check, 30 s before one counts as broken.
conncheck 200 2m -report "$LAB/cc1-progress.json" -timeout 30s >"$LAB/cc1.json"
wait_for "the 200 connections to open" 30 started "$LAB/cc1-progress.json" 200
t0=$(date +%s.%N)
lab stop-lb 1 KILL
wait_for "the router to take lb1 out of the ECMP route" 60 hops 0
t1=$(date +%s.%N)
printf '   the router took lb1 out of the ECMP route %.1f s after the kill (BGP session lost);\n' "$(python3 -c "print($t1 - $t0)")"
echo "   lb2 carries every flow to the same backends (same table, same hash)"
# The checker runs until every held connection has exchanged again after
# the withdrawal (one in TCP's backoff then goes on), at most 40 s.
since=$(python3 -c "print($t1 + 1)") ok=no
for i in $(seq 80); do
	if settled "$LAB/cc1-progress.json" "$since"; then ok=yes; break; fi
	sleep 0.5
done
if [ $ok = yes ]; then
	printf '   every held connection exchanged again %.1f s after the kill\n' "$(python3 -c "import time; print(time.time() - $t0)")"
fi
kill -INT $cc
wait $cc
summary "$LAB/cc1.json"
if [ $ok = no ]; then
	echo "   FAILED: some held connections had not exchanged again 40 s after the withdrawal"
	exit 1
fi
lab start-lb 1
wait_for "the router to have both LBs again" 60 hops 2
echo "   lb1 restarted and announced again"

say "5. 200 long-lived connections; backend be2 is killed once all are open"
rm -f "$LAB/cc2-progress.json"
conncheck 200 2m -report "$LAB/cc2-progress.json" >"$LAB/cc2.json"
wait_for "the 200 connections to open" 30 started "$LAB/cc2-progress.json" 200
lab stop-backend 2 KILL
# The checker runs until both LBs' health checks have taken be2 out and
# every connection still open has exchanged again after that.
wait_for "be2 down on lb1" 15 be2_down 1
wait_for "be2 down on lb2" 15 be2_down 2
since=$(python3 -c "import time; print(time.time() + 1)")
wait_for "every connection still open to exchange again" 30 settled "$LAB/cc2-progress.json" "$since"
# The table while the surviving connections are still open.
echo "   the health checks took be2 out of the tables (lb1's view, connections still open):"
ctl 1 backends web | sed 's/^/   /'
kill -INT $cc
wait $cc
summary "$LAB/cc2.json" be2
echo "   only be2's connections broke"
lab start-backend 2

say "Tearing the lab down"
