package exception

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockDir is where `fulcrum run` keeps the locks of the exception
// interfaces it uses (tmpfs: emptied at boot).
const LockDir = "/run/fulcrum"

// maxIfaceName is IFNAMSIZ-1, the longest Linux interface name.
const maxIfaceName = 15

// ErrLocked is wrapped by Lock's error when another process holds the
// interface's lock.
var ErrLocked = errors.New("exception interface locked by another process")

// IfaceLock is the lock of one exception interface, held until Release
// or the process's end.
type IfaceLock struct {
	f    *os.File
	path string
}

// LockPath is the file whose lock Lock takes for interface name in dir,
// in this process's network namespace: interface names are per
// namespace (the fleet lab runs two daemons with the same exception_iface
// in two namespaces that share /run), so the file names the namespace by
// its inode, as ip-netns(8) and lsns(8) show it. Without /proc the name
// alone is used.
func LockPath(dir, name string) string {
	ns := ""
	if fi, err := os.Stat("/proc/self/ns/net"); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			ns = "-net" + strconv.FormatUint(st.Ino, 10)
		}
	}
	return filepath.Join(dir, "exception-"+name+ns+".lock")
}

// Lock takes the exclusive lock of exception interface name under dir
// (LockDir for the daemon; created 0755 if missing) without waiting, and
// writes this process's PID into the lock file. Two daemons of the same
// exception interface cannot both hold it, so at most one of them gets
// as far as CheckAbsent and the tap's creation: without it, two started
// at the same instant would both find the name free and both attach to
// the one tap. The lock is flock(2)'s, on an open file of its own: the
// kernel drops it when the process ends however it ends (SIGKILL
// included), so a restart after a crash finds it free; the file itself
// stays (removing it would let a third process lock a new file while a
// second one still holds the old). If another process holds the lock,
// the error wraps ErrLocked and names that process's PID.
func Lock(dir, name string) (*IfaceLock, error) {
	// name becomes a path component: nothing that leaves dir.
	if name == "" || name == "." || name == ".." || len(name) > maxIfaceName || strings.ContainsAny(name, "/\x00") {
		return nil, fmt.Errorf("exception interface %q: not a Linux interface name (1..%d bytes, no '/', not \".\" or \"..\")", name, maxIfaceName)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("exception interface %s: lock directory: %w", name, err)
	}
	path := LockPath(dir, name)
	// O_NOFOLLOW: a symlink planted under that name must not make root
	// truncate its target. os.OpenFile sets O_CLOEXEC, so no child
	// process inherits the lock.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, fmt.Errorf("exception interface %s: lock: %w", name, err)
	}
	if err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := readPID(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &lockedError{fmt.Sprintf("exception interface %s is in use by another Fulcrum (PID %s, lock %s): "+
				"stop it or set another dataplane.exception_iface", name, holder, path)}
		}
		return nil, fmt.Errorf("exception interface %s: lock %s: %w", name, path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("exception interface %s: lock %s: write PID: %w", name, path, err)
	}
	return &IfaceLock{f: f, path: path}, nil
}

// Path is the lock file's path.
func (l *IfaceLock) Path() string { return l.path }

// Release drops the lock (and the PID in its file). The daemon releases
// it only once its tap is gone.
func (l *IfaceLock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	l.f.Truncate(0) // best effort: the lock, not the PID, is what counts
	err := l.f.Close()
	l.f = nil
	return err
}

// flock retries flock(2) on EINTR.
func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}

// lockedError is Lock's refusal when the lock is held: errors.Is(err,
// ErrLocked).
type lockedError struct{ msg string }

func (e *lockedError) Error() string        { return e.msg }
func (e *lockedError) Is(target error) bool { return target == ErrLocked }

// readPID is the PID the lock file names ("unknown" if none yet: its
// holder has locked it but not written it).
func readPID(f *os.File) string {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	s := strings.TrimSpace(string(b[:n]))
	if _, err := strconv.Atoi(s); err != nil {
		return "unknown"
	}
	return s
}
