#!/usr/bin/env bash
# Runs every fuzz target in the module for a short time each (FUZZTIME,
# default 5s): the seed corpus always, plus that much fresh exploration.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-5s}
tags=${GOTAGS:-}
for pkg in $(go list ${tags:+-tags "$tags"} ./...); do
	for target in $(go test ${tags:+-tags "$tags"} -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		echo "fuzz: $pkg $target ($fuzztime)"
		go test ${tags:+-tags "$tags"} -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" >/tmp/fulcrum-fuzz.log 2>&1 || {
			cat /tmp/fulcrum-fuzz.log
			echo "fuzz: $pkg $target FAILED" >&2
			exit 1
		}
	done
done
