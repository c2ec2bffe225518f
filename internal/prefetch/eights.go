package prefetch

// Eights is a pass's way to prefetch the addresses it gathers in
// lines[sent:n] eight at a time: soon after each is known, at an eighth
// of the calls. Once eight or more wait it prefetches them and returns n,
// the new sent; otherwise it returns sent. After the pass, Lines of
// lines[sent:n] starts the rest.
func Eights(lines []uintptr, sent, n int) int {
	if n-sent < 8 {
		return sent
	}
	Lines(lines[sent:n])
	return n
}
