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
	l.n++
	if !l.wide {
		if uint64(v) <= math.MaxUint32 {
			push(&l.full32, &l.cur32, uint32(v))
			return
		}
		l.widen()
	}
	push(&l.full, &l.cur, v)
}

// push appends v to the block cur, which moves to full and is followed
// by a fresh block (nextBlock) when it is full.
func push[T int64 | uint32](full *[][]T, cur *[]T, v T) {
	if len(*cur) == cap(*cur) {
		if *cur != nil {
			*full = append(*full, *cur)
		}
		*cur = make([]T, 0, nextBlock(cap(*cur)))
	}
	*cur = append(*cur, v)
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
func (l *blockList) blocks(bs [][]int64) [][]int64 { return appendBlocks(bs, l.full, l.cur) }

// blocks32 appends the blocks of a narrow list that hold values to bs.
func (l *blockList) blocks32(bs [][]uint32) [][]uint32 { return appendBlocks(bs, l.full32, l.cur32) }

func appendBlocks[T int64 | uint32](bs, full [][]T, cur []T) [][]T {
	bs = append(bs, full...)
	if len(cur) > 0 {
		bs = append(bs, cur)
	}
	return bs
}
