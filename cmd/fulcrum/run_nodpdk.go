//go:build !dpdk

package main

import (
	"fmt"
	"io"
)

const dpdkSupport = "not built in (build with -tags dpdk where pkg-config finds libdpdk)"

func dpdkVersion() string { return "not built in" }

func cmdRun(args []string, stdout, stderr io.Writer) int {
	if _, code, done := parseRun(args, stdout, stderr); done {
		return code
	}
	fmt.Fprintln(stderr, "fulcrum run: this binary was built without DPDK; install libdpdk-dev (scripts/setup.sh) and build with `make build`")
	return 1
}
