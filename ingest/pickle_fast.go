package ingest

import (
	"encoding/binary"
	"math"
	"strconv"
)

// fastPickle decodes the pickles Flight Recorder dumps are (dicts, lists
// and tuples of strings, integers, floats, booleans and None, strings
// memoized by value) straight into the plain data loadPickle's second gate
// makes, without gopickle's intermediate objects: on the dumps of a
// 4096-rank job (8M entries) the generic path took most of `ppprof hang`'s
// time (docs/performance.md, "Flight Recorder dumps of a fleet").
//
// It takes a subset of the binary opcodes and a subset of their uses; on
// anything else (text or Python 2 opcodes, bytes, sets, a memoized or
// duplicated container used twice, a key that is not a string or an
// integer, malformed input of any kind, nesting past plainValue's limit)
// it gives up (ok false) and loadPickle takes the generic path, which
// makes the same values or says what is wrong. When ok is true, v is what
// the generic path returns for data, with the same Go types (the tests
// check it on every fixture and under the fuzzer: FuzzFastPickle).
//
// What it decodes passes checkPickle: it takes none of the opcodes the
// gate refuses and checks every length against the data.
func fastPickle(data []byte) (v any, ok bool) {
	d := pickleDecoder{data: data, budget: 4*int64(len(data)) + 1024}
	return d.run()
}

// loadFRPickle is loadPickle for a Flight Recorder dump: the same plain
// data, except that the entry dicts of the top-level dict's "entries" list
// are decoded straight into frEntry values (*frEntry in the list) when the
// pickle lays them out as torch and Python do (each dict pushed above the
// mark of an APPENDS to that list): no map per entry, nothing kept of the
// keys readFlightRecorder does not read. Entries decoded otherwise are
// plain dicts, as loadPickle's.
//
// The fast decoder runs first: what it decodes passes checkPickle (it
// takes no opcode checkPickle refuses, and checks every length it reads),
// so the gate's walk is needed only for what it gives up on.
func loadFRPickle(data []byte) (any, error) {
	v, _, err := decodeFR(data)
	return v, err
}

// decodeFR is loadFRPickle, and the decoder's memory the entries are cut
// from, to release once they are read (nil when the generic path decoded
// data).
func decodeFR(data []byte) (any, *entryDec, error) {
	d := newFRDecoder(data)
	v, ok := d.run()
	d.ed.keep(d)
	if ok {
		return v, d.ed, nil
	}
	d.ed.release()
	if err := checkPickle(data); err != nil {
		return nil, nil, err
	}
	v, err := slowPickle(data)
	return v, nil, err
}

// newFRDecoder is loadFRPickle's decoder of data.
func newFRDecoder(data []byte) *pickleDecoder {
	ed := entryDecs.Get().(*entryDec) // released: its value cache empty
	return &pickleDecoder{data: data, budget: 4*int64(len(data)) + 1024, fr: true, ed: ed,
		stack: ed.stack, size: ed.size, marks: ed.dmark, memo: ed.memo}
}

// inEntries reports whether a dict pushed now is an entry of the top-level
// dict's "entries" list: the stack holds the top-level dict, its keys and
// values so far, "entries" and the list, then a mark, then the entries
// pushed since.
func (d *pickleDecoder) inEntries() bool {
	n := len(d.marks)
	if n != 2 || d.marks[0] != 1 {
		return false
	}
	at := d.marks[1] - 1
	if at < 2 {
		return false
	}
	if _, isList := d.stack[at].(*plist); !isList {
		return false
	}
	k, _ := d.stack[at-1].(string)
	_, isMap := d.stack[0].(map[string]any)
	return k == "entries" && isMap
}

// plist is a list being built: appends mutate it where it lies on the
// stack. It becomes a []any when its parent takes it (settle).
type plist struct {
	items []any
	taken bool
}

// memoContainer marks a memo slot that holds a container: getting it
// would share it, which the generic path copies (and bounds); fastPickle
// gives up instead.
type memoContainer struct{}

type pickleDecoder struct {
	data  []byte
	pos   int
	stack []any
	size  []vsize // per stack value
	marks []int
	memo  []any // index -> value; nil slot: unset (a set None is pnone)
	// budget is the generic path's bound on the values it copies (each
	// reference to a memoized tuple is copied again).
	budget int64
	fr     bool // entries decoded into frEntry (loadFRPickle)
	frames int  // FRAMEs read
	// frameEnd is where the last FRAME's frame ends (0: none yet). Like
	// the generic path, the decoder refuses a FRAME before it, and an
	// argument that begins before it and ends after it.
	frameEnd int
	entries  *plist    // the entries list, once an entry was pushed
	ed       *entryDec // with fr
}

// vsize is the depth of a value's tree (0: a scalar; an overestimate by
// one at most) and the number of values plainValue visits to copy it.
type vsize struct {
	h int32
	n int64
}

// memoTuple is a tuple in the memo: immutable, so getting it again is
// safe (the generic path copies it each time: its size is counted).
type memoTuple struct {
	v []any
	vsize
}

// skippedC stands for a container loadFRPickle does not build: the value
// of an entry key readFlightRecorder does not read, or a container inside
// one. Its items are dropped as they are added (their sizes still count).
type skippedC struct{ dict bool }

// skippedV stands for a number in such a value (not boxed into an any).
type skippedV struct{}

var (
	skipList = &skippedC{}
	skipDict = &skippedC{dict: true}
	skipV    = skippedV{}
)

// skipping reports whether the value pushed now is not kept (loadFRPickle):
// it is the value of an entry key readFlightRecorder does not read (the
// entry's frame holds an odd number of values, the last a key it does not
// read), or goes into a container that is not kept.
func (d *pickleDecoder) skipping() bool {
	if !d.fr || len(d.marks) == 0 {
		return false
	}
	m := d.marks[len(d.marks)-1]
	if m == 0 {
		return false
	}
	switch d.stack[m-1].(type) {
	case *skippedC:
		return true
	case *frEntry:
		if (len(d.stack)-m)%2 == 0 {
			return false
		}
		k, ok := d.stack[len(d.stack)-1].(string)
		return ok && !frEntryKey(k)
	}
	return false
}

// isSkip reports whether v is not the generic path's value: a value not
// built (skipV, a skipped container), or an entry (*frEntry, where the
// generic path has a dict). Such a value may go only into a skipped
// container, or into an entry under a key readFlightRecorder does not
// read, and an entry into the entries list: taken into anything else (or
// left as the pickle's value) it would stand where the generic path has
// another value, and the decoder gives up.
func isSkip(v any) bool {
	switch v.(type) {
	case skippedV, *skippedC, *frEntry:
		return true
	}
	return false
}

func hasSkip(items []any) bool {
	for _, v := range items {
		if isSkip(v) {
			return true
		}
	}
	return false
}

// pushNum pushes a number, or skipV when it is not kept.
func (d *pickleDecoder) pushNum(v any) {
	if d.skipping() {
		d.push(skipV, scalar)
		return
	}
	d.push(v, scalar)
}

// pnone is None in the memo (nil marks an unset slot).
type pnone struct{}

// maxPlainDepth is plainValue's nesting limit.
const maxPlainDepth = 64

func (d *pickleDecoder) push(v any, sz vsize) {
	d.stack = append(d.stack, v)
	d.size = append(d.size, sz)
}

var scalar = vsize{0, 1}

// drop removes the top n values.
func (d *pickleDecoder) drop(n int) {
	d.stack, d.size = d.stack[:len(d.stack)-n], d.size[:len(d.size)-n]
}

// grow adds children of size sz to the container at stack index at; ok
// false past plainValue's limits.
func (d *pickleDecoder) grow(at int, sz vsize) bool {
	c := &d.size[at]
	c.h = max(c.h, sz.h+1)
	c.n += sz.n
	return c.h <= maxPlainDepth && c.n <= d.budget
}

// settle turns a stack value into the plain value its parent holds; ok
// false for a list taken twice.
func settle(v any) (any, bool) {
	if l, isList := v.(*plist); isList {
		if l.taken {
			return nil, false
		}
		l.taken = true
		if l.items == nil {
			return []any{}, true
		}
		return l.items, true
	}
	return v, true
}

// popMark returns the values above the last mark (settled) and their
// greatest height, and drops them.
func (d *pickleDecoder) popMark() (items []any, sz vsize, ok bool) {
	if len(d.marks) == 0 {
		return nil, sz, false
	}
	m := d.marks[len(d.marks)-1]
	d.marks = d.marks[:len(d.marks)-1]
	if m > len(d.stack) {
		return nil, sz, false
	}
	items, sz, ok = d.take(len(d.stack) - m)
	return items, sz, ok
}

// take pops the top n values, settled, with their greatest depth and
// their total count.
func (d *pickleDecoder) take(n int) (items []any, sz vsize, ok bool) {
	m := len(d.stack) - n
	items = make([]any, n)
	for i, v := range d.stack[m:] {
		if items[i], ok = settle(v); !ok {
			return nil, sz, false
		}
		sz.h = max(sz.h, d.size[m+i].h)
		sz.n += d.size[m+i].n
	}
	d.drop(n)
	return items, sz, true
}

// frame is the number of stack values above the last mark (all of them
// when there is none): the values an opcode may take, as the generic
// unpickler's stack holds only those.
func (d *pickleDecoder) frame() int {
	if len(d.marks) == 0 {
		return len(d.stack)
	}
	return len(d.stack) - d.marks[len(d.marks)-1]
}

// below is the index of the stack value right below the current mark
// (the container SETITEMS and APPENDS add to), -1 when there is none.
func (d *pickleDecoder) below() int {
	if len(d.marks) == 0 {
		return -1
	}
	return d.marks[len(d.marks)-1] - 1
}

// key is the map key plainValue makes of a dict key: a string as it is, an
// integer in decimal (fmt.Sprint's); ok false for anything else.
func key(k any) (string, bool) {
	switch x := k.(type) {
	case string:
		return x, true
	case int:
		return strconv.Itoa(x), true
	}
	return "", false
}

// addTo adds items (settled) to the container at stack index at: key and
// value pairs to a dict (dict set), values to a list; ok false where the
// generic path fails (the wrong kind of container, an odd number of
// items for a dict) or the fast decoder gives up.
func (d *pickleDecoder) addTo(at int, dict bool, items []any) bool {
	switch c := d.stack[at].(type) {
	case *skippedC:
		// Not kept: only the sizes counted (grow), and what the generic
		// path refuses refused.
		return c.dict == dict && (!dict || len(items)%2 == 0)
	case *plist:
		if dict || c.taken {
			return false
		}
		for _, v := range items {
			if _, entry := v.(*frEntry); !(entry && c == d.entries) && isSkip(v) {
				return false
			}
		}
		c.items = append(c.items, items...)
		return true
	case *frEntry:
		return dict && setEntry(c, items)
	case map[string]any:
		if !dict {
			return false
		}
		if len(c) == 0 {
			// Sized at once. It may be in the memo, as a mark that
			// refuses its use: nothing else holds it.
			c = make(map[string]any, len(items)/2)
			d.stack[at] = c
		}
		return d.setItems(c, items)
	}
	return false
}

// setEntry is setItems into an entry.
func setEntry(e *frEntry, items []any) bool {
	if len(items)%2 != 0 {
		return false
	}
	for i := 0; i < len(items); i += 2 {
		k, ok := key(items[i])
		if !ok || isSkip(items[i+1]) && frEntryKey(k) {
			return false
		}
		e.set(k, items[i+1])
	}
	return true
}

func (d *pickleDecoder) setItems(m map[string]any, items []any) bool {
	if len(items)%2 != 0 {
		return false
	}
	for i := 0; i < len(items); i += 2 {
		k, ok := key(items[i])
		if !ok || isSkip(items[i+1]) {
			return false
		}
		m[k] = items[i+1]
	}
	return true
}

func (d *pickleDecoder) arg(n int) ([]byte, bool) {
	if d.pos+n > len(d.data) || n < 0 || d.pos < d.frameEnd && d.pos+n > d.frameEnd {
		return nil, false // past the data, or across a frame's end (the generic path's error)
	}
	b := d.data[d.pos : d.pos+n]
	d.pos += n
	return b, true
}

func (d *pickleDecoder) put(i int) bool {
	if d.frame() == 0 || i < 0 || i > len(d.data) {
		return false
	}
	if d.fr && i < len(d.memo) {
		d.ed.dropValues() // an overwritten slot: values kept may read it
	}
	for len(d.memo) <= i {
		d.memo = append(d.memo, nil)
	}
	switch v := d.stack[len(d.stack)-1].(type) {
	case []any:
		d.memo[i] = memoTuple{v, d.size[len(d.size)-1]}
	case *plist, map[string]any, *frEntry, *skippedC, skippedV:
		d.memo[i] = memoContainer{}
	case nil:
		d.memo[i] = pnone{}
	case string:
		if d.fr { // with its index for the entry decoder (mget)
			d.memo[i] = memoStr{v, int32(d.ed.str(v))}
			break
		}
		d.memo[i] = v
	default:
		d.memo[i] = v
	}
	if d.fr {
		d.ed.grow(len(d.memo))
		d.ed.mirror(i, d.memo[i])
	}
	return true
}

func (d *pickleDecoder) get(i int) bool {
	if i < 0 || i >= len(d.memo) {
		return false
	}
	switch v := d.memo[i].(type) {
	case nil, memoContainer:
		return false
	case pnone:
		d.push(nil, scalar)
	case memoTuple:
		d.push(v.v, v.vsize)
	case memoStr:
		d.push(v.s, scalar)
	default:
		d.push(v, scalar)
	}
	return true
}

// container pushes a new container holding children of size sz.
func (d *pickleDecoder) container(v any, sz vsize) bool {
	d.push(v, vsize{0, 1})
	return d.grow(len(d.stack)-1, sz)
}

func (d *pickleDecoder) run() (any, bool) {
	data := d.data
	for d.pos < len(data) {
		op := data[d.pos]
		d.pos++
		switch op {
		case 0x80: // PROTO
			if b, ok := d.arg(1); !ok || b[0] > 5 {
				return nil, false
			}
		case 0x95: // FRAME: framing only (its size within the data, as checkPickle wants)
			if !d.frameOp() {
				return nil, false
			}
		case '(': // MARK
			d.marks = append(d.marks, len(d.stack))
		case '.': // STOP
			if d.frame() == 0 {
				return nil, false
			}
			v, ok := settle(d.stack[len(d.stack)-1])
			return v, ok && !isSkip(v)
		case 'N':
			d.push(nil, scalar)
		case 0x88:
			d.push(true, scalar)
		case 0x89:
			d.push(false, scalar)
		case 'K', 'M', 'J', 0x8a: // BININT1, BININT2, BININT, LONG1 (up to 8 bytes: an int, as gopickle)
			n, ok := d.intOp(op)
			if !ok {
				return nil, false
			}
			d.pushNum(int(n))
		case 'G': // BINFLOAT
			b, ok := d.arg(8)
			if !ok {
				return nil, false
			}
			d.pushNum(math.Float64frombits(binary.BigEndian.Uint64(b)))
		case 'X', 0x8c, 0x8d: // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8
			str, ok := d.strOp(op)
			if !ok {
				return nil, false
			}
			d.push(str, scalar)
		case 'q', 'r', 0x94: // BINPUT, LONG_BINPUT, MEMOIZE
			i, ok := d.memoIndex(op)
			if !ok || !d.put(i) {
				return nil, false
			}
		case 'h', 'j': // BINGET, LONG_BINGET
			i, ok := d.getIndex(op)
			if !ok || !d.get(i) {
				return nil, false
			}
		case '}': // EMPTY_DICT
			if d.fr && d.inEntries() {
				d.entries = d.stack[d.marks[1]-1].(*plist)
				if !d.entry() {
					d.push(&frEntry{}, scalar)
				}
				break
			}
			if d.skipping() {
				d.push(skipDict, scalar)
				break
			}
			d.push(map[string]any{}, scalar)
		case ']': // EMPTY_LIST
			if d.skipping() {
				d.push(skipList, scalar)
				break
			}
			d.push(&plist{}, scalar)
		case ')': // EMPTY_TUPLE
			d.push([]any{}, scalar)
		case 0x85, 0x86, 0x87: // TUPLE1, TUPLE2, TUPLE3
			n := int(op-0x85) + 1
			if d.frame() < n {
				return nil, false
			}
			t, sz, ok := d.take(n)
			if !ok {
				return nil, false
			}
			var v any = t
			if d.skipping() {
				v = skipList // a tuple: never added to
			} else if hasSkip(t) {
				return nil, false
			}
			if !d.container(v, sz) {
				return nil, false
			}
		case 't', 'l', 'd': // TUPLE, LIST, DICT (from the mark)
			items, sz, ok := d.popMark()
			if !ok {
				return nil, false
			}
			switch {
			case d.skipping() && op == 'd':
				ok = len(items)%2 == 0 && d.container(skipDict, sz)
			case d.skipping():
				ok = d.container(skipList, sz)
			case hasSkip(items):
				ok = false
			case op == 't':
				ok = d.container(items, sz)
			case op == 'l':
				ok = d.container(&plist{items: items}, sz)
			default:
				m := make(map[string]any, len(items)/2)
				ok = d.setItems(m, items) && d.container(m, sz)
			}
			if !ok {
				return nil, false
			}
		case 'e', 'u': // APPENDS, SETITEMS
			// The values above the mark go into the container right
			// below it, in place (no slice of them is made).
			at := d.below()
			if at < 0 || at > len(d.stack) || len(d.marks) > 1 && d.marks[len(d.marks)-2] > at {
				return nil, false
			}
			items := d.stack[at+1:]
			var sz vsize
			for i, v := range items {
				var ok bool
				if items[i], ok = settle(v); !ok {
					return nil, false
				}
				sz.h = max(sz.h, d.size[at+1+i].h)
				sz.n += d.size[at+1+i].n
			}
			if !d.grow(at, sz) || !d.addTo(at, op == 'u', items) {
				return nil, false
			}
			clear(items)
			d.marks = d.marks[:len(d.marks)-1]
			d.drop(len(items))
		case 'a', 's': // APPEND, SETITEM
			n := 1 // APPEND: a value
			if op == 's' {
				n = 2 // SETITEM: a key and a value
			}
			at := len(d.stack) - n - 1
			if d.frame() < n+1 {
				return nil, false
			}
			vals, sz, ok := d.take(n)
			if !ok || !d.grow(at, sz) || !d.addTo(at, op == 's', vals) {
				return nil, false
			}
		case '0': // POP
			if d.frame() == 0 {
				return nil, false
			}
			d.drop(1)
		case '1': // POP_MARK
			if _, _, ok := d.popMark(); !ok {
				return nil, false
			}
		default:
			return nil, false
		}
	}
	return nil, false
}
