package analyze

import "math"

// blockList is an append-only list of int64 held in blocks, for the lists
// that grow with the whole trace (the per-stage F/B/W durations
// analyzeStats keeps for their medians). A slice that outgrows its
// capacity is copied whole into a fresh one a quarter larger: for a
// 300M-event trace those copies came to several times the lists' size in
// fresh memory, each page of it a fault. Blocks are never copied: the
// first is small, each next one twice the last, up to listBlock values.
//
// While every value fits in 32 bits unsigned (durations under 4.3 s),
// the blocks hold uint32s: half the memory (about 100M values, 0.4 GB
// saved, for a fleet job of 300M events). The first value that does not
// fit turns the list wide: its blocks are copied into int64 blocks of the
// same sizes, once.
type blockList struct {
	full   [][]int64  // the blocks before cur, each full (wide)
	cur    []int64    // the block being filled (wide)
	full32 [][]uint32 // the same while narrow
	cur32  []uint32
	n      int  // values in all
	wide   bool // the values are in full and cur, not full32 and cur32
}

// listBlock is the most values one block holds (512 KiB wide).
const listBlock = 1 << 16

// listFirst is the size of a list's first block.
const listFirst = 256

func (l *blockList) add(v int64) {
	if !l.wide {
		if uint64(v) <= math.MaxUint32 {
			if len(l.cur32) == cap(l.cur32) {
				if l.cur32 != nil {
					l.full32 = append(l.full32, l.cur32)
				}
				l.cur32 = make([]uint32, 0, nextBlock(cap(l.cur32)))
			}
			l.cur32 = append(l.cur32, uint32(v))
			l.n++
			return
		}
		l.widen()
	}
	if len(l.cur) == cap(l.cur) {
		if l.cur != nil {
			l.full = append(l.full, l.cur)
		}
		l.cur = make([]int64, 0, nextBlock(cap(l.cur)))
	}
	l.cur = append(l.cur, v)
	l.n++
}

// nextBlock is the capacity of the block after one of capacity c (0: the
// first).
func nextBlock(c int) int {
	if c == 0 {
		return listFirst
	}
	return min(2*c, listBlock)
}

// widen makes the list hold int64s, its values and block sizes kept.
func (l *blockList) widen() {
	if l.wide {
		return
	}
	l.wide = true
	for _, b := range l.full32 {
		l.full = append(l.full, widen32(b, cap(b)))
	}
	if l.cur32 != nil {
		l.cur = widen32(l.cur32, cap(l.cur32))
	}
	l.full32, l.cur32 = nil, nil
}

func widen32(b []uint32, c int) []int64 {
	w := make([]int64, len(b), c)
	for i, v := range b {
		w[i] = int64(v)
	}
	return w
}

// blocks appends the list's blocks that hold values to bs. The list must
// be wide (widen).
func (l *blockList) blocks(bs [][]int64) [][]int64 {
	bs = append(bs, l.full...)
	if len(l.cur) > 0 {
		bs = append(bs, l.cur)
	}
	return bs
}

// blocks32 appends the blocks of a narrow list that hold values to bs.
func (l *blockList) blocks32(bs [][]uint32) [][]uint32 {
	bs = append(bs, l.full32...)
	if len(l.cur32) > 0 {
		bs = append(bs, l.cur32)
	}
	return bs
}
