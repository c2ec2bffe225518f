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
