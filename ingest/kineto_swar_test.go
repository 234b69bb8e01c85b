package ingest

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// TestKfStop8 checks the word-at-a-time string scan against the byte
// table it stands for: the lowest byte kfStop8 marks is the first byte
// kfStrStop holds, and no byte is marked when none is held. Every byte
// value at every position among plain bytes, then random words drawn
// mostly from the bytes near the tests' edges (0x1f, 0x20, '"', '\\',
// 0x7f, 0x80 and their neighbours), where borrows could spill.
func TestKfStop8(t *testing.T) {
	check := func(w [8]byte) {
		t.Helper()
		want := -1
		for i, c := range w {
			if kfStrStop[c] {
				want = i
				break
			}
		}
		m := kfStop8(binary.LittleEndian.Uint64(w[:]))
		got := -1
		if m != 0 {
			got = bits.TrailingZeros64(m) >> 3
		}
		if got != want {
			t.Fatalf("% x: first stop byte at %d, kfStop8 says %d (%#x)", w[:], want, got, m)
		}
	}
	for c := range 256 {
		for p := range 8 {
			w := [8]byte{'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'}
			w[p] = byte(c)
			check(w)
		}
	}
	edges := []byte{0x00, 0x01, 0x1e, 0x1f, 0x20, 0x21, '"' - 1, '"', '"' + 1, '\\' - 1, '\\', '\\' + 1, 0x7e, 0x7f, 0x80, 0x81, 0xfe, 0xff}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1 << 20 {
		var w [8]byte
		for i := range w {
			if r.IntN(4) == 0 {
				w[i] = byte(r.IntN(256))
			} else {
				w[i] = edges[r.IntN(len(edges))]
			}
		}
		check(w)
	}
}
