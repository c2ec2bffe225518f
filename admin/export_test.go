package admin

import "time"

// SetTimeouts shortens the server's connection deadlines for a test; call
// it before Serve.
func (s *Server) SetTimeouts(readHeader, read, write, idle time.Duration) {
	s.timeouts = timeouts{readHeader, read, write, idle}
}

// CaptureWriteGrace is how long a capture's answer may take to write
// after its duration.
const CaptureWriteGrace = captureWriteGrace

// SetTableWait sets how long a table read waits for the one in progress,
// until the test ends.
func SetTableWait(t interface{ Cleanup(func()) }, d time.Duration) {
	old := tableWait
	tableWait = d
	t.Cleanup(func() { tableWait = old })
}

// SetMetricsWait sets how long a scrape waits for a place, until the test
// ends.
func SetMetricsWait(t interface{ Cleanup(func()) }, d time.Duration) {
	old := metricsWait
	metricsWait = d
	t.Cleanup(func() { metricsWait = old })
}

// SetAfterResolve makes fn run between a backend action's look-up of its
// VIP and backend and the action.
func (s *Server) SetAfterResolve(fn func()) { s.afterResolve = fn }
