package ingest

import (
	"bytes"
	"encoding/binary"
)

// The entry decoder's value cache. The entries of a Flight Recorder dump
// repeat most of their containers byte for byte (an op's input and output
// sizes and dtypes, its process group): on the dumps of a 4096-rank job
// two thirds of an entry's opcodes build containers that an earlier entry
// built from the same bytes under the same key. The entry decoder keeps,
// per key (a string of strTab), the bytes of the last few container values
// decoded under it and the values they made (with the items under them);
// when an entry's value under that key starts with the same bytes, the
// value is pushed whole and the bytes skipped.
//
// A value's bytes make the same value again, with the same effects, when:
//   - they reach nothing on the stack below their key: the value is built
//     of what its own bytes push (low, checked when it is kept);
//   - they set no memo slot (undo unchanged) and read only slots that hold
//     what they held: every put that overwrites a slot drops the cache
//     (dropValues), as does an entry given back to run (its slots are put
//     back);
//   - they hold no FRAME (whose check depends on where it lies), and do
//     not cross the end of one where they are taken (an argument across
//     it is an error);
//   - the key is the same string, so every skip decision is the same.
//
// What else their decoding did, new strings in strTab, is the same again
// by value: the cached items name the first decoding's strings. (The
// memo condition is stricter than it need be: the same bytes set the same
// slots to what they already hold. It costs nothing on torch's dumps,
// whose containers set no slot once their strings are memoized.) The
// tests decode dumps with and without the cache and against the generic
// path (TestValueCacheDumps, TestValueCacheRandom, TestValueCacheFrameEnd,
// FuzzFastPickle).
//
// quickEntry, below, reads an entry without the entry decoder's stack
// when it is laid out as torch lays out all but a dump's first.

// valCache is a container value decoded from raw under one key, and the
// items under it laid out in kids (a in kids is relative to kids).
type valCache struct {
	raw  []byte
	v    mval
	kids []mval
	// snap holds the field v sets (of its key's), once quickEntry set it.
	snap    frEntry
	snapped bool
}

// maxValCache is how many values per key the cache keeps (the last ones).
const maxValCache = 4

// useValueCache turns the value cache and quickEntry off for the tests
// that compare decoding with and without them (never set otherwise).
var useValueCache = true

// valSlot is the values kept under one key: vals[0:n], next the one to
// replace.
type valSlot struct {
	vals [maxValCache]valCache
	n    int8
	next int8
	key  int64 // the key's index in strTab
}

// valueMark is where the value of an entry's item begins (valueStart):
// its key's index in strTab (-1: none), the position of its bytes, the
// stack's height (the value's index), the undo list's and FRAMEs' counts,
// and the lowest stack index popped or changed since (with entryDec.low).
type valueMark struct {
	key                  int64
	start, depth         int
	undo, frames, lowest int
}

// valueStart is called when a string is pushed above the entry's mark
// where a key would be (an odd number of values above it): the key's value
// begins at d.pos. It pushes a cached value whose bytes are those at
// d.pos, or notes where the value begins (cur) for valueEnd. The string
// may be a tuple's second item rather than a key (a value "h h TUPLE2"):
// the mark before it (prev) is kept too, and valueEnd takes it when the
// value from cur reached below its start.
func (d *pickleDecoder) valueStart(at int) {
	x := d.ed
	d.valueEnd(at, 2)
	k := &x.st[len(x.st)-1]
	x.prev = x.cur
	x.prev.lowest = min(x.prev.lowest, x.low)
	x.cur.key = -1
	if k.kind != mStr || !useValueCache {
		return
	}
	if c := x.vc[k.i]; c > 0 {
		if vc := d.cached(&x.slots[c-1]); vc != nil {
			*x.slot() = x.relocate(vc)
			d.pos += len(vc.raw)
			return
		}
	}
	x.cur = valueMark{key: k.i, start: d.pos, depth: len(x.st), undo: len(x.undo), frames: d.frames, lowest: len(x.st)}
	x.low = len(x.st)
}

// noValues forgets the values begun: none is kept until the next key.
func (x *entryDec) noValues() {
	x.cur.key, x.prev.key = -1, -1
}

// valueEnd is called before the next key is pushed (above 2: the
// value, then the key) or at the entry's SETITEMS (above 1): the value
// noted by valueStart (cur, else prev) ends at at. A container whose
// bytes pass the tests above is kept.
func (d *pickleDecoder) valueEnd(at int, above int) {
	x := d.ed
	for _, m := range [2]*valueMark{&x.cur, &x.prev} {
		lowest := min(m.lowest, x.low)
		if m.key < 0 || len(x.st) != m.depth+above || lowest < m.depth || len(x.undo) != m.undo || d.frames != m.frames {
			continue
		}
		d.keepValue(m, at)
		return
	}
}

// keepValue keeps the value that m marks, whose bytes end at at, when it
// is a container.
func (d *pickleDecoder) keepValue(m *valueMark, at int) {
	x := d.ed
	v := &x.st[m.depth]
	if v.kind != mList && v.kind != mTuple && v.kind != mDict || at-m.start < 3 {
		return
	}
	c := x.vc[m.key]
	if c == 0 {
		x.slots = append(x.slots, valSlot{key: m.key})
		c = int32(len(x.slots))
		x.vc[m.key] = c
	}
	s := &x.slots[c-1]
	j := s.next
	s.next = (s.next + 1) % maxValCache
	s.n = max(s.n, j+1)
	vc := &s.vals[j]
	vc.raw = d.data[m.start:at]
	vc.kids, vc.v = x.lay(vc.kids[:0], *v)
	vc.snap, vc.snapped = frEntry{}, false
}

// lay appends v's items (and theirs, first) to dst, a in each relative to
// dst, and returns dst and v with a set so: v's own items are dst's last,
// as they are in kids once v is built (APPENDS to it again find them
// there).
func (x *entryDec) lay(dst []mval, v mval) ([]mval, mval) {
	if v.kind != mList && v.kind != mTuple {
		return dst, v
	}
	if v.n == 0 {
		v.a = 0
		return dst, v
	}
	items := x.kids[v.a : v.a+v.n]
	moved := make([]mval, len(items))
	for j := range items {
		dst, moved[j] = x.lay(dst, items[j])
	}
	v.a = int32(len(dst))
	return append(dst, moved...), v
}

// dropValues empties the value cache: a memo slot changed. It costs what
// the cache holds, not what strTab does (a pickle may overwrite a slot
// after every string).
func (x *entryDec) dropValues() {
	for i := range x.slots {
		s := &x.slots[i]
		x.vc[s.key] = 0
		for j := range s.vals {
			s.vals[j].raw, s.vals[j].snap, s.vals[j].snapped = nil, frEntry{}, false
		}
	}
	x.slots = x.slots[:0]
	x.noValues()
}

// quickEntry decodes an entry laid out as torch's dumps lay out all but
// the first: each key a string the memo holds (BINGET), each value one
// scalar opcode, a string (memoized or not), a string or scalar the memo
// holds, or a container the value cache holds under that key. It sets
// e's fields as entryOps would, in the order of the items (the last of a
// key twice wins, as in setEntryItems), and returns the entry's size;
// false as soon as anything else comes (a key spelled out, a container
// not cached, ...): entry then puts back what it did and entryOps
// decodes the entry.
func (d *pickleDecoder) quickEntry(e *frEntry) (vsize, bool) {
	x := d.ed
	data := d.data
	if d.pos >= len(data) || data[d.pos] != '(' {
		return vsize{}, false
	}
	d.pos++
	sz := vsize{0, 1} // the dict, its items added as they come
	for {
		if d.pos+2 > len(data) {
			return vsize{}, false
		}
		// The key.
		var ki int
		switch data[d.pos] {
		case 'u':
			d.pos++
			sz.h++
			if sz.h > maxPlainDepth || sz.n > d.budget {
				return vsize{}, false
			}
			return sz, true
		case 'h':
			ki = int(data[d.pos+1])
			d.pos += 2
		case 'j':
			d.pos++
			b, ok := d.arg(4)
			if !ok {
				return vsize{}, false
			}
			ki = int(binary.LittleEndian.Uint32(b))
		default:
			return vsize{}, false
		}
		if ki >= len(d.memo) || x.mm[ki].kind != mStr || d.pos >= len(data) {
			return vsize{}, false
		}
		key := x.mm[ki].i
		f := x.keyField(key)
		// The value: one the cache holds under this key (a container,
		// or a tuple of strings the memo holds, which starts as one of
		// them does), else a scalar.
		if c := x.vc[key]; c > 0 {
			if vc := d.cached(&x.slots[c-1]); vc != nil {
				d.pos += len(vc.raw)
				sz.h = max(sz.h, vc.v.sz.h)
				sz.n += 1 + vc.v.sz.n
				if f > 0 {
					if !vc.snapped {
						v := x.relocate(vc)
						d.setMini(&vc.snap, f, &v)
						vc.snapped = true
					}
					copyField(e, &vc.snap, f)
				}
				continue
			}
		}
		var (
			k mkind
			b bool
			i int64
		)
		d.pos++
		switch op := data[d.pos-1]; op {
		case 'N':
			k = mNone
		case 0x88, 0x89:
			k, b = mBool, op == 0x88
		case 'K': // BININT1, as intOp reads it (inline: most of the values)
			a, ok := d.arg(1)
			if !ok {
				return vsize{}, false
			}
			k, i = mInt, int64(a[0])
		case 'M':
			a, ok := d.arg(2)
			if !ok {
				return vsize{}, false
			}
			k, i = mInt, int64(binary.LittleEndian.Uint16(a))
		case 0x8a: // LONG1 of 8 bytes (a time), inline; other lengths by intOp
			if d.pos+9 <= len(data) && data[d.pos] == 8 && (d.pos >= d.frameEnd || d.pos+9 <= d.frameEnd) {
				k, i = mInt, int64(binary.LittleEndian.Uint64(data[d.pos+1:]))
				d.pos += 9
				break
			}
			fallthrough
		case 'J':
			n, ok := d.intOp(op)
			if !ok {
				return vsize{}, false
			}
			k, i = mInt, n
		case 'G':
			a, ok := d.arg(8)
			if !ok {
				return vsize{}, false
			}
			k, i = mFloat, int64(binary.BigEndian.Uint64(a))
		case 'X', 0x8c, 0x8d:
			s, ok := d.strOp(op)
			if !ok {
				return vsize{}, false
			}
			k, i = mStr, x.str(s)
			// Memoized (as torch's pickler memoizes every new string):
			// mput's memoStr.
			if d.pos < len(data) && (data[d.pos] == 'q' || data[d.pos] == 'r' || data[d.pos] == 0x94) {
				op := data[d.pos]
				d.pos++
				j, ok := d.memoIndex(op)
				if !ok || !d.mset(j, memoStr{s, int32(i)}) {
					return vsize{}, false
				}
			}
		case 'h', 'j':
			j, ok := d.getIndex(op)
			if !ok || j >= len(d.memo) || x.mm[j].kind == mUnset {
				return vsize{}, false // a tuple, or a slot run refuses
			}
			m := &x.mm[j]
			k, b, i = m.kind, m.b, m.i
		default:
			return vsize{}, false
		}
		sz.n += 2 // the key and a scalar
		if f > 0 {
			d.setScalar(e, f, k, b, i)
		}
	}
}

// cached returns the value of s whose bytes begin at d.pos, nil when
// none. Its bytes must not cross the end of a frame (an argument across it
// is an error).
func (d *pickleDecoder) cached(s *valSlot) *valCache {
	rest := d.data[d.pos:]
	for j := range s.vals[:s.n] {
		if vc := &s.vals[j]; bytes.HasPrefix(rest, vc.raw) && (d.pos >= d.frameEnd || d.pos+len(vc.raw) <= d.frameEnd) {
			d.ed.hits++
			return vc
		}
	}
	return nil
}

// relocate appends vc's items to kids and returns its value, a set in
// kids.
func (x *entryDec) relocate(vc *valCache) mval {
	base := int32(len(x.kids))
	x.kids = append(x.kids, vc.kids...)
	for i := range x.kids[base:] {
		if k := &x.kids[int(base)+i]; k.kind == mList || k.kind == mTuple {
			k.a += base
		}
	}
	v := vc.v
	if v.kind == mList || v.kind == mTuple {
		v.a += base
	}
	return v
}
