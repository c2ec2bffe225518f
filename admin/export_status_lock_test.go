package admin

// LockStatus takes the lock every status read of the server takes (as a
// /metrics scrape in progress holds it) and returns its unlock.
func (s *Server) LockStatus() func() {
	s.statusMu.Lock()
	return s.statusMu.Unlock
}
