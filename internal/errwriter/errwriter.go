// Package errwriter keeps the first error of a writer whose users do not
// look at each write's error (tables printed with fmt.Fprintf), so that
// a command can fail when its output was lost (stdout closed, a full
// disk) instead of exiting 0 having printed nothing.
package errwriter

import "io"

// Writer passes writes to W and keeps the first error; every write after
// it fails with the same error.
type Writer struct {
	W   io.Writer
	Err error
}

func (s *Writer) Write(p []byte) (int, error) {
	if s.Err != nil {
		return 0, s.Err
	}
	n, err := s.W.Write(p)
	if err != nil {
		s.Err = err
	}
	return n, err
}
