package main

import (
	"os"
	"sync"
	"testing"
)

// sharedDirs are directories that tests of this binary share (the daemon
// binary buildFulcrum builds once), removed when every test has run.
var sharedDirs dirList

type dirList struct {
	mu   sync.Mutex
	dirs []string
}

func (l *dirList) add(dir string) {
	l.mu.Lock()
	l.dirs = append(l.dirs, dir)
	l.mu.Unlock()
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range sharedDirs.dirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}
