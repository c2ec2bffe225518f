// The seed 003 exercise, EWMA least-response-time, on Fulcrum's own EWMA
// and cost (package sched).

package sim

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/fulcrumlb/fulcrum/sched"
)

// Pool is the exercise's pool of backends, in name order.
type Pool struct {
	names    []string
	ewma     []sched.EWMA
	inflight []int64
}

// NewPool makes a pool of the named backends; a name is any text without
// white space, and names must differ.
func NewPool(names []string) (*Pool, error) {
	if len(names) == 0 {
		return nil, errors.New("no backends: name at least one, e.g. ewma a b c")
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	for i, n := range sorted {
		switch {
		case n == "":
			return nil, errors.New("backend name is empty")
		case strings.ContainsFunc(n, unicode.IsSpace):
			return nil, fmt.Errorf("backend %q: name contains white space", n)
		case i > 0 && n == sorted[i-1]:
			return nil, fmt.Errorf("backend %q: named twice", n)
		}
	}
	return &Pool{names: sorted, ewma: make([]sched.EWMA, len(sorted)), inflight: make([]int64, len(sorted))}, nil
}

// Pick is the exercise's PICK: the backend of lowest cost = ewma ×
// (in_flight + 1) (sched.Cost), ties to the lexicographically smaller
// name, counted as in flight at once. A backend without samples has an
// average of 0 here, as the exercise demands (its cold-start trap: on a
// fresh pool the first backend takes every request until its first DONE);
// the dataplane's PeakEWMA charges a penalty instead.
func (p *Pool) Pick() string {
	best, bestCost := 0, uint64(0)
	for i := range p.names {
		us, _ := p.ewma[i].Micros() // 0 without a sample
		if c := sched.Cost(us, p.inflight[i]); i == 0 || c < bestCost {
			best, bestCost = i, c
		}
	}
	p.inflight[best]++
	return p.names[best]
}

// Done is the exercise's DONE: the backend's in-flight count drops by one
// (never below 0) and the latency, in microseconds, is blended into its
// average (sched.EWMA.Observe: the first sample starts it).
func (p *Pool) Done(name string, us int64) error {
	i, ok := slices.BinarySearch(p.names, name)
	if !ok {
		return fmt.Errorf("unknown backend %q (backends: %s)", name, strings.Join(p.names, ", "))
	}
	p.inflight[i] = max(0, p.inflight[i]-1)
	p.ewma[i].Observe(us)
	return nil
}

// Status writes the exercise's STATUS: "<name> ewma=<ms>.<3 digits>
// inflight=<n>" per backend, in name order.
func (p *Pool) Status(w io.Writer) error {
	for i, n := range p.names {
		us, _ := p.ewma[i].Micros()
		if _, err := fmt.Fprintf(w, "%s ewma=%d.%03d inflight=%d\n", n, us/1000, us%1000, p.inflight[i]); err != nil {
			return err
		}
	}
	return nil
}

// ParseMillis reads a latency in milliseconds, a whole number or one with
// up to three decimals ("12", "12.5", "0.125"), exactly, as microseconds:
// the exercise's "a sample of ms milliseconds is ms * 1000".
func ParseMillis(s string) (int64, error) {
	whole, frac, dot := strings.Cut(s, ".")
	bad := func(why string) (int64, error) {
		return 0, fmt.Errorf("latency %q: %s", s, why)
	}
	switch {
	case strings.HasPrefix(s, "-"):
		return bad("negative")
	case whole == "" || !digits(whole) || (dot && (frac == "" || !digits(frac))):
		return bad("not a number of milliseconds (want e.g. 120 or 12.5)")
	case len(frac) > 3:
		return bad("more than three decimals (the average keeps thousandths of a millisecond)")
	}
	const maxMs = sched.MaxSample / 1000
	ms, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || ms > maxMs {
		return bad(fmt.Sprintf("above the largest latency kept, %d.%03d ms", maxMs, sched.MaxSample%1000))
	}
	us := ms * 1000
	if frac != "" {
		f, _ := strconv.ParseInt((frac + "00")[:3], 10, 64)
		us += f
	}
	if us > sched.MaxSample {
		return bad(fmt.Sprintf("above the largest latency kept, %d.%03d ms", maxMs, sched.MaxSample%1000))
	}
	return us, nil
}

func digits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Run reads commands from in, one per line, and answers on out: PICK
// prints the chosen name, DONE <name> <ms> prints nothing, STATUS prints
// the pool. A bad line (unknown command, unknown backend, bad latency,
// wrong arguments) is reported on errOut with its line number and skipped;
// blank lines are ignored. Run returns the number of rejected lines, and an
// error only if it cannot read its input or write its output.
func (p *Pool) Run(in io.Reader, out, errOut io.Writer) (rejected int, err error) {
	r := bufio.NewReaderSize(in, 64<<10)
	var buf []byte
	w := bufio.NewWriter(out)
	for line := 1; ; line++ {
		text, tooLong, rerr := readLine(r, buf[:0])
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return rejected, fmt.Errorf("read commands: %w", rerr)
		}
		buf = text
		var f []string
		if !tooLong {
			f = strings.Fields(string(text))
			if len(f) == 0 {
				continue
			}
		}
		var cmdErr error
		if tooLong {
			cmdErr = fmt.Errorf("line longer than %d bytes", maxLine)
		} else {
			cmdErr, err = p.command(w, f)
		}
		if err == nil {
			err = w.Flush() // answer each command at once: a driver may wait for it
		}
		if err != nil {
			return rejected, outputErr{err}
		}
		if cmdErr != nil {
			rejected++
			if _, err := fmt.Fprintf(errOut, "fulcrum-sim ewma: line %d: %v\n", line, cmdErr); err != nil {
				return rejected, outputErr{err}
			}
		}
	}
	return rejected, nil
}

// maxLine is the longest command line Run reads, without its line end: a
// longer one is consumed, reported and skipped like any other bad line.
const maxLine = 1 << 20

// readLine reads the next line of r, without its "\n", into buf. A line of
// more than maxLine bytes is read to its end and returned empty with
// tooLong. The last line may lack its "\n". io.EOF: no line is left.
func readLine(r *bufio.Reader, buf []byte) (line []byte, tooLong bool, err error) {
	read := 0
	for {
		chunk, err := r.ReadSlice('\n')
		read += len(chunk)
		if !tooLong && len(buf)+len(chunk) <= maxLine+1 { // +1: the "\n"
			buf = append(buf, chunk...)
		} else {
			tooLong, buf = true, buf[:0]
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && read > 0: // a last line without its "\n"
		case err != nil:
			return nil, false, err
		}
		buf = bytes.TrimSuffix(buf, []byte("\n"))
		if len(buf) > maxLine {
			tooLong, buf = true, buf[:0]
		}
		return buf, tooLong, nil
	}
}

// command runs one command line's fields (not empty): cmdErr says what
// is wrong with the command, err that its answer could not be written.
func (p *Pool) command(w io.Writer, f []string) (cmdErr, err error) {
	switch f[0] {
	case "PICK":
		if len(f) != 1 {
			cmdErr = errors.New("PICK takes no arguments")
			break
		}
		_, err = fmt.Fprintln(w, p.Pick())
	case "STATUS":
		if len(f) != 1 {
			cmdErr = errors.New("STATUS takes no arguments")
			break
		}
		err = p.Status(w)
	case "DONE":
		if len(f) != 3 {
			cmdErr = errors.New("DONE takes a backend and a latency: DONE <name> <ms>")
			break
		}
		us, perr := ParseMillis(f[2])
		if perr != nil {
			cmdErr = fmt.Errorf("DONE %s: %w", f[1], perr)
			break
		}
		if derr := p.Done(f[1], us); derr != nil {
			cmdErr = fmt.Errorf("DONE: %w", derr)
		}
	default:
		cmdErr = fmt.Errorf("unknown command %q (want PICK, DONE <name> <ms> or STATUS)", f[0])
	}
	return cmdErr, err
}

// outputErr marks a failure to write, as opposed to bad input.
type outputErr struct{ err error }

func (e outputErr) Error() string { return e.err.Error() }
func (e outputErr) Unwrap() error { return e.err }

// IsOutputError reports whether err is a failure to write Run's output.
func IsOutputError(err error) bool {
	var o outputErr
	return errors.As(err, &o)
}
