package ingest

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math/bits"
	"unicode/utf8"
)

// The fast Kineto path. decodeKinetoFast does what decodeChrome(r,
// s.visit) does, about ten times faster, with the same result for every
// input. It reads r into one buffer (1 MiB, slid forward as events are
// used; it grows only for a single value larger than itself) and walks the
// Chrome-trace layout byte by byte (the insides of strings eight bytes at
// a time, kfStop8): the top-level object or bare array, the traceEvents
// array, each event object. Within an event it keeps only the
// spans of name, cat, ph, ts, dur, pid, tid and args (and, inside args, of
// "correlation" and whether "Collective name" is there), validating every
// other value as strict JSON while skipping it, without building anything.
// The common events (kernels, launches, cpu ops, flows, unmapped
// annotations) are then handled on those spans without allocating (names
// interned, times read from the digits exactly as parseMicros does); the
// rare ones that make rows are handed to visit as a chromeEvent.
//
// Anything unusual is decided by the generic code, never guessed:
//   - an event whose strings or keys hold escapes, invalid UTF-8 or a key
//     that encoding/json would match case-insensitively, or a string field
//     holding another type, is unmarshalled by encoding/json as
//     decodeChrome would, then visited;
//   - invalid JSON, data that ends early, a read error, a non-object event
//     or an unexpected top-level shape hands the rest of the stream to the
//     generic decoder (decodeEvents and the top-level loop of
//     decodeChrome), which then produces exactly the events, warnings and
//     errors it would have. It resumes from the last checkpoint (after the
//     last event visited, or after the last top-level value; before the
//     first visit, from the first byte, which the buffer keeps until
//     then). A fresh json.Decoder is put in the state the original would
//     have been in by feeding it a synthetic prefix whose length and whose
//     count of bytes scanned inside values equal the real ones, so that the
//     byte offsets its syntax errors report are the original's too.

// kfBufSize is the read buffer's size, reached by doubling from 64 KiB; it
// grows past it only to hold a value longer (a variable for tests).
var kfBufSize = 1 << 20

const (
	kfMaxDepth = 512      // deeper nesting goes to the generic decoder
	kfPadRun   = 64 << 10 // the longest run of synthetic whitespace the generic decoder buffers at once
)

// kfStatus is what a scan step found.
type kfStatus uint8

const (
	kfOK   kfStatus = iota
	kfMore          // the buffer ends inside the value: read more and try again
	kfBad           // not JSON this path takes: the generic decoder decides
)

// kfState is where a checkpoint sits.
type kfState uint8

const (
	kfStart        kfState = iota // nothing visited yet: decode from the first byte
	kfObjComma                    // in the top-level object, after a value
	kfObjArrComma                 // in the object's traceEvents array, after an event
	kfBareArrComma                // in the bare event array, after an event
)

// kfEvent is one event as the scanner saw it: spans of the buffer, valid
// until the buffer slides.
type kfEvent struct {
	name, cat, ph           []byte // string contents (no escapes, valid UTF-8)
	ts, dur, pid, tid, args []byte // raw values; nil when absent
	complex                 bool   // encoding/json must decode the event
	argsObj                 bool   // args is an object
	argsEsc                 bool   // args has a key with an escape
	argsOdd                 bool   // args has a key that encoding/json could match to "correlation" case-insensitively, or a non-ASCII key
	argsColl                bool   // args has the key "Collective name"
	corr                    []byte // args.correlation; nil when absent
}

// kfReader is one fast decode.
type kfReader struct {
	s    *kinetoState
	r    io.Reader
	rerr error  // the error that ended reading (io.EOF at the end); nil while r has more
	buf  []byte // the data from absolute offset base
	base int64

	h         chromeHeader
	sawEvents bool
	visited   bool  // an event was visited: checkpoints move on from kfStart
	count     int64 // bytes the generic decoder would have scanned inside values so far

	// The checkpoint: where the generic decoder resumes.
	cp      int // position in buf
	cpState kfState
	cpCount int64
	cpH     chromeHeader
	cpSaw   bool

	fe      kfEvent
	ev      chromeEvent // a fast-scanned event handed to visit (spans of buf)
	uev     chromeEvent // an event encoding/json decoded (its own buffers)
	scratch []byte
	names   map[string]string
}

// decodeKinetoFast is decodeChrome(r, s.visit), fast.
func decodeKinetoFast(r io.Reader, s *kinetoState) (chromeHeader, error) {
	k := &kfReader{s: s, r: r, buf: make([]byte, 0, min(kfBufSize, 64<<10)), names: map[string]string{}}
	if k.run() {
		return k.h, nil
	}
	return k.resume()
}

// fill reads more of r into buf, first dropping the bytes before keep (and
// moving *pos, which must be >= keep, and the checkpoint with them). It
// returns false when r has nothing more.
func (k *kfReader) fill(keep int, pos *int) bool {
	if k.rerr != nil {
		return false
	}
	if keep > 0 {
		n := copy(k.buf, k.buf[keep:])
		k.buf = k.buf[:n]
		k.base += int64(keep)
		*pos -= keep
		k.cp -= keep
	}
	if len(k.buf) == cap(k.buf) || cap(k.buf) < kfBufSize {
		// Full, or still short of its size (it starts small for small
		// inputs).
		nb := make([]byte, len(k.buf), 2*cap(k.buf))
		copy(nb, k.buf)
		k.buf = nb
	}
	// Read until the buffer is full: a reader that returns little at a
	// time would otherwise make events be scanned again and again.
	start := len(k.buf)
	for len(k.buf) < cap(k.buf) {
		n, err := k.r.Read(k.buf[len(k.buf):cap(k.buf)])
		k.buf = k.buf[:len(k.buf)+n]
		if err != nil {
			k.rerr = err
			break
		}
	}
	return len(k.buf) > start
}

// checkpoint records pos as the place to resume from, once an event has
// been visited (before, resuming starts over from the first byte).
func (k *kfReader) checkpoint(pos int, st kfState) {
	if !k.visited {
		return
	}
	k.cp, k.cpState, k.cpCount, k.cpH, k.cpSaw = pos, st, k.count, k.h, k.sawEvents
}

// run decodes as far as the fast path goes. It returns true when it
// decoded everything, false when the generic decoder must take over at the
// checkpoint.
func (k *kfReader) run() bool {
	pos := 0
	// The first token.
	var c byte
	for {
		i := kfWS(k.buf, pos)
		if i < len(k.buf) {
			pos, c = i, k.buf[i]
			break
		}
		if !k.fill(0, &pos) {
			return false
		}
	}
	switch c {
	case '[':
		k.h.array = true
		pos++
		_, ok := k.events(pos, kfBareArrComma)
		return ok
	case '{':
		pos++
	default:
		return false
	}
	first := true
	for {
		mark, markCount := pos, k.count
		ok, more, done := k.member(&pos, first)
		if done {
			return true
		}
		if !ok {
			if !more {
				return false
			}
			pos, k.count = mark, markCount
			if !k.fill(min(k.cp, mark), &pos) {
				return false
			}
			continue
		}
		first = false
	}
}

// member reads one key and its value of the top-level object at *pos
// (after '{' when first, else after a value). ok: it did, and *pos is past
// the value; more: the buffer ended first; done: the object ended and
// decoding is complete.
func (k *kfReader) member(pos *int, first bool) (ok, more, done bool) {
	b := k.buf
	i := kfWS(b, *pos)
	if i >= len(b) {
		return false, true, false
	}
	if b[i] == '}' {
		// decodeChrome stops at the object's end; what follows is never read.
		return false, false, k.sawEvents
	}
	if !first {
		if b[i] != ',' {
			return false, false, false
		}
		if i = kfWS(b, i+1); i >= len(b) {
			return false, true, false
		}
	}
	if b[i] != '"' {
		return false, false, false
	}
	ks := i
	i, esc, high, st := kfString(b, i)
	if st != kfOK {
		return false, st == kfMore, false
	}
	keyRaw := b[ks:i]
	var key string
	if esc || high {
		if json.Unmarshal(keyRaw, &key) != nil {
			return false, false, false
		}
	} else {
		key = string(keyRaw[1 : len(keyRaw)-1]) // small, once per top-level key
	}
	count := int64(i - ks)
	if i = kfWS(b, i); i >= len(b) {
		return false, true, false
	}
	if b[i] != ':' {
		return false, false, false
	}
	i++
	if key == "traceEvents" {
		if i = kfWS(b, i); i >= len(b) {
			return false, true, false
		}
		if b[i] != '[' {
			return false, false, false
		}
		// From here on the events array is consumed whole or the generic
		// decoder takes over: no retry of this member.
		k.count += count
		k.sawEvents = true
		end, ok := k.events(i+1, kfObjArrComma)
		if !ok {
			return false, false, false
		}
		*pos = end
		k.checkpoint(end, kfObjComma)
		return true, false, false
	}
	vs := i
	if i = kfWS(b, i); i >= len(b) {
		return false, true, false
	}
	val := i
	i, st = kfSkip(b, i, 0)
	if st != kfOK {
		return false, st == kfMore, false
	}
	if i >= len(b) && b[val] != '{' && b[val] != '[' {
		// The generic decoder reads the byte after a string or a literal
		// before it takes it: a read error there fails the value.
		return false, true, false
	}
	raw := b[val:i]
	switch key {
	case "distributedInfo":
		k.h.kineto = true
		k.h.distributedInfo = append(json.RawMessage(nil), raw...)
	case "baseTimeNanoseconds":
		k.h.kineto = true
		k.h.baseTimeNs = append(json.RawMessage(nil), raw...)
	case "deviceProperties":
		var props []struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(raw, &props) != nil {
			return false, false, false // the generic decoder words the error
		}
		k.h.kineto = true
		if len(props) > 0 {
			k.h.deviceName = props[0].Name
		}
	default:
		if kinetoKeys[key] {
			k.h.kineto = true
		}
	}
	k.count += count + int64(i-vs)
	*pos = i
	k.checkpoint(i, kfObjComma)
	return true, false, false
}

// events reads an event array from pos, just after its '[', to its ']',
// visiting each event. st is the checkpoint state inside the array. It
// returns the position after ']', or false when the generic decoder must
// take over (from the checkpoint).
func (k *kfReader) events(pos int, st kfState) (int, bool) {
	first := true
	for {
		mark, markCount := pos, k.count
		b := k.buf
		i := kfWS(b, pos)
		more := false
		switch {
		case i >= len(b):
			more = true
		case b[i] == ']':
			return i + 1, true
		default:
			ws := i // the first event is scanned from its '{'; later ones from after the comma
			if !first {
				if b[i] != ',' {
					return 0, false
				}
				ws = i + 1
				if i = kfWS(b, ws); i >= len(b) {
					more = true
					break
				}
			}
			if b[i] != '{' {
				return 0, false
			}
			end, s := k.scanEvent(b, i)
			if s == kfMore {
				more = true
				break
			}
			if s != kfOK {
				return 0, false
			}
			if !k.handle(b[i:end]) {
				return 0, false
			}
			k.count += int64(end - ws)
			k.h.events++
			k.visited = true
			pos = end
			k.checkpoint(pos, st)
			first = false
			continue
		}
		if more {
			pos, k.count = mark, markCount
			if !k.fill(min(k.cp, mark), &pos) {
				return 0, false
			}
		}
	}
}

// handle visits one event, the bytes raw, that scanEvent left in k.fe.
// false: the generic decoder must decode it (an error).
func (k *kfReader) handle(raw []byte) bool {
	e := &k.fe
	if e.complex {
		k.uev.reset()
		if err := json.Unmarshal(raw, &k.uev); err != nil {
			return false
		}
		return k.visitSlow(&k.uev)
	}
	s := k.s
	// As visit, on the spans.
	if len(e.ph) != 1 || e.ph[0] != 'X' {
		if len(e.ph) == 1 && e.ph[0] == 'M' {
			return k.visitSpans()
		}
		return true // flows, instants, counters
	}
	ts, ok := kfMicros(e.ts)
	if !ok {
		s.badTimes++
		return true
	}
	switch string(e.cat) {
	case "cuda_runtime", "cuda_driver":
		if !bytes.Contains(e.name, []byte("Launch")) {
			return true
		}
		// visit unmarshals args into a struct with a "correlation" field.
		if len(e.args) == 0 || !e.argsObj {
			return true // absent, null or not an object: no correlation
		}
		if e.argsOdd || e.argsEsc {
			return k.visitSpans()
		}
		c, ok := kfInt(e.corr)
		if !ok {
			return true
		}
		t := k.tid(e.pid, e.tid)
		s.launches[t] = append(s.launches[t], kLaunch{ts: ts, corr: c})
		return true
	case "kernel":
		if bytes.HasPrefix(e.name, []byte("nccl")) || (e.argsObj && (e.argsColl || e.argsEsc)) {
			return k.visitSpans()
		}
		return true
	case "cpu_op":
		if string(e.name) == "record_param_comms" {
			return k.visitSpans()
		}
		if s.opt.kineto {
			return true
		}
	case "gpu_user_annotation":
		return k.visitSpans()
	case "user_annotation", "":
		if len(e.cat) == 0 && s.opt.kineto {
			return true
		}
		if bytes.HasPrefix(e.name, []byte("ProfilerStep#")) || kfIsCommName(e.name) {
			return k.visitSpans()
		}
	default:
		if s.opt.kineto {
			return true
		}
	}
	name := k.intern(e.name)
	if s.opt.mapper.lookup(name) != nil {
		return k.visitSpans()
	}
	if string(e.cat) == "user_annotation" || !s.opt.kineto {
		if len(s.unmapped) < 4096 || s.unmapped[name] > 0 {
			s.unmapped[name]++
		} else {
			s.unmapped["(other names)"]++
		}
	}
	return true
}

// visitSpans hands the scanned event to visit.
func (k *kfReader) visitSpans() bool {
	e := &k.fe
	k.ev = chromeEvent{Name: k.intern(e.name), Cat: k.intern(e.cat), Ph: k.intern(e.ph),
		Ts: e.ts, Dur: e.dur, Pid: e.pid, Tid: e.tid, Args: e.args}
	ok := k.visitSlow(&k.ev)
	k.ev = chromeEvent{}
	return ok
}

// visitSlow calls visit; visit never fails today, but an error would end
// decoding as in decodeEvents.
func (k *kfReader) visitSlow(e *chromeEvent) bool {
	if err := k.s.visit(e); err != nil {
		// Not expected: visit returns nil. Let the generic decoder redo the
		// event and report it.
		return false
	}
	return true
}

// intern returns b as a string, allocating each distinct name once (up to
// a bound, past which names are allocated each time).
func (k *kfReader) intern(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if v, ok := k.names[string(b)]; ok {
		return v
	}
	v := string(b)
	if len(k.names) < 1<<16 {
		k.names[v] = v
	}
	return v
}

// tid is kinetoState.tid on raw spans, without allocating for a known
// thread.
func (k *kfReader) tid(pid, tid []byte) int32 {
	a, ok1 := kfRawKey(pid)
	b, ok2 := kfRawKey(tid)
	if ok1 && ok2 {
		k.scratch = append(append(append(k.scratch[:0], a...), '/'), b...)
		if v, ok := k.s.tids[string(k.scratch)]; ok {
			return v
		}
	}
	return k.s.tid(pid, tid)
}

// kfRawKey is rawKey on a value the scanner validated, when it needs no
// decoding: a number, or a string without escapes or non-ASCII bytes.
func kfRawKey(raw []byte) ([]byte, bool) {
	if len(raw) >= 2 && raw[0] == '"' {
		in := raw[1 : len(raw)-1]
		for _, c := range in {
			if c == '\\' || c >= 0x80 {
				return nil, false
			}
		}
		return in, true
	}
	return raw, true
}

// kfIsCommName is isCommName on bytes.
func kfIsCommName(n []byte) bool {
	return bytes.HasPrefix(n, []byte("nccl:")) || bytes.HasPrefix(n, []byte("gloo:")) || bytes.HasPrefix(n, []byte("mpi:")) || bytes.HasPrefix(n, []byte("ucc:"))
}

// kfMicros is parseMicros, without allocating for the plain decimals
// Kineto writes (digits, optionally a point and more digits).
func kfMicros(raw []byte) (int64, bool) {
	var w int64
	i := 0
	for i < len(raw) && raw[i] >= '0' && raw[i] <= '9' {
		w = w*10 + int64(raw[i]-'0')
		i++
	}
	if i == 0 || i > 15 {
		return parseMicros(raw)
	}
	if i == len(raw) {
		return w * 1000, true
	}
	if raw[i] != '.' || i+1 == len(raw) {
		return parseMicros(raw)
	}
	var f int64
	j := 0
	for i++; i < len(raw); i, j = i+1, j+1 {
		c := raw[i]
		if c < '0' || c > '9' {
			return parseMicros(raw)
		}
		switch {
		case j < 3:
			f = f*10 + int64(c-'0')
		case j == 3 && c >= '5':
			f++ // round half up on the fourth decimal, as parseMicros
		}
	}
	for ; j < 3; j++ {
		f *= 10
	}
	return w*1000 + f, true
}

// kfInt is rawInt, without allocating for plain integers.
func kfInt(raw []byte) (int64, bool) {
	if len(raw) == 0 || len(raw) > 18 {
		return rawInt(raw)
	}
	var v int64
	for _, c := range raw {
		if c < '0' || c > '9' {
			return rawInt(raw)
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}

// The scanner. Positions are indexes into b; a scan that reaches the end
// of b before its value ends says kfMore.

// kfSpace marks JSON whitespace.
var kfSpace = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

// kfStrStop marks the bytes a string scan must look at: the quote, the
// backslash, control characters and non-ASCII bytes.
var kfStrStop = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = c == '"' || c == '\\' || c < 0x20 || c >= 0x80
	}
	return t
}()

// SWAR constants: a 1 and a high bit in every byte of a word.
const (
	kfOnes = 0x0101010101010101
	kfHigh = 0x8080808080808080
)

// kfStop8 marks (with its high bit) each byte of the little-endian word x
// that kfStrStop holds, and possibly bytes above the lowest marked one:
// the lowest mark is exact, the word is 0 when no byte is to stop at.
// A byte below 0x20: x - 0x20 borrows into its high bit where that bit
// was clear; '"' and '\\': the same test on x XOR the byte, for 0; the
// high bit set: non-ASCII.
func kfStop8(x uint64) uint64 {
	q, bs := x^(kfOnes*'"'), x^(kfOnes*'\\')
	return ((x-kfOnes*0x20)&^x | (q-kfOnes)&^q | (bs-kfOnes)&^bs | x) & kfHigh
}

// kfWS returns the position of the first non-whitespace byte at or after
// i, or len(b).
func kfWS(b []byte, i int) int {
	for i < len(b) && kfSpace[b[i]] {
		i++
	}
	return i
}

// kfString scans the string whose opening quote is at b[i]. It returns the
// position after the closing quote, whether the string holds escapes and
// whether it holds non-ASCII bytes.
func kfString(b []byte, i int) (end int, esc, high bool, st kfStatus) {
	j := i + 1
	for {
		// Eight bytes at a time while they hold no byte to stop at
		// (kfStrStop): a quote, a backslash, a control character or a
		// non-ASCII byte. The lowest byte kfStop8 marks is the first
		// such byte exactly (the marks above it may be false).
		for j+8 <= len(b) {
			if m := kfStop8(binary.LittleEndian.Uint64(b[j:])); m != 0 {
				j += bits.TrailingZeros64(m) >> 3
				break
			}
			j += 8
		}
		for j < len(b) && !kfStrStop[b[j]] {
			j++
		}
		if j >= len(b) {
			return 0, false, false, kfMore
		}
		switch c := b[j]; {
		case c == '"':
			return j + 1, esc, high, kfOK
		case c == '\\':
			esc = true
			if j+1 >= len(b) {
				return 0, false, false, kfMore
			}
			switch b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if j+6 > len(b) {
					return 0, false, false, kfMore
				}
				for _, h := range b[j+2 : j+6] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return 0, false, false, kfBad
					}
				}
				j += 6
			default:
				return 0, false, false, kfBad
			}
		case c < 0x20:
			return 0, false, false, kfBad
		default:
			high = true
			j++
		}
	}
}

// kfNumber scans the number that starts at b[i], by JSON's grammar.
func kfNumber(b []byte, i int) (int, kfStatus) {
	if b[i] == '-' {
		i++
		if i >= len(b) {
			return 0, kfMore
		}
	}
	switch c := b[i]; {
	case c == '0':
		i++
	case '1' <= c && c <= '9':
		for i++; i < len(b) && '0' <= b[i] && b[i] <= '9'; i++ {
		}
	default:
		return 0, kfBad
	}
	if i >= len(b) {
		return 0, kfMore
	}
	if b[i] == '.' {
		i++
		if i >= len(b) {
			return 0, kfMore
		}
		if b[i] < '0' || b[i] > '9' {
			return 0, kfBad
		}
		for i++; i < len(b) && '0' <= b[i] && b[i] <= '9'; i++ {
		}
		if i >= len(b) {
			return 0, kfMore
		}
	}
	if b[i] == 'e' || b[i] == 'E' {
		i++
		if i >= len(b) {
			return 0, kfMore
		}
		if b[i] == '+' || b[i] == '-' {
			i++
			if i >= len(b) {
				return 0, kfMore
			}
		}
		if b[i] < '0' || b[i] > '9' {
			return 0, kfBad
		}
		for i++; i < len(b) && '0' <= b[i] && b[i] <= '9'; i++ {
		}
		if i >= len(b) {
			return 0, kfMore
		}
	}
	return i, kfOK
}

// kfLiteral scans true, false or null at b[i].
func kfLiteral(b []byte, i int, lit string) (int, kfStatus) {
	for j := 0; j < len(lit); j++ {
		if i+j >= len(b) {
			return 0, kfMore
		}
		if b[i+j] != lit[j] {
			return 0, kfBad
		}
	}
	return i + len(lit), kfOK
}

// kfSkip scans any JSON value at b[i] (not whitespace), depth containers
// deep.
func kfSkip(b []byte, i int, depth int) (int, kfStatus) {
	switch c := b[i]; c {
	case '"':
		end, _, _, st := kfString(b, i)
		return end, st
	case '{', '[':
		if depth >= kfMaxDepth {
			return 0, kfBad
		}
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		if i = kfWS(b, i+1); i >= len(b) {
			return 0, kfMore
		}
		if b[i] == closer {
			return i + 1, kfOK
		}
		for {
			var st kfStatus
			if c == '{' {
				if b[i] != '"' {
					return 0, kfBad
				}
				if i, _, _, st = kfString(b, i); st != kfOK {
					return 0, st
				}
				if i = kfWS(b, i); i >= len(b) {
					return 0, kfMore
				}
				if b[i] != ':' {
					return 0, kfBad
				}
				if i = kfWS(b, i+1); i >= len(b) {
					return 0, kfMore
				}
			}
			if i, st = kfSkip(b, i, depth+1); st != kfOK {
				return 0, st
			}
			if i = kfWS(b, i); i >= len(b) {
				return 0, kfMore
			}
			switch b[i] {
			case ',':
				if i = kfWS(b, i+1); i >= len(b) {
					return 0, kfMore
				}
			case closer:
				return i + 1, kfOK
			default:
				return 0, kfBad
			}
		}
	case 't':
		return kfLiteral(b, i, "true")
	case 'f':
		return kfLiteral(b, i, "false")
	case 'n':
		return kfLiteral(b, i, "null")
	default:
		if c == '-' || '0' <= c && c <= '9' {
			return kfNumber(b, i)
		}
		return 0, kfBad
	}
}

// The chromeEvent fields, as scanEvent tells keys apart.
const (
	kfOther = iota
	kfName
	kfCat
	kfPh
	kfTs
	kfDur
	kfPid
	kfTid
	kfArgs
	kfFold // a key encoding/json would match to a field case-insensitively
)

// kfField names the chromeEvent field of a key without escapes or
// non-ASCII bytes.
func kfField(key []byte) int {
	switch string(key) {
	case "name":
		return kfName
	case "cat":
		return kfCat
	case "ph":
		return kfPh
	case "ts":
		return kfTs
	case "dur":
		return kfDur
	case "pid":
		return kfPid
	case "tid":
		return kfTid
	case "args":
		return kfArgs
	}
	if len(key) >= 2 && len(key) <= 4 {
		for _, f := range [...]string{"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"} {
			if kfEqualFold(key, f) {
				return kfFold
			}
		}
	}
	return kfOther
}

// kfEqualFold reports whether ASCII key equals lower-case name but for
// case.
func kfEqualFold(key []byte, name string) bool {
	if len(key) != len(name) {
		return false
	}
	for i := range key {
		c := key[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != name[i] {
			return false
		}
	}
	return true
}

// scanEvent scans the event object at b[i] into k.fe, as
// json.Decoder.Decode into a chromeEvent would read it, and returns the
// position after it.
func (k *kfReader) scanEvent(b []byte, i int) (int, kfStatus) {
	e := &k.fe
	*e = kfEvent{}
	if i = kfWS(b, i+1); i >= len(b) {
		return 0, kfMore
	}
	if b[i] == '}' {
		return i + 1, kfOK
	}
	for {
		if b[i] != '"' {
			return 0, kfBad
		}
		ks := i
		var esc, high bool
		var st kfStatus
		i, esc, high, st = kfString(b, i)
		if st != kfOK {
			return 0, st
		}
		f := kfFold
		if !esc && !high {
			f = kfField(b[ks+1 : i-1])
		}
		if i = kfWS(b, i); i >= len(b) {
			return 0, kfMore
		}
		if b[i] != ':' {
			return 0, kfBad
		}
		if i = kfWS(b, i+1); i >= len(b) {
			return 0, kfMore
		}
		vs := i
		switch f {
		case kfName, kfCat, kfPh:
			switch b[i] {
			case '"':
				i, esc, high, st = kfString(b, i)
				if st != kfOK {
					return 0, st
				}
				v := b[vs+1 : i-1]
				if esc || high && !utf8.Valid(v) {
					e.complex = true
				}
				switch f {
				case kfName:
					e.name = v
				case kfCat:
					e.cat = v
				default:
					e.ph = v
				}
			case 'n':
				// null leaves a string field as it was.
				if i, st = kfLiteral(b, i, "null"); st != kfOK {
					return 0, st
				}
			default:
				e.complex = true // a type error, worded by encoding/json
				if i, st = kfSkip(b, i, 1); st != kfOK {
					return 0, st
				}
			}
		case kfArgs:
			if b[i] == '{' {
				i, st = k.scanArgs(b, i)
			} else {
				e.argsObj, e.argsEsc, e.argsOdd, e.argsColl, e.corr = false, false, false, false, nil
				i, st = kfSkip(b, i, 1)
			}
			if st != kfOK {
				return 0, st
			}
			e.args = b[vs:i]
		default:
			if i, st = kfSkip(b, i, 1); st != kfOK {
				return 0, st
			}
			switch f {
			case kfTs:
				e.ts = b[vs:i]
			case kfDur:
				e.dur = b[vs:i]
			case kfPid:
				e.pid = b[vs:i]
			case kfTid:
				e.tid = b[vs:i]
			case kfFold:
				e.complex = true
			}
		}
		if i = kfWS(b, i); i >= len(b) {
			return 0, kfMore
		}
		switch b[i] {
		case ',':
			if i = kfWS(b, i+1); i >= len(b) {
				return 0, kfMore
			}
		case '}':
			return i + 1, kfOK
		default:
			return 0, kfBad
		}
	}
}

// scanArgs scans the args object at b[i], noting the keys handle needs.
func (k *kfReader) scanArgs(b []byte, i int) (int, kfStatus) {
	e := &k.fe
	e.argsObj, e.argsEsc, e.argsOdd, e.argsColl, e.corr = true, false, false, false, nil
	if i = kfWS(b, i+1); i >= len(b) {
		return 0, kfMore
	}
	if b[i] == '}' {
		return i + 1, kfOK
	}
	for {
		if b[i] != '"' {
			return 0, kfBad
		}
		ks := i
		var esc, high bool
		var st kfStatus
		i, esc, high, st = kfString(b, i)
		if st != kfOK {
			return 0, st
		}
		key := b[ks+1 : i-1]
		isCorr := false
		switch {
		case esc:
			e.argsEsc = true
		case high:
			e.argsOdd = true
		case string(key) == "correlation":
			isCorr = true
		case string(key) == "Collective name":
			e.argsColl = true
		case kfEqualFold(key, "correlation"):
			e.argsOdd = true
		}
		if i = kfWS(b, i); i >= len(b) {
			return 0, kfMore
		}
		if b[i] != ':' {
			return 0, kfBad
		}
		if i = kfWS(b, i+1); i >= len(b) {
			return 0, kfMore
		}
		vs := i
		if i, st = kfSkip(b, i, 2); st != kfOK {
			return 0, st
		}
		if isCorr {
			e.corr = b[vs:i]
		}
		if i = kfWS(b, i); i >= len(b) {
			return 0, kfMore
		}
		switch b[i] {
		case ',':
			if i = kfWS(b, i+1); i >= len(b) {
				return 0, kfMore
			}
		case '}':
			return i + 1, kfOK
		default:
			return 0, kfBad
		}
	}
}

// Handing over to the generic decoder.

// kfErrReader returns err forever.
type kfErrReader struct{ err error }

func (r kfErrReader) Read([]byte) (int, error) { return 0, r.err }

// resume has the generic decoder finish from the checkpoint.
func (k *kfReader) resume() (chromeHeader, error) {
	var tail io.Reader = k.r
	switch {
	case k.rerr == io.EOF:
		tail = kfErrReader{io.EOF}
	case k.rerr != nil:
		tail = kfErrReader{k.rerr}
	}
	rest := k.buf[k.cp:]
	if k.cpState == kfStart {
		return decodeChrome(io.MultiReader(bytes.NewReader(rest), tail), k.s.visit)
	}
	n, b := k.base+int64(k.cp), k.cpCount
	if k.rerr == io.EOF {
		// Everything left is in the buffer: a dry run with the shortest
		// prefix tells whether the decoder will fail (a syntax error's
		// offset needs the prefix of the real length) or, as for a
		// truncated trace, not.
		h := kfCloneHeader(k.cpH)
		_, err := kfResumeWith(k.cpState, kfPlan(k.cpState, 0, 0), io.MultiReader(bytes.NewReader(rest), tail), &h, k.cpSaw,
			func(*chromeEvent) error { return nil })
		if err == nil {
			h := k.cpH
			return kfResumeWith(k.cpState, kfPlan(k.cpState, 0, 0), io.MultiReader(bytes.NewReader(rest), tail), &h, k.cpSaw, k.s.visit)
		}
	}
	h := k.cpH
	return kfResumeWith(k.cpState, kfPlan(k.cpState, b, n-b), io.MultiReader(bytes.NewReader(rest), tail), &h, k.cpSaw, k.s.visit)
}

// kfCloneHeader copies h with its own raw values (the decoder writes into
// a RawMessage's array).
func kfCloneHeader(h chromeHeader) chromeHeader {
	h.distributedInfo = append(json.RawMessage(nil), h.distributedInfo...)
	h.baseTimeNs = append(json.RawMessage(nil), h.baseTimeNs...)
	return h
}

// kfResumeWith feeds a json.Decoder the synthetic prefix ops (consuming
// it) and then rest, and goes on as decodeChrome would from state.
func kfResumeWith(state kfState, ops []kfOp, rest io.Reader, h *chromeHeader, sawEvents bool, visit func(*chromeEvent) error) (chromeHeader, error) {
	dec := json.NewDecoder(io.MultiReader(&kfSynth{ops: ops}, rest))
	var dummy struct{}
	for _, op := range ops {
		var err error
		if op.tok {
			_, err = dec.Token()
		} else {
			err = dec.Decode(&dummy)
		}
		if err != nil {
			return *h, fmt.Errorf("internal error resuming the Chrome-trace decoder: %v", err)
		}
	}
	switch state {
	case kfBareArrComma:
		err := decodeEvents(dec, h, visit)
		return *h, err
	case kfObjArrComma:
		if err := decodeEvents(dec, h, visit); err != nil || h.truncated {
			return *h, err
		}
		sawEvents = true
	}
	err := objectLoop(dec, h, sawEvents, visit)
	return *h, err
}

// The synthetic prefix. The generic decoder's syntax errors give an offset
// that is either the input offset (json.Decoder.InputOffset) or the count
// of bytes it scanned inside values (keys, values after a colon or comma,
// events; not the whitespace it peeks past before a token, nor the tokens
// '{', '[', ']', ',' and ':' it consumes as such). The prefix is built of
// whitespace, empty arrays consumed as tokens and empty objects decoded as
// values so that both equal the original's at the checkpoint (n bytes of
// input, b of them scanned inside values), while no run of whitespace the
// decoder must buffer is longer than kfPadRun where the counts allow.

// kfOp is a piece of the prefix and how the decoder consumes it: ws1
// spaces, t1, ws2 spaces, t2, by one Token call (tok) or one Decode into
// an empty struct.
type kfOp struct {
	ws1, ws2 int64
	t1, t2   string
	tok      bool
}

// kfSpread is the i-th of n near-equal shares of total.
func kfSpread(total, n, i int64) int64 {
	if n <= 0 {
		return 0
	}
	v := total / n
	if i < total%n {
		v++
	}
	return v
}

// kfPlan returns the prefix for a checkpoint in state with b bytes scanned
// inside values and u bytes outside (0, 0: the shortest prefix, for a run
// whose offsets do not matter).
func kfPlan(state kfState, b, u int64) []kfOp {
	switch state {
	case kfBareArrComma:
		if b < 2 || u < 1 {
			b, u = 2, 1
		}
		return kfPlanArray(nil, b, u, "[", 1)
	case kfObjArrComma:
		// '{' and the key "" (2 scanned bytes), then ":[" opens the array.
		if b < 4 || u < 3 {
			b, u = 4, 3
		}
		ops := []kfOp{{t1: "{", tok: true}, {t1: `""`, tok: true}}
		return kfPlanArray(ops, b-2, u-1, ":[", 2)
	default: // kfObjComma
		if b < 4 || u < 2 {
			b, u = 4, 2
		}
		return kfPlanObject(b, u)
	}
}

// kfPlanArray appends an array opened by the token open (openU bytes,
// outside values) whose elements are k empty objects decoded as values
// (2 scanned bytes each, plus the whitespace before them, which the
// decoder scans too) and p empty arrays consumed as tokens, b bytes
// scanned in all and u not.
func kfPlanArray(ops []kfOp, b, u int64, open string, openU int64) []kfOp {
	w := int64(kfPadRun)
	k := max(1, min((b+w+1)/(w+2), b/2, u-openU+1))
	c := b - 2*k // whitespace inside the decoded values
	r := u - openU - (k - 1)
	slots := k // before the opening token and before each comma
	var p int64
	if r > slots*w {
		p = (r - slots*w + 3*w + 2) / (3*w + 3)
		r -= 3 * p
		slots += 3 * p
	}
	si := int64(0)
	next := func() int64 { v := kfSpread(r, slots, si); si++; return v }
	ops = append(ops, kfOp{ws1: next(), t1: open, tok: true})
	ops = append(ops, kfOp{ws1: kfSpread(c, k, 0), t1: "{}"})
	for i := int64(1); i < k; i++ {
		ops = append(ops, kfOp{ws1: next(), t1: ",", ws2: kfSpread(c, k, i), t2: "{}"})
	}
	for i := int64(0); i < p; i++ {
		ops = append(ops, kfOp{ws1: next(), t1: ",", ws2: next(), t2: "[", tok: true}, kfOp{ws1: next(), t1: "]", tok: true})
	}
	return ops
}

// kfPlanObject is an object of k members "": {} (the key and the value,
// with the whitespace before it, scanned: 4 bytes and more), b bytes
// scanned in all and u not ('{', the colons and commas, the whitespace
// before tokens).
func kfPlanObject(b, u int64) []kfOp {
	w := int64(kfPadRun)
	k := max(1, min((b+w+3)/(w+4), b/4, u/2))
	c := b - 4*k
	r := u - 2*k
	slots := 3 * k
	si := int64(0)
	next := func() int64 { v := kfSpread(r, slots, si); si++; return v }
	ops := []kfOp{{ws1: next(), t1: "{", tok: true}}
	for i := int64(0); i < k; i++ {
		if i == 0 {
			ops = append(ops, kfOp{ws1: next(), t1: `""`, tok: true})
		} else {
			ops = append(ops, kfOp{ws1: next(), t1: ",", ws2: next(), t2: `""`, tok: true})
		}
		ops = append(ops, kfOp{ws1: next(), t1: ":", ws2: kfSpread(c, k, i), t2: "{}"})
	}
	return ops
}

// kfSynth reads the bytes of a prefix.
type kfSynth struct {
	ops  []kfOp
	i    int   // the op
	part int   // 0: ws1, 1: t1, 2: ws2, 3: t2
	off  int64 // into the part
}

func (s *kfSynth) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && s.i < len(s.ops) {
		op := &s.ops[s.i]
		var ws int64
		var t string
		switch s.part {
		case 0:
			ws = op.ws1
		case 1:
			t = op.t1
		case 2:
			ws = op.ws2
		default:
			t = op.t2
		}
		left := ws - s.off
		if s.part == 1 || s.part == 3 {
			left = int64(len(t)) - s.off
		}
		if left <= 0 {
			s.part, s.off = s.part+1, 0
			if s.part == 4 {
				s.i, s.part = s.i+1, 0
			}
			continue
		}
		m := int(min(left, int64(len(p)-n)))
		if t != "" {
			copy(p[n:n+m], t[s.off:])
		} else {
			for j := n; j < n+m; j++ {
				p[j] = ' '
			}
		}
		n += m
		s.off += int64(m)
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}
