package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// startCPUProfile starts Go's CPU profiler into a new file at path (an
// existing file is refused rather than overwritten) and returns the
// function that stops it and closes the file. The profiler samples every
// thread 100 times a second from a timer signal: the forwarding loops do
// no more work for it than for any signal.
func startCPUProfile(path string) (stop func() error, err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("starting the profiler: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}
