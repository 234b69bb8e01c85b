package arrowv1

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"testing"

	"github.com/pierrec/lz4/v4"
)

// lz4Seeds are compressed blocks of column-like data: runs of a repeated
// 4- or 8-byte value, increasing times, random bytes, and their mixes.
func lz4Seeds(tb testing.TB) [][]byte {
	rng := rand.New(rand.NewSource(1))
	var raws [][]byte
	for _, n := range []int{1, 7, 64, 1000, 65536} {
		var rank, times, random, mixed, periodic bytes.Buffer
		t := int64(1e12)
		for rank.Len() < n {
			binary.Write(&rank, binary.LittleEndian, int32(7))
		}
		for times.Len() < n {
			t += int64(rng.Intn(5000))
			binary.Write(&times, binary.LittleEndian, t)
		}
		for random.Len() < n {
			random.WriteByte(byte(rng.Intn(256)))
		}
		for mixed.Len() < n {
			if rng.Intn(3) == 0 {
				binary.Write(&mixed, binary.LittleEndian, t+int64(rng.Intn(9)))
			} else {
				mixed.Write([]byte{1, 0, 0, 0})
			}
		}
		// Short runs of every period from 1 to 24 bytes between a few
		// literals: the short matches lz4Short copies, at every offset.
		for periodic.Len() < n {
			p := 1 + rng.Intn(24)
			pat := make([]byte, p)
			rng.Read(pat)
			for k := 4 + rng.Intn(20); k > 0; k-- {
				periodic.Write(pat[:min(p, k)])
			}
			periodic.Write(pat[:rng.Intn(p)])
		}
		raws = append(raws, rank.Bytes()[:n], times.Bytes()[:n], random.Bytes()[:n], mixed.Bytes()[:n], periodic.Bytes()[:n])
	}
	var out [][]byte
	for _, raw := range raws {
		dst := make([]byte, lz4.CompressBlockBound(len(raw)))
		var c lz4.Compressor
		n, err := c.CompressBlock(raw, dst)
		if err != nil {
			tb.Fatal(err)
		}
		if n == 0 { // incompressible: stored as one literal run
			continue
		}
		out = append(out, dst[:n])
	}
	return out
}

// checkLZ4Block compares lz4Block with pierrec's decoder on src for an
// output buffer of size n: same success, same bytes.
func checkLZ4Block(t *testing.T, src []byte, n int) {
	want := make([]byte, n)
	wn, werr := lz4.UncompressBlock(src, want)
	got := make([]byte, n)
	gn, ok := lz4Block(src, got)
	if (werr == nil) != ok {
		t.Fatalf("pierrec: %d, %v; lz4Block: %d, %v (src %x, dst %d)", wn, werr, gn, ok, src, n)
	}
	if ok && (gn != wn || !bytes.Equal(got[:gn], want[:wn])) {
		t.Fatalf("decoded %d bytes, pierrec %d, or different bytes", gn, wn)
	}
}

// TestLZ4Block: the block decoder agrees with pierrec/lz4 on compressed
// columns, with exact, larger and too small output buffers, and on every
// truncation of them.
func TestLZ4Block(t *testing.T) {
	raw := []int{}
	for _, src := range lz4Seeds(t) {
		full := make([]byte, 1<<17)
		n, err := lz4.UncompressBlock(src, full)
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, n)
		for _, size := range []int{n, n + 100, n - 1, 0} {
			if size >= 0 {
				checkLZ4Block(t, src, size)
			}
		}
		for cut := 0; cut < len(src); cut += 1 + len(src)/50 {
			checkLZ4Block(t, src[:cut], n)
		}
	}
	if len(raw) < 10 {
		t.Fatalf("only %d compressible seeds", len(raw))
	}
}

func FuzzLZ4Block(f *testing.F) {
	for _, s := range lz4Seeds(f) {
		f.Add(s, uint16(len(s)*4))
	}
	f.Fuzz(func(t *testing.T, src []byte, n uint16) {
		checkLZ4Block(t, src, int(n))
	})
}
