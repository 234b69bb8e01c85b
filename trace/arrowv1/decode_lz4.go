package arrowv1

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
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
// memory speed. Here a long overlapping match is copied by doubling: the
// period is copied once, then the copied part is copied after itself, so a
// run of n bytes takes log2(n/offset) memmoves.
//
// The other common sequence of a column is short: a few literal bytes
// (the low bytes of a time or a count), then a short match 8 or 4 bytes
// back (its high bytes, and the next row's). Such sequences are decoded
// by lz4Short while src and dst have room for its fixed-size moves; the
// rest, and the block's end, here. FuzzLZ4Block checks it against
// pierrec's decoder.
func lz4Block(src, dst []byte) (n int, ok bool) {
	if len(src) == 0 {
		return 0, true // as pierrec: an empty block decodes to nothing
	}
	si, di := 0, 0
	for {
		if len(src)-si >= lz4SrcRoom && len(dst)-di >= lz4DstRoom {
			if si, di, ok = lz4Short(src, dst, si, di); !ok {
				return 0, false
			}
		}
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

// The room lz4Short needs: a sequence it decodes reads at most 1 + 16 + 2
// bytes of src (token, a 16-byte move of at most 14 literals, offset) and
// writes at most 14 + 24 bytes of dst (the literals' move, three 8-byte
// moves of a match of at most 18 bytes).
const (
	lz4SrcRoom = 1 + 16 + 2
	lz4DstRoom = 14 + 24
)

// lz4Short decodes the sequences of src from si into dst from di for as
// long as they are short (fewer than 15 literals, a match of at most 18
// bytes) and src and dst have lz4SrcRoom and lz4DstRoom bytes left, and
// returns where it stopped, at a token. Its moves have fixed sizes and
// may write bytes past the sequence (never past len(dst)), which later
// sequences overwrite. ok is false for a match before the start of dst.
//
// A match 8 or 4 bytes back repeats the last 8 bytes written, which are
// kept in a register (w): reading them back from dst would stall on every
// such sequence, as they were just written in pieces (the literals' move,
// the last match's) that the load spans.
func lz4Short(src, dst []byte, si, di int) (int, int, bool) {
	ps := unsafe.Pointer(unsafe.SliceData(src))
	pd := unsafe.Pointer(unsafe.SliceData(dst))
	sEnd, dEnd := len(src)-lz4SrcRoom, len(dst)-lz4DstRoom
	var w uint64 // dst[di-8:di], little-endian (bytes before dst[0]: anything)
	if di >= 8 {
		w = binary.LittleEndian.Uint64(dst[di-8:])
	} else {
		for k := range di {
			w = w>>8 | uint64(dst[k])<<56
		}
	}
	for si <= sEnd && di <= dEnd {
		tok := uint(*(*byte)(unsafe.Add(ps, si)))
		if tok&0xf0 == 0xf0 || tok&0x0f == 0x0f {
			break
		}
		lit := tok >> 4
		a := unsafe.Add(ps, si+1)
		*(*[16]byte)(unsafe.Add(pd, di)) = *(*[16]byte)(a)
		if lit < 8 {
			// lit 0 leaves w: its literals are shifted in by 64 bits.
			w = w>>(8*lit&63) | *(*uint64)(a)<<(63-8*lit&63)<<1
		} else {
			w = *(*uint64)(unsafe.Add(a, lit-8))
		}
		si += 1 + int(lit)
		di += int(lit)
		off := int(*(*uint16)(unsafe.Add(ps, si)))
		si += 2
		if off == 0 || off > di {
			return si, di, false
		}
		ml := int(tok&15) + 4
		p := unsafe.Add(pd, di)
		q := unsafe.Add(pd, di-off)
		switch {
		case off == 8:
			*(*uint64)(p) = w
			*(*uint64)(unsafe.Add(p, 8)) = w
			*(*uint64)(unsafe.Add(p, 16)) = w
			w = bits.RotateLeft64(w, -8*(ml&7))
		case off == 4:
			v := w >> 32
			v |= v << 32
			*(*uint64)(p) = v
			*(*uint64)(unsafe.Add(p, 8)) = v
			*(*uint64)(unsafe.Add(p, 16)) = v
			w = bits.RotateLeft64(v, -8*(ml&7))
		case off > 8:
			// Each move reads bytes already written; w, the match's
			// last 8 bytes, from the registers.
			v1 := *(*uint64)(q)
			*(*uint64)(p) = v1
			v2 := *(*uint64)(unsafe.Add(q, 8))
			*(*uint64)(unsafe.Add(p, 8)) = v2
			v3 := *(*uint64)(unsafe.Add(q, 16))
			*(*uint64)(unsafe.Add(p, 16)) = v3
			switch t := uint(ml - 8); {
			case ml < 8:
				w = w>>(8*uint(ml)&63) | v1<<(64-8*uint(ml)&63)
			case t < 8:
				w = v1>>(8*t&63) | v2<<(63-8*t&63)<<1
			default:
				t -= 8
				w = v2>>(8*t&63) | v3<<(63-8*t&63)<<1
			}
		default:
			for k := range ml {
				b := *(*byte)(unsafe.Add(q, k))
				*(*byte)(unsafe.Add(p, k)) = b
				w = w>>8 | uint64(b)<<56
			}
		}
		di += ml
	}
	return si, di, true
}
