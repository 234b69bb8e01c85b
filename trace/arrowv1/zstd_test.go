package arrowv1

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

func TestCheckZstd(t *testing.T) {
	frame := func(fhd byte, rest ...byte) []byte {
		return append(binary.LittleEndian.AppendUint32(nil, zstdMagic), append([]byte{fhd}, rest...)...)
	}
	lastRaw := []byte{1, 0, 0} // last block, raw, 0 bytes
	skippable := append(binary.LittleEndian.AppendUint32(nil, zstdSkippable), 2, 0, 0, 0, 9, 9)
	tests := []struct {
		name string
		b    []byte
		size int64
		bad  bool
	}{
		{"1 MiB window", frame(0x00, append([]byte{10 << 3}, lastRaw...)...), 100, false},
		{"512 MiB window", frame(0x00, append([]byte{19 << 3}, lastRaw...)...), 100, true},
		{"512 MiB window for 300 MiB", frame(0x00, append([]byte{19 << 3}, lastRaw...)...), 300 << 20, false},
		{"single segment, 4-byte size", frame(0xa0, append([]byte{0, 0, 0, 0x40}, lastRaw...)...), 100, true},
		{"single segment, 1-byte size", frame(0x20, append([]byte{200}, lastRaw...)...), 200, false},
		{"after a skippable frame", append(skippable, frame(0x00, append([]byte{30 << 3}, lastRaw...)...)...), 100, true},
		{"second frame", append(frame(0x00, append([]byte{10 << 3}, lastRaw...)...), frame(0x00, append([]byte{30 << 3}, lastRaw...)...)...), 100, true},
		{"not zstd", []byte("garbage that the decoder rejects"), 100, false},
		{"cut header", frame(0x00), 100, false},
	}
	for _, tt := range tests {
		err := checkZstd(tt.b, tt.size)
		if (err != nil) != tt.bad {
			t.Errorf("%s: %v, want error %v", tt.name, err, tt.bad)
		}
	}
}

// TestZstdWindowInFile corrupts the window of a real zstd buffer.
func TestZstdWindowInFile(t *testing.T) {
	tr := randomTrace(rand.New(rand.NewSource(6)), 40, testKinds)
	data := encode(t, writers[1], tr, Options{Compression: ZSTD, BatchRows: 10})
	ends, _ := messageEnds(t, data, 0)
	fr, status, _, err := readFrame(data, ends[2], framingContinuation)
	if err != nil || status != frameOK {
		t.Fatal(status, err)
	}
	bodyStart := len(data[:ends[2]]) + 8 + len(fr.meta)
	hit := 0
	for _, buf := range fr.info.buffers {
		at := bodyStart + int(buf[0])
		if buf[1] < 14 || int64(binary.LittleEndian.Uint64(data[at:])) < 0 {
			continue
		}
		frame := data[at+8:]
		if binary.LittleEndian.Uint32(frame) != zstdMagic || frame[4]&0x20 != 0 {
			continue // only frames with a window descriptor
		}
		b := bytes.Clone(data)
		b[at+8+5] = 0xf8 // the largest window zstd can describe
		_, err := Read(b)
		if err == nil || !strings.HasPrefix(err.Error(), "decoding batch 1: ") || !strings.Contains(err.Error(), "zstd window") {
			t.Errorf("buffer at %d: %v", buf[0], err)
		}
		hit++
	}
	if hit == 0 {
		t.Fatal("no zstd frame with a window descriptor found")
	}
}

// TestFastZstdSizeLimit: the fast decoder's zstd buffers decompress into
// exactly the size their prefix gives; a frame whose header says it holds
// more (4 GB here, in 14 bytes) fails at once instead of growing the
// output to what the header says (FuzzRead found one that took 14 s and
// 4 GB of zeroed memory).
func TestFastZstdSizeLimit(t *testing.T) {
	read := func(zframe []byte, size int64) ([]byte, bool) {
		body := binary.LittleEndian.AppendUint64(nil, uint64(size))
		body = append(body, zframe...)
		fr := &frame{body: body, info: msgInfo{compressed: true, codec: codecZSTD, buffers: [][2]int64{{0, int64(len(body))}}}}
		var sc fastScratch
		defer sc.release()
		return batchBufs{fr}.read(0, nil, &sc, 0)
	}
	// A real buffer still decodes.
	data := bytes.Repeat([]byte("ppprof "), 100)
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := read(enc.EncodeAll(data, nil), int64(len(data))); !ok || !bytes.Equal(got, data) {
		t.Fatalf("valid buffer: ok %v, %d bytes", ok, len(got))
	}
	// A frame of a 1 MiB window that says it holds 4 GB (frame content
	// size in 4 bytes), then one empty last block.
	huge := append(binary.LittleEndian.AppendUint32(nil, zstdMagic), 0x80, 10<<3, 0xff, 0xff, 0xff, 0xff, 1, 0, 0)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, ok := read(huge, 100)
	runtime.ReadMemStats(&after)
	if ok {
		t.Error("a frame saying it holds 4 GB decoded as 100 bytes")
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Errorf("the refused frame allocated %d MB", grew>>20)
	}
}
