package arrowv1

import (
	"encoding/binary"
	"fmt"
)

// The zstd decoder arrow-go uses allocates each frame's history window up
// front, sized by the frame header: 20 corrupt bytes can ask for 512 MiB.
// checkZstd walks the frames of a compressed buffer and refuses windows far
// larger than the data the buffer says it holds. Encoders size windows to
// their input or use 8 MiB at most (zstd's defaults, klauspost's encoder),
// so valid buffers always pass.

const (
	zstdMagic         = 0xFD2FB528
	zstdSkippableMask = 0xFFFFFFF0
	zstdSkippable     = 0x184D2A50
	zstdMinMaxWindow  = 8 << 20 // any window up to this is accepted
)

// checkZstd checks the zstd frames in b, a buffer that decompresses to
// size bytes. Malformed frames are left to the decoder to reject; only
// windows are checked here.
func checkZstd(b []byte, size int64) error {
	limit := max(zstdMinMaxWindow, 2*size)
	for len(b) >= 4 {
		magic := binary.LittleEndian.Uint32(b)
		if magic&zstdSkippableMask == zstdSkippable {
			if len(b) < 8 {
				return nil
			}
			skip := 8 + int64(binary.LittleEndian.Uint32(b[4:]))
			if skip > int64(len(b)) {
				return nil
			}
			b = b[skip:]
			continue
		}
		if magic != zstdMagic || len(b) < 5 {
			return nil
		}
		fhd := b[4]
		single := fhd&0x20 != 0
		pos := 5
		var window int64
		if !single {
			if len(b) < pos+1 {
				return nil
			}
			exp, mant := int64(b[pos]>>3), int64(b[pos]&7)
			base := int64(1) << (10 + exp)
			window = base + base/8*mant
			pos++
		}
		pos += [4]int{0, 1, 2, 4}[fhd&3] // dictionary id
		fcsLen := [4]int{0, 2, 4, 8}[fhd>>6]
		if fhd>>6 == 0 && single {
			fcsLen = 1
		}
		if len(b) < pos+fcsLen {
			return nil
		}
		if single {
			var fcs uint64
			switch fcsLen {
			case 1:
				fcs = uint64(b[pos])
			case 2:
				fcs = uint64(binary.LittleEndian.Uint16(b[pos:])) + 256
			case 4:
				fcs = uint64(binary.LittleEndian.Uint32(b[pos:]))
			case 8:
				fcs = binary.LittleEndian.Uint64(b[pos:])
			}
			window = int64(min(fcs, 1<<62))
		}
		if window > limit {
			return fmt.Errorf("zstd window of %d bytes for %d bytes of data", window, size)
		}
		pos += fcsLen
		// Skip the blocks to the next frame.
		for {
			if len(b) < pos+3 {
				return nil
			}
			h := uint32(b[pos]) | uint32(b[pos+1])<<8 | uint32(b[pos+2])<<16
			pos += 3
			switch (h >> 1) & 3 {
			case 0, 2: // raw, compressed
				pos += int(h >> 3)
			case 1: // run-length: one byte
				pos++
			default:
				return nil
			}
			if h&1 != 0 {
				break
			}
		}
		if fhd&0x04 != 0 { // content checksum
			pos += 4
		}
		if pos > len(b) {
			return nil
		}
		b = b[pos:]
	}
	return nil
}
