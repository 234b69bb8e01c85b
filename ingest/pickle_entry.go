package ingest

import (
	"encoding/binary"
	"math"
	"strconv"
	"sync"
)

// The entry decoder: loadFRPickle's path for one entry dict of a Flight
// Recorder dump, laid out as torch's pickler and Python's write it
// (EMPTY_DICT, MARK, keys and values, SETITEMS). It decodes the values
// onto a small typed stack of its own (no interface boxing, no map, no
// list per value), sets the frEntry's fields from those readFlightRecorder
// reads, and keeps of the others only what the generic path would check
// of them (their sizes, their memo slots). On the dumps of a 4096-rank
// job the general decoder spent most of its time allocating and boxing
// (docs/performance.md, "Flight Recorder dumps of a fleet").
//
// It takes a subset of what the general decoder (run) takes; on anything
// else (a dict that is kept, a memoized tuple holding one, a key that is
// not a string, POP, nesting past 16 marks, ...) it puts back what it did
// (the read position, the memo slots it set) and run decodes the entry as
// before. When it decodes an entry, the frEntry, the memo, the sizes and
// the read position are what run would make of it: the tests check it
// against the generic path on every fixture and under the fuzzer
// (TestFRPickle, FuzzFastPickle, TestEntryDecoderCases,
// TestEntrySetMatchesSet).

// mkind is the kind of a value on the entry decoder's stack.
type mkind uint8

const (
	mUnset mkind = iota // in entryDec.mm: see the memo itself
	mNone
	mBool
	mInt
	mFloat
	mStr
	mList  // a list (or, when skip, a skipped container that takes APPENDs)
	mTuple // a tuple
	mDict  // a skipped dict (dicts that are kept are not taken)
)

// mval is a value on the entry decoder's stack. It holds no pointer (a
// string is an index in entryDec.strTab), so that moving it costs no
// write barrier while a collection runs.
type mval struct {
	kind mkind
	// skip: what run pushes as skipV or a *skippedC (a number or container
	// under a key readFlightRecorder does not read): never kept.
	skip bool
	b    bool
	// An integer; a float's bits; a string's index in strTab.
	i  int64
	sz vsize
	// The items of a list or tuple that is kept: entryDec.kids[a:a+n].
	a, n int32
}

// memoStr is a string in the memo, with its index in strTab.
type memoStr struct {
	s   string
	idx int32
}

// maxEntryMarks bounds the marks the entry decoder takes in an entry.
const maxEntryMarks = 16

// memoUndo is a memo slot the entry decoder set, and what it held.
type memoUndo struct {
	i  int
	v  any
	mv mval
}

// entryDec is the entry decoder's scratch, reused from entry to entry,
// and the memory the entries' fields are cut from.
type entryDec struct {
	st    []mval
	marks []int // positions in st; marks[0] is the entry's, at 0
	kids  []mval
	undo  []memoUndo
	slab  arena[frEntry]
	ints  arena[int64]
	strs  arena[string]
	// The strings of the decoder's values, and for each the field of
	// frEntry it names as a key (fieldOf; 0 until looked up).
	strTab []string
	field  []int8
	// mm mirrors the memo (of a decoder with fr set) without pointers.
	mm    []mval
	done  int // entries decoded here (not by run)
	quick int // ... of them by quickEntry
	// The decoder's stack, sizes, marks and memo, handed back by the
	// dump's decoder (keep) for the next one: grown afresh per dump, a
	// 2000-entry list pushed one entry at a time cost more than decoding
	// the entries' ints (docs/performance.md, sixteenth session).
	stack []any
	size  []vsize
	dmark []int
	memo  []any
	// The value cache (pickle_vcache.go): per string of strTab, 1 + the
	// index in slots of the values kept under it as a key (0: none).
	vc    []int32
	slots []valSlot
	hits  int // values taken from the cache
	// The values being read (valueStart), and the lowest stack index
	// popped or changed since cur's began.
	cur, prev valueMark
	low       int
	// Long strings made before, by their bytes (intern): kept from dump
	// to dump.
	big      map[string]string
	bigBytes int
}

// keep takes back d's stacks and memo for the next decoder x serves:
// nothing a decoded value holds points into them (take copies what it
// pops; lists and dicts copy their items).
func (x *entryDec) keep(d *pickleDecoder) {
	clear(d.stack[:cap(d.stack)])
	clear(d.memo[:cap(d.memo)])
	x.stack, x.size, x.dmark, x.memo = d.stack[:0], d.size[:0], d.marks[:0], d.memo[:0]
	d.stack, d.size, d.marks, d.memo = nil, nil, nil, nil
}

// str returns the index in strTab of a new string.
func (x *entryDec) str(s string) int64 {
	x.strTab = append(x.strTab, s)
	x.field = append(x.field, 0)
	x.vc = append(x.vc, 0)
	return int64(len(x.strTab) - 1)
}

// keyField returns the frEntry field (fieldOf) of the string at index i,
// looked up once per string.
func (x *entryDec) keyField(i int64) int8 {
	f := x.field[i]
	if f == 0 {
		f = fieldOf(x.strTab[i])
		x.field[i] = f
	}
	return f
}

// entry decodes the entry dict whose EMPTY_DICT was just read, and pushes
// it; false, with nothing changed, when run must decode it instead.
func (d *pickleDecoder) entry() bool {
	x := d.ed
	start, memoLen := d.pos, len(d.memo)
	x.st, x.marks, x.kids, x.undo = x.st[:0], x.marks[:0], x.kids[:0], x.undo[:0]
	e := &x.slab.cut(1)[0] // zero: fresh, cleared for reuse, or when given back
	if useValueCache {
		if sz, ok := d.quickEntry(e); ok {
			d.push(e, sz)
			x.done++
			x.quick++
			return true
		}
		d.putBack(e, start, memoLen)
		x.kids, x.undo = x.kids[:0], x.undo[:0]
	}
	x.noValues()
	if sz, ok := d.entryOps(e); ok {
		d.push(e, sz)
		x.done++
		return true
	}
	d.putBack(e, start, memoLen)
	x.slab.uncut(1)
	x.dropValues() // values kept since may read the slots put back
	return false
}

// putBack undoes what decoding the entry e, from start, did: its fields,
// the memo slots it set (the memo was memoLen long), the read position.
func (d *pickleDecoder) putBack(e *frEntry, start, memoLen int) {
	x := d.ed
	*e = frEntry{}
	for i := len(x.undo) - 1; i >= 0; i-- {
		u := &x.undo[i]
		d.memo[u.i], x.mm[u.i] = u.v, u.mv
	}
	clear(d.memo[memoLen:])
	d.memo, x.mm = d.memo[:memoLen], x.mm[:memoLen]
	d.pos = start
}

// entryOps reads the entry's opcodes, up to its SETITEMS, and returns the
// entry's size; ok false where run must decode it.
func (d *pickleDecoder) entryOps(e *frEntry) (vsize, bool) {
	x := d.ed
	data := d.data
	// The dict may be memoized before its MARK.
	for {
		if d.pos >= len(data) {
			return vsize{}, false
		}
		op := data[d.pos]
		d.pos++
		if op == '(' {
			break
		}
		switch op {
		case 0x95:
			if !d.frameOp() {
				return vsize{}, false
			}
		case 'q', 'r', 0x94:
			i, ok := d.memoIndex(op)
			if !ok || !d.mset(i, memoContainer{}) {
				return vsize{}, false
			}
		default:
			return vsize{}, false
		}
	}
	x.marks = append(x.marks, 0)
	for d.pos < len(data) {
		at := d.pos
		op := data[d.pos]
		d.pos++
		switch op {
		case 0x95:
			if !d.frameOp() {
				return vsize{}, false
			}
		case '(':
			if len(x.marks) >= maxEntryMarks {
				return vsize{}, false
			}
			x.marks = append(x.marks, len(x.st))
		case 'N':
			x.push(mNone, false, false, 0)
		case 0x88, 0x89:
			x.push(mBool, false, op == 0x88, 0)
		case 'K', 'M', 'J', 0x8a:
			n, ok := d.intOp(op)
			if !ok {
				return vsize{}, false
			}
			x.push(mInt, d.mskipping(), false, n)
		case 'G':
			b, ok := d.arg(8)
			if !ok {
				return vsize{}, false
			}
			f := binary.BigEndian.Uint64(b)
			x.push(mFloat, d.mskipping(), false, int64(f))
		case 'X', 0x8c, 0x8d:
			s, ok := d.strOp(op)
			if !ok {
				return vsize{}, false
			}
			x.push(mStr, false, false, x.str(s))
			if len(x.marks) == 1 && len(x.st)&1 == 1 {
				d.valueStart(at)
			}
		case 'q', 'r', 0x94:
			i, ok := d.memoIndex(op)
			if !ok || !d.mput(i) {
				return vsize{}, false
			}
		case 'h', 'j':
			i, ok := d.getIndex(op)
			if !ok || !d.mget(i) {
				return vsize{}, false
			}
			if len(x.marks) == 1 && len(x.st)&1 == 1 {
				d.valueStart(at)
			}
		case '}':
			if !d.mskipping() {
				return vsize{}, false // a dict that is kept: run's
			}
			x.push(mDict, true, false, 0)
		case ']':
			x.push(mList, d.mskipping(), false, 0)
		case ')':
			x.push(mTuple, false, false, 0)
		case 0x85, 0x86, 0x87: // TUPLE1, TUPLE2, TUPLE3
			n := int(op-0x85) + 1
			if d.mframe() < n || !d.mcontainer(mTuple, len(x.st)-n) {
				return vsize{}, false
			}
		case 't', 'l', 'd': // from the mark
			if len(x.marks) < 2 {
				return vsize{}, false
			}
			m := x.marks[len(x.marks)-1]
			x.marks = x.marks[:len(x.marks)-1]
			k := mTuple
			switch op {
			case 'l':
				k = mList
			case 'd':
				k = mDict
			}
			if !d.mcontainer(k, m) {
				return vsize{}, false
			}
		case 'e', 'u': // APPENDS, SETITEMS
			m := x.marks[len(x.marks)-1]
			if len(x.marks) == 1 {
				if op == 'e' {
					return vsize{}, false
				}
				d.valueEnd(at, 1)
				return d.setEntryItems(e)
			}
			at := m - 1
			if at < 0 || x.marks[len(x.marks)-2] > at || !d.maddTo(at, op == 'u', m) {
				return vsize{}, false
			}
			x.marks = x.marks[:len(x.marks)-1]
		case 'a', 's': // APPEND, SETITEM
			n := 1
			if op == 's' {
				n = 2
			}
			at := len(x.st) - n - 1
			if d.mframe() < n+1 || !d.maddTo(at, op == 's', at+1) {
				return vsize{}, false
			}
		default:
			return vsize{}, false
		}
	}
	return vsize{}, false
}

// setEntryItems is the entry's SETITEMS: its keys and values set into e.
func (d *pickleDecoder) setEntryItems(e *frEntry) (vsize, bool) {
	x := d.ed
	items := x.st
	if len(items)%2 != 0 {
		return vsize{}, false
	}
	sz := sizeOf(items)
	esz := vsize{max(0, sz.h+1), 1 + sz.n}
	if esz.h > maxPlainDepth || esz.n > d.budget {
		return vsize{}, false
	}
	for i := 0; i < len(items); i += 2 {
		k, v := &items[i], &items[i+1]
		if k.kind != mStr {
			return vsize{}, false
		}
		if f := x.keyField(k.i); f > 0 {
			if v.skip {
				return vsize{}, false
			}
			d.setMini(e, f, v)
		}
	}
	x.st = x.st[:0]
	return esz, true
}

// frameOp is FRAME: framing only (its size within the data, the last
// frame read to its end).
func (d *pickleDecoder) frameOp() bool {
	d.frames++
	b, ok := d.arg(8)
	if !ok || d.pos < d.frameEnd { // a new frame before the current one's end
		return false
	}
	n := binary.LittleEndian.Uint64(b)
	if n > uint64(len(d.data)-d.pos) {
		return false
	}
	d.frameEnd = d.pos + int(n)
	return true
}

// intOp reads the argument of BININT1, BININT2, BININT or LONG1 (up to 8
// bytes, sign-extended).
func (d *pickleDecoder) intOp(op byte) (int64, bool) {
	switch op {
	case 'K':
		b, ok := d.arg(1)
		if !ok {
			return 0, false
		}
		return int64(b[0]), true
	case 'M':
		b, ok := d.arg(2)
		if !ok {
			return 0, false
		}
		return int64(binary.LittleEndian.Uint16(b)), true
	case 'J':
		b, ok := d.arg(4)
		if !ok {
			return 0, false
		}
		return int64(int32(binary.LittleEndian.Uint32(b))), true
	}
	b, ok := d.arg(1)
	if !ok || b[0] == 0 || b[0] > 8 {
		return 0, false
	}
	n := int(b[0])
	if b, ok = d.arg(n); !ok {
		return 0, false
	}
	var ux uint64
	for i := n - 1; i >= 0; i-- {
		ux = ux<<8 | uint64(b[i])
	}
	if shift := 64 - 8*uint(n); b[n-1]&0x80 != 0 {
		ux |= ^uint64(0) << (64 - shift)
	}
	return int64(ux), true
}

// strOp reads the argument of BINUNICODE, SHORT_BINUNICODE or
// BINUNICODE8: the string, its length checked against the data.
func (d *pickleDecoder) strOp(op byte) (string, bool) {
	w := 4
	switch op {
	case 0x8c:
		w = 1
	case 0x8d:
		w = 8
	}
	b, ok := d.arg(w)
	if !ok {
		return "", false
	}
	var n uint64
	switch w {
	case 1:
		n = uint64(b[0])
	case 4:
		n = uint64(binary.LittleEndian.Uint32(b))
	default:
		n = binary.LittleEndian.Uint64(b)
	}
	if n > uint64(len(d.data)-d.pos) {
		return "", false
	}
	s, ok := d.arg(int(n))
	if !ok { // across a frame's end
		return "", false
	}
	if x := d.ed; x != nil && len(s) >= internMin {
		return x.intern(s), true
	}
	return string(s), true
}

// internMin is the shortest string the Flight Recorder decoder interns,
// and internMax the most bytes it keeps interned: each dump of a job
// holds the same process groups' rank lists (a 16384-rank job's world
// group: 110 KB in every dump, 1.8 GB of copies in all).
const (
	internMin = 1024
	internMax = 64 << 20
)

// intern returns a string of b's bytes: the one made for the same bytes
// before (in this dump or an earlier one this decoder read), else a new
// one, kept while the strings kept stay under internMax bytes.
func (x *entryDec) intern(b []byte) string {
	if s, ok := x.big[string(b)]; ok {
		return s
	}
	s := string(b)
	if x.bigBytes+len(s) > internMax {
		clear(x.big)
		x.bigBytes = 0
	}
	if x.big == nil {
		x.big = map[string]string{}
	}
	x.big[s] = s
	x.bigBytes += len(s)
	return s
}

// memoIndex reads the slot of BINPUT, LONG_BINPUT or MEMOIZE.
func (d *pickleDecoder) memoIndex(op byte) (int, bool) {
	switch op {
	case 'q':
		b, ok := d.arg(1)
		if !ok {
			return 0, false
		}
		return int(b[0]), true
	case 'r':
		b, ok := d.arg(4)
		if !ok {
			return 0, false
		}
		return int(binary.LittleEndian.Uint32(b)), true
	}
	return len(d.memo), true
}

// getIndex reads the slot of BINGET or LONG_BINGET.
func (d *pickleDecoder) getIndex(op byte) (int, bool) {
	if op == 'h' {
		b, ok := d.arg(1)
		if !ok {
			return 0, false
		}
		return int(b[0]), true
	}
	b, ok := d.arg(4)
	if !ok {
		return 0, false
	}
	return int(binary.LittleEndian.Uint32(b)), true
}

// mset sets memo slot i to v, as put does, noting what it held.
func (d *pickleDecoder) mset(i int, v any) bool {
	if i < 0 || i > len(d.data) {
		return false
	}
	x := d.ed
	if i < len(d.memo) {
		x.dropValues() // an overwritten slot: values kept may read it
	}
	for len(d.memo) <= i {
		d.memo = append(d.memo, nil)
	}
	x.grow(len(d.memo))
	x.undo = append(x.undo, memoUndo{i, d.memo[i], x.mm[i]})
	d.memo[i] = v
	x.mirror(i, v)
	return true
}

// grow makes mm n long, as the memo is.
func (x *entryDec) grow(n int) {
	for len(x.mm) < n {
		x.mm = append(x.mm, mval{})
	}
}

// mirror sets mm[i] from memo slot i's new value v: the value mget
// pushes, or mUnset where mget must look at the memo (a container, which
// it refuses, or a tuple).
func (x *entryDec) mirror(i int, v any) {
	if v == nil { // never put: None is pnone in the memo
		x.mm[i] = mval{}
		return
	}
	x.mm[i], _ = x.scalarOf(v) // mUnset when not a scalar
}

// scalarOf is the stack value of a scalar plain value (None as nil or
// pnone; a string as a memoStr or new); ok false, kind mUnset, for
// anything else.
func (x *entryDec) scalarOf(v any) (mval, bool) {
	mv := mval{sz: scalar}
	switch m := v.(type) {
	case nil, pnone:
		mv.kind = mNone
	case memoStr:
		mv.kind, mv.i = mStr, int64(m.idx)
	case string:
		mv.kind, mv.i = mStr, x.str(m)
	case int:
		mv.kind, mv.i = mInt, int64(m)
	case bool:
		mv.kind, mv.b = mBool, m
	case float64:
		mv.kind, mv.i = mFloat, int64(math.Float64bits(m))
	default:
		return mval{}, false
	}
	return mv, true
}

// mframe is frame on the entry decoder's stack.
func (d *pickleDecoder) mframe() int {
	return len(d.ed.st) - d.ed.marks[len(d.ed.marks)-1]
}

// mskipping is skipping on the entry decoder's stack: below its innermost
// mark lies the entry (mark 0) or a value of the stack.
func (d *pickleDecoder) mskipping() bool {
	x := d.ed
	m := x.marks[len(x.marks)-1]
	if m == 0 {
		if len(x.st)%2 == 0 {
			return false
		}
		k := &x.st[len(x.st)-1]
		return k.kind == mStr && x.keyField(k.i) < 0
	}
	v := &x.st[m-1]
	return v.skip && (v.kind == mList || v.kind == mDict)
}

// mput is put of the top value.
func (d *pickleDecoder) mput(i int) bool {
	x := d.ed
	if d.mframe() == 0 {
		return false
	}
	v := &x.st[len(x.st)-1]
	var mv any
	switch {
	case v.skip || v.kind == mList || v.kind == mDict:
		mv = memoContainer{}
	case v.kind == mTuple:
		mv = memoTuple{d.toAny(v).([]any), v.sz}
	case v.kind == mNone:
		mv = pnone{}
	case v.kind == mStr:
		mv = memoStr{x.strTab[v.i], int32(v.i)}
	default:
		mv = d.toAny(v)
	}
	return d.mset(i, mv)
}

// mget is get: what run pushes of memo slot i. Scalars come from the
// memo's mirror (every put of a decoder with fr keeps it); a memoized
// tuple from the memo itself; anything else (a container, an unset slot)
// is refused, as run refuses it.
func (d *pickleDecoder) mget(i int) bool {
	if i < 0 || i >= len(d.memo) {
		return false
	}
	x := d.ed
	if x.mm[i].kind != mUnset {
		m, v := &x.mm[i], x.slot()
		v.kind, v.skip, v.b, v.i = m.kind, false, m.b, m.i
		v.sz = scalar
		v.a, v.n = 0, 0
		return true
	}
	m, ok := d.memo[i].(memoTuple) // Python's pickler memoizes tuples (torch's does not)
	if !ok {
		return false
	}
	a := len(x.kids)
	if !x.plainKids(m.v) {
		x.kids = x.kids[:a]
		return false
	}
	c := x.slot()
	c.kind, c.skip, c.b, c.i = mTuple, false, false, 0
	c.sz = m.vsize
	c.a, c.n = int32(a), int32(len(m.v))
	return true
}

// plainKids adds the values of a memoized tuple to kids (lists and tuples
// inside it as tuples: both are []any once taken); false for a dict.
func (x *entryDec) plainKids(items []any) bool {
	a := len(x.kids)
	x.kids = append(x.kids, make([]mval, len(items))...)
	for j, it := range items {
		v, ok := x.scalarOf(it)
		if l, isList := it.([]any); isList {
			v = mval{kind: mTuple, sz: scalar, a: int32(len(x.kids)), n: int32(len(l))}
			ok = x.plainKids(l)
		}
		if !ok {
			return false
		}
		x.kids[a+j] = v
	}
	return true
}

// push pushes a scalar of kind k: its integer, float's bits or string's
// index i. The fields are stored in place (a value built elsewhere and
// copied in would be read back in wider loads than it was stored with,
// which stalls).
func (x *entryDec) push(k mkind, skip, b bool, i int64) {
	v := x.slot()
	v.kind, v.skip, v.b, v.i = k, skip, b, i
	v.sz = scalar
	v.a, v.n = 0, 0
}

// slot adds a value to the stack and returns it, its fields unset.
func (x *entryDec) slot() *mval {
	n := len(x.st)
	if n == cap(x.st) {
		x.st = append(x.st, mval{})
	}
	x.st = x.st[:n+1]
	return &x.st[n]
}

// sizeOf is the greatest depth and the total count of items.
func sizeOf(items []mval) vsize {
	var sz vsize
	for i := range items {
		sz.h = max(sz.h, items[i].sz.h)
		sz.n += items[i].sz.n
	}
	return sz
}

// mcontainer replaces the values from st[from] on with a container of
// kind k holding them (TUPLEn, or TUPLE, LIST or DICT from the mark), as
// run does.
func (d *pickleDecoder) mcontainer(k mkind, from int) bool {
	x := d.ed
	items := x.st[from:]
	sz := sizeOf(items)
	x.st = x.st[:from]
	x.low = min(x.low, from)
	csz := vsize{max(0, sz.h+1), 1 + sz.n}
	if csz.h > maxPlainDepth || csz.n > d.budget {
		return false
	}
	kind, skip, a, n := k, false, int32(0), int32(0)
	switch {
	case d.mskipping():
		if k == mDict && len(items)%2 != 0 {
			return false
		}
		skip = true
		if k == mTuple {
			kind = mList // run's skipList
		}
	case k == mDict || hasMSkip(items):
		return false
	default:
		a, n = int32(len(x.kids)), int32(len(items))
		x.kids = append(x.kids, items...)
	}
	c := x.slot()
	c.kind, c.skip, c.b, c.i = kind, skip, false, 0
	c.sz = csz
	c.a, c.n = a, n
	return true
}

func hasMSkip(items []mval) bool {
	for i := range items {
		if items[i].skip {
			return true
		}
	}
	return false
}

// maddTo adds st[from:] to the container st[at] (APPENDS, SETITEMS,
// APPEND, SETITEM), as run's grow and addTo do, and drops them.
func (d *pickleDecoder) maddTo(at int, dict bool, from int) bool {
	x := d.ed
	if at < 0 || at >= len(x.st) {
		return false
	}
	items := x.st[from:]
	sz := sizeOf(items)
	x.low = min(x.low, at)
	c := &x.st[at]
	c.sz.h = max(c.sz.h, sz.h+1)
	c.sz.n += sz.n
	if c.sz.h > maxPlainDepth || c.sz.n > d.budget {
		return false
	}
	switch {
	case c.skip && (c.kind == mList || c.kind == mDict):
		if (c.kind == mDict) != dict || dict && len(items)%2 != 0 {
			return false
		}
	case c.kind == mList && !dict:
		if hasMSkip(items) || c.n > 0 && int(c.a+c.n) != len(x.kids) {
			return false
		}
		if c.n == 0 {
			c.a = int32(len(x.kids))
		}
		c.n += int32(len(items))
		x.kids = append(x.kids, items...)
	default:
		return false
	}
	x.st = x.st[:from]
	return true
}

// toAny is the plain value run makes of v (v not skipped).
func (d *pickleDecoder) toAny(v *mval) any {
	switch v.kind {
	case mBool:
		return v.b
	case mInt:
		return int(v.i)
	case mFloat:
		return math.Float64frombits(uint64(v.i))
	case mStr:
		return d.ed.strTab[v.i]
	case mList, mTuple:
		l := make([]any, v.n)
		for j := range l {
			l[j] = d.toAny(&d.ed.kids[v.a+int32(j)])
		}
		return l
	}
	return nil
}

// mString is asString of v's plain value.
func (d *pickleDecoder) mString(v *mval) string {
	switch v.kind {
	case mStr:
		return d.ed.strTab[v.i]
	case mInt:
		return strconv.FormatInt(v.i, 10)
	case mFloat:
		return asString(math.Float64frombits(uint64(v.i)))
	}
	return ""
}

// mInt is asInt of v's plain value.
func (d *pickleDecoder) mInt(v *mval) frInt {
	switch v.kind {
	case mInt:
		return frInt{v.i, true}
	case mStr:
		return toFRInt(d.ed.strTab[v.i])
	case mFloat:
		return toFRInt(math.Float64frombits(uint64(v.i)))
	}
	return frInt{}
}

// items returns the items of a list or tuple, nil for anything else.
func (d *pickleDecoder) items(v *mval) []mval {
	if v.kind != mList && v.kind != mTuple {
		return nil
	}
	return d.ed.kids[v.a : v.a+v.n]
}

// setMini is e.set(k, the plain value of v), without making that value:
// the fields are cut from the decoder's memory.
func (d *pickleDecoder) setMini(e *frEntry, f int8, v *mval) {
	if v.kind != mList && v.kind != mTuple {
		d.setScalar(e, f, v.kind, v.b, v.i)
		return
	}
	switch f {
	case fName:
		e.name = d.mString(v)
	case fState:
		e.state = d.mString(v)
	case fPGID:
		e.pgID = d.mString(v)
	case fPG:
		l := d.items(v)
		e.pgN, e.pg0, e.pg1 = len(l), "", ""
		if len(l) > 0 {
			e.pg0 = d.mString(&l[0])
		}
		if len(l) > 1 {
			e.pg1 = d.mString(&l[1])
		}
	case fP2P:
		e.isP2P = v.kind == mBool && v.b
	case fCreated:
		e.created = d.mInt(v)
	case fStarted:
		e.started = d.mInt(v)
	case fCompleted:
		e.completed = d.mInt(v)
	case fCSeq:
		e.cseq = d.mInt(v)
	case fPSeq:
		e.pseq = d.mInt(v)
	case fRecord:
		e.record = d.mInt(v)
	case fSizes:
		l := d.items(v)
		e.nsizes, e.dims0, e.nelems = len(l), nil, nil
		if len(l) == 0 {
			return
		}
		e.nelems = d.ed.cutInts(len(l))
		for j := range l {
			dims := d.ed.cutInts(len(d.items(&l[j])))
			n := 0
			for _, x := range d.items(&l[j]) {
				if y := d.mInt(&x); y.ok {
					dims[n] = y.v
					n++
				}
			}
			dims = dims[:n:n]
			if n == 0 {
				dims = nil
			}
			if j == 0 {
				e.dims0 = dims
			}
			e.nelems[j] = elems(dims)
		}
	case fDtypes:
		l := d.items(v)
		e.dtypes = nil
		if len(l) == 0 {
			return
		}
		e.dtypes = d.ed.cutStrs(len(l))
		for j := range l {
			e.dtypes[j] = d.mString(&l[j])
		}
	}
}

// setScalar is setMini of a scalar of kind k (its bool b, its integer,
// float's bits or string's index i), without a value made: what setMini
// makes of one (for a field read as a list: none).
func (d *pickleDecoder) setScalar(e *frEntry, f int8, k mkind, b bool, i int64) {
	switch f {
	case fName, fState, fPGID:
		var s string
		switch k {
		case mStr:
			s = d.ed.strTab[i]
		case mInt:
			s = strconv.FormatInt(i, 10)
		case mFloat:
			s = asString(math.Float64frombits(uint64(i)))
		}
		switch f {
		case fName:
			e.name = s
		case fState:
			e.state = s
		default:
			e.pgID = s
		}
	case fPG:
		e.pgN, e.pg0, e.pg1 = 0, "", ""
	case fP2P:
		e.isP2P = k == mBool && b
	case fCreated, fStarted, fCompleted, fCSeq, fPSeq, fRecord:
		var n frInt
		switch k {
		case mInt:
			n = frInt{i, true}
		case mStr:
			n = toFRInt(d.ed.strTab[i])
		case mFloat:
			n = toFRInt(math.Float64frombits(uint64(i)))
		}
		switch f {
		case fCreated:
			e.created = n
		case fStarted:
			e.started = n
		case fCompleted:
			e.completed = n
		case fCSeq:
			e.cseq = n
		case fPSeq:
			e.pseq = n
		default:
			e.record = n
		}
	case fSizes:
		e.nsizes, e.dims0, e.nelems = 0, nil, nil
	case fDtypes:
		e.dtypes = nil
	}
}

// copyField sets e's field f (fieldOf) to src's.
func copyField(e, src *frEntry, f int8) {
	switch f {
	case fName:
		e.name = src.name
	case fState:
		e.state = src.state
	case fPGID:
		e.pgID = src.pgID
	case fPG:
		e.pgN, e.pg0, e.pg1 = src.pgN, src.pg0, src.pg1
	case fP2P:
		e.isP2P = src.isP2P
	case fCreated:
		e.created = src.created
	case fStarted:
		e.started = src.started
	case fCompleted:
		e.completed = src.completed
	case fCSeq:
		e.cseq = src.cseq
	case fPSeq:
		e.pseq = src.pseq
	case fRecord:
		e.record = src.record
	case fSizes:
		e.nsizes, e.dims0, e.nelems = src.nsizes, src.dims0, src.nelems
	case fDtypes:
		e.dtypes = src.dtypes
	}
}

// cutInts returns n int64s of the decoder's memory (nil for none).
func (x *entryDec) cutInts(n int) []int64 {
	if n == 0 {
		return nil
	}
	return x.ints.cut(n)
}

// cutStrs returns n strings of the decoder's memory.
func (x *entryDec) cutStrs(n int) []string { return x.strs.cut(n) }

// arena hands out runs of T from chunks it keeps: reset hands them out
// again (each chunk cleared first when zero is set), so that the next dump
// a core decodes writes memory in its cache rather than fresh pages.
type arena[T any] struct {
	chunks [][]T // [0, k] in use; len(chunks[k]) handed out of it
	k      int
	size   int  // a chunk's length
	zero   bool // what is handed out is zero
}

// cut returns the next n values (n at most size: a longer run gets memory
// of its own).
func (a *arena[T]) cut(n int) []T {
	if n > a.size {
		return make([]T, n)
	}
	if len(a.chunks) == 0 || cap(a.chunks[a.k])-len(a.chunks[a.k]) < n {
		if len(a.chunks) > 0 {
			a.k++
		}
		if a.k == len(a.chunks) {
			a.chunks = append(a.chunks, make([]T, 0, a.size))
		} else if a.zero {
			clear(a.chunks[a.k][:a.size])
		}
	}
	c := a.chunks[a.k]
	a.chunks[a.k] = c[:len(c)+n]
	return c[len(c) : len(c)+n : len(c)+n]
}

// uncut gives back the last n values cut (from the current chunk).
func (a *arena[T]) uncut(n int) {
	a.chunks[a.k] = a.chunks[a.k][:len(a.chunks[a.k])-n]
}

// reset makes every chunk free again.
func (a *arena[T]) reset() {
	for i := range a.chunks[:min(a.k+1, len(a.chunks))] {
		a.chunks[i] = a.chunks[i][:0]
	}
	if len(a.chunks) > 0 && a.zero {
		clear(a.chunks[0][:a.size])
	}
	a.k = 0
}

// entryDecs are decoders' scratch and arenas, reused by the next dump
// decoded (on any core) once a dump's entries are read (release).
var entryDecs = sync.Pool{New: func() any {
	return &entryDec{slab: arena[frEntry]{size: 64, zero: true}, ints: arena[int64]{size: 4096}, strs: arena[string]{size: 1024}}
}}

// release hands x back for another dump: nothing it handed out (entries,
// their lists) may be used after.
func (x *entryDec) release() {
	x.slab.reset()
	x.ints.reset()
	x.strs.reset()
	clear(x.strTab)
	x.dropValues()
	x.strTab, x.field, x.mm, x.vc = x.strTab[:0], x.field[:0], x.mm[:0], x.vc[:0]
	x.done, x.quick, x.hits = 0, 0, 0
	entryDecs.Put(x)
}
