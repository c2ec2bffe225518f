package maglev

// IsPrime reports whether n is prime, by trial division with 6k±1
// candidates. It is exact for every n; it is fast (under a millisecond) for
// n up to 2^32, which covers every table size Build accepts (MaxSize).
func IsPrime(n uint64) bool {
	switch {
	case n < 2:
		return false
	case n < 4:
		return true
	case n%2 == 0 || n%3 == 0:
		return false
	}
	for d := uint64(5); d <= n/d; d += 6 {
		if n%d == 0 || n%(d+2) == 0 {
			return false
		}
	}
	return true
}
