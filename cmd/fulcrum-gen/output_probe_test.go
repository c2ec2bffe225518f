package main

// Probes of -o naming something that is not a new regular file: a FIFO
// (a reader such as tshark or DPDK's net_pcap), /dev/stdout (a symlink),
// a device. Asserts on exit codes and the file system only.

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// -o /dev/stdout is a symlink. A write error (here /dev/full: ENOSPC, as
// on a full disk behind the shell's redirection) must not delete the
// path the operator named: fulcrum-gen did not create it, and as root
// "fulcrum-gen -o /dev/stdout > /full/fs/x" would remove /dev/stdout
// from the host.
func TestGenWriteErrorKeepsAPathItDidNotCreate(t *testing.T) {
	link := filepath.Join(t.TempDir(), "stdout")
	if err := os.Symlink("/dev/full", link); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCmd("-o", link, "-n", "1000")
	if code != 1 {
		t.Errorf("-o a symlink to /dev/full: exit %d, want 1 (%q)", code, stderr)
	}
	if _, err := os.Lstat(link); err != nil {
		t.Errorf("-o %s (a symlink to /dev/full, which fulcrum-gen did not create): after the write error it is gone: %v", link, err)
	}
}

// A FIFO whose reader stops early (head -c, a tshark that is closed):
// fulcrum-gen must end (EPIPE: exit 1), not block for ever. It opened
// the FIFO read-write (os.Create), so it is a reader of its own pipe and
// never sees the reader leave.
func TestGenFIFOReaderLeavesDoesNotHang(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan int, 1)
	go func() {
		code, _, _ := runCmd("-o", fifo, "-n", "100000") // about 6 MB: far beyond a pipe's buffer
		done <- code
	}()
	r, err := os.Open(fifo) // blocks until the writer has it open
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(r, make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	r.Close() // the reader leaves, as head -c 100 does
	select {
	case code := <-done:
		if code != 1 {
			t.Errorf("reader gone: exit %d, want 1 (broken pipe)", code)
		}
	case <-time.After(30 * time.Second):
		// Unblock the writer so the test binary can exit.
		if r, err := os.Open(fifo); err == nil {
			go io.Copy(io.Discard, r)
		}
		<-done
		t.Fatalf("fulcrum-gen -o FIFO: still writing 30 s after the FIFO's only reader closed it (it holds the FIFO open for reading itself)")
	}
	if _, err := os.Lstat(fifo); err != nil {
		t.Errorf("the FIFO the operator made is gone after the error: %v", err)
	}
}
