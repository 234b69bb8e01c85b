package analyze

// blockList is an append-only list of int64 held in blocks, for the lists
// that grow with the whole trace (the per-stage F/B/W durations
// analyzeStats keeps for their medians). A slice that outgrows its
// capacity is copied whole into a fresh one a quarter larger: for a
// 300M-event trace those copies came to several times the lists' size in
// fresh memory, each page of it a fault. Blocks are never copied: the
// first is small, each next one twice the last, up to listBlock values.
type blockList struct {
	full [][]int64 // the blocks before cur, each full
	cur  []int64   // the block being filled
	n    int       // values in all
}

// listBlock is the most values one block holds (512 KiB).
const listBlock = 1 << 16

// listFirst is the size of a list's first block.
const listFirst = 256

func (l *blockList) add(v int64) {
	if len(l.cur) == cap(l.cur) {
		l.grow()
	}
	l.cur = append(l.cur, v)
	l.n++
}

func (l *blockList) grow() {
	size := listFirst
	if l.cur != nil {
		l.full = append(l.full, l.cur)
		size = min(2*cap(l.cur), listBlock)
	}
	l.cur = make([]int64, 0, size)
}

// blocks appends the list's blocks that hold values to bs.
func (l *blockList) blocks(bs [][]int64) [][]int64 {
	bs = append(bs, l.full...)
	if len(l.cur) > 0 {
		bs = append(bs, l.cur)
	}
	return bs
}
