package arrowv1

import (
	"encoding/binary"
	"math/bits"
)

// LZ4 frames as arrow-go writes them into IPC buffers (pierrec/lz4 with
// independent 64 KiB blocks and no checksums) are decoded here straight
// into their destination, block by block. Frames with anything else (block
// or content checksums, dependent blocks, a dictionary id) are not handled:
// lz4Frame reports false and the caller falls back to arrow-go's reader.

const lz4FrameMagic = 0x184D2204

// lz4Frame decodes the LZ4 frame src into dst, which must be exactly the
// uncompressed size. It reports false for a frame it does not handle or that
// does not decode to exactly len(dst) bytes.
func lz4Frame(src, dst []byte) bool {
	if len(src) < 7 || binary.LittleEndian.Uint32(src) != lz4FrameMagic {
		return false
	}
	flg, bd := src[4], src[5]
	const (
		independent     = 1 << 5
		blockChecksum   = 1 << 4
		contentSize     = 1 << 3
		contentChecksum = 1 << 2
		reserved        = 1 << 1
		dictID          = 1 << 0
	)
	if flg>>6 != 1 || flg&independent == 0 || flg&(blockChecksum|contentChecksum|reserved|dictID) != 0 || bd&0x8f != 0 {
		return false
	}
	maxBlock := 0
	switch bd >> 4 & 7 {
	case 4:
		maxBlock = 64 << 10
	case 5:
		maxBlock = 256 << 10
	case 6:
		maxBlock = 1 << 20
	case 7:
		maxBlock = 4 << 20
	default:
		return false
	}
	pos := 6
	if flg&contentSize != 0 {
		if len(src) < pos+8+1 || binary.LittleEndian.Uint64(src[pos:]) != uint64(len(dst)) {
			return false
		}
		pos += 8
	}
	if byte(xxh32Short(src[4:pos])>>8) != src[pos] {
		return false // header checksum
	}
	pos++
	out := 0
	for {
		if len(src)-pos < 4 {
			return false
		}
		bs := binary.LittleEndian.Uint32(src[pos:])
		pos += 4
		if bs == 0 {
			return out == len(dst)
		}
		size := int(bs & 0x7fffffff)
		if size > maxBlock || size > len(src)-pos {
			return false
		}
		block := src[pos : pos+size]
		pos += size
		if bs&0x80000000 != 0 {
			if size > len(dst)-out {
				return false
			}
			out += copy(dst[out:], block)
			continue
		}
		n, ok := lz4Block(block, dst[out:])
		if !ok || n > maxBlock {
			return false
		}
		out += n
	}
}

// xxh32Short is the 32-bit xxHash (seed 0) of b, for b shorter than 16
// bytes: the LZ4 frame header checksum.
func xxh32Short(b []byte) uint32 {
	const (
		prime1 uint32 = 2654435761
		prime2 uint32 = 2246822519
		prime3 uint32 = 3266489917
		prime4 uint32 = 668265263
		prime5 uint32 = 374761393
	)
	h := prime5 + uint32(len(b))
	for ; len(b) >= 4; b = b[4:] {
		h += binary.LittleEndian.Uint32(b) * prime3
		h = bits.RotateLeft32(h, 17) * prime4
	}
	for _, c := range b {
		h += uint32(c) * prime5
		h = bits.RotateLeft32(h, 11) * prime1
	}
	h ^= h >> 15
	h *= prime2
	h ^= h >> 13
	h *= prime3
	h ^= h >> 16
	return h
}

// lz4Block decodes the LZ4 block src into dst and returns the bytes
// written; ok is false for a malformed block or one that does not fit dst.
//
// It is what pierrec/lz4's UncompressBlock does, written for trace columns:
// their matches are mostly long runs at a short distance (a rank or stage
// repeated row after row, 4 or 8 bytes apart), which a byte-at-a-time
// overlapping copy (pierrec's amd64 assembly) decodes at a fraction of
// memory speed. Here an overlapping match is copied by doubling: the
// period is copied once, then the copied part is copied after itself, so a
// run of n bytes takes log2(n/offset) memmoves. FuzzLZ4Block checks it
// against pierrec's decoder.
func lz4Block(src, dst []byte) (n int, ok bool) {
	if len(src) == 0 {
		return 0, true // as pierrec: an empty block decodes to nothing
	}
	si, di := 0, 0
	for {
		if si == len(src) { // after a match: pierrec takes that as the end
			return di, true
		}
		tok := int(src[si])
		si++
		// Literals.
		lit := tok >> 4
		if lit == 15 {
			for {
				if si >= len(src) {
					return 0, false
				}
				x := int(src[si])
				si++
				lit += x
				if x != 255 {
					break
				}
				if lit > len(src) {
					return 0, false
				}
			}
		}
		if lit > len(src)-si || lit > len(dst)-di {
			return 0, false
		}
		copy(dst[di:di+lit], src[si:si+lit])
		si += lit
		di += lit
		// The last sequence has literals only.
		if si == len(src) && tok&15 == 0 {
			return di, true
		}
		if len(src)-si < 2 {
			return 0, false
		}
		off := int(binary.LittleEndian.Uint16(src[si:]))
		si += 2
		if off == 0 || off > di {
			return 0, false
		}
		ml := tok & 15
		if ml == 15 {
			for {
				if si >= len(src) {
					return 0, false
				}
				x := int(src[si])
				si++
				ml += x
				if x != 255 {
					break
				}
				if ml > len(dst) {
					return 0, false
				}
			}
		}
		ml += 4
		if ml > len(dst)-di {
			return 0, false
		}
		from := di - off
		if ml <= off {
			copy(dst[di:di+ml], dst[from:from+ml])
		} else {
			// dst[from:] is periodic with period off from here on: copy
			// what is written so far after itself until ml bytes are.
			done := copy(dst[di:di+off], dst[from:di])
			for done < ml {
				done += copy(dst[di+done:di+ml], dst[di:di+done])
			}
		}
		di += ml
	}
}
