package maglev

import (
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"testing"

	"golang.org/x/crypto/blake2b"
)

// blake2b8 must equal golang.org/x/crypto's BLAKE2b with an 8-byte digest
// (read big-endian) for every length: empty, within one block, exactly
// one and two blocks (128, 256 bytes: the last full block is the final
// one), and just past them, with random bytes.
func TestBlake2b8MatchesXCrypto(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	ref := func(msg []byte) uint64 {
		d, err := blake2b.New(8, nil)
		if err != nil {
			t.Fatal(err)
		}
		d.Write(msg)
		return binary.BigEndian.Uint64(d.Sum(nil))
	}
	for n := 0; n <= 400; n++ {
		for range 3 {
			msg := make([]byte, n)
			for i := range msg {
				msg[i] = byte(rng.Uint32())
			}
			if got, want := blake2b8(msg), ref(msg); got != want {
				t.Fatalf("len %d (%x): blake2b8 %#x, x/crypto %#x", n, msg, got, want)
			}
		}
	}
	long := []byte(strings.Repeat("10.0.0.1:443/", 1000))
	if got, want := blake2b8(long), ref(long); got != want {
		t.Fatalf("13000 bytes: blake2b8 %#x, x/crypto %#x", got, want)
	}
}
