#!/usr/bin/env bash
# Runs every fuzz target in the module for a short time each (FUZZTIME,
# default 5s): the seed corpus always, plus that much fresh exploration.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-5s}
tags=${GOTAGS:-}
# The fuzz targets, read from the test files go list names for these tags
# (a function Fuzz, or Fuzz and an upper-case letter, a digit or _, as go
# test's rule): asking go test -list instead links every package's test
# binary, about two minutes of make test. go vet rejects a Fuzz function
# with another signature, so nothing of that shape is left out.
targets() {
	go list ${tags:+-tags "$tags"} -f '{{.ImportPath}} {{.Dir}}{{range .TestGoFiles}} {{.}}{{end}}{{range .XTestGoFiles}} {{.}}{{end}}' ./... |
		while read -r pkg dir files; do
			for f in $files; do
				sed -n 's/^func \(Fuzz\([A-Z0-9_][A-Za-z0-9_]*\)\{0,1\}\)(.*/\1/p' "$dir/$f"
			done | sort -u | sed "s|^|$pkg |"
		done
}
# The log of the target running: this run's own file, not a fixed path
# that another make test on the machine (another clone, CI beside a
# developer) overwrites, so that a failure prints its own output.
log=$(mktemp /tmp/fulcrum-fuzz.XXXXXX)
trap 'rm -f "$log"' EXIT
list=$(targets)
if [ -z "$list" ]; then
	echo "fuzz: no fuzz targets found" >&2
	exit 1
fi
while read -r pkg target; do
	echo "fuzz: $pkg $target ($fuzztime)"
	# Go 1.26's fuzz coordinator can fail a run with a bare "context
	# deadline exceeded" when -fuzztime ends while a worker is busy
	# (golang/go#75804, fixed in Go 1.27): no input failed, none is
	# written. Such a run is tried again, twice at most; any other
	# failure, or a failing input written, fails at once.
	for try in 1 2 3; do
		# -fuzzminimizetime: the default 60 s minimises each new
		# interesting input of a large seed (config's: the 10 KB example)
		# for longer than the run lasts, so it explored nothing new.
		if go test ${tags:+-tags "$tags"} -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime 1s "$pkg" </dev/null >"$log" 2>&1; then
			break
		fi
		if [ "$try" -lt 3 ] && grep -q '^    context deadline exceeded$' "$log" &&
			! grep -q 'Failing input written' "$log"; then
			echo "fuzz: $pkg $target: Go's fuzz deadline race (golang/go#75804), no failing input; again"
			continue
		fi
		cat "$log"
		echo "fuzz: $pkg $target FAILED" >&2
		exit 1
	done
done <<<"$list"
