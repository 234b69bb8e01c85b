package ingest

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/ppprof/ppprof/internal/frdump"
	"github.com/ppprof/ppprof/sim"
)

// decodeStats decodes data with loadFRPickle's decoder and returns how
// many entries the entry decoder took, how many of them quickEntry, and
// how many values came from the value cache.
func decodeStats(data []byte) (done, quick, hits int) {
	d := newFRDecoder(data)
	d.run()
	x := d.ed
	done, quick, hits = x.done, x.quick, x.hits
	x.keep(d)
	x.release()
	return
}

// withoutValueCache runs f with the value cache (and quickEntry) off.
func withoutValueCache(f func()) {
	useValueCache = false
	defer func() { useValueCache = true }()
	f()
}

// TestValueCacheDumps: the dumps torch writes (the shared Megatron ones,
// when ../shared is there) and frdump's decode to the generic path's
// values (checkFRPickle) with the value cache, and the same entries as
// without it; on frdump's, whose entries repeat their sizes, dtypes and
// process groups, nearly every entry is quickEntry's and takes values
// from the cache: it is not a path that never runs.
func TestValueCacheDumps(t *testing.T) {
	paths, _ := filepath.Glob("../../shared/data/flight_recorder/*/_dump_*")
	dir := t.TempDir()
	if _, _, err := frdump.Write(dir, frdump.Config{Sim: sim.Config{Schedule: "1f1b", Stages: 4, TP: 2, MicroBatches: 8, Steps: 2}, Layers: 2}); err != nil {
		t.Fatal(err)
	}
	fr := filepath.Join(dir, "_dump_3")
	paths = append(paths, fr, "testdata/fr/proto2/_dump_0", "testdata/fr/proto4/_dump_0")
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		checkFRPickle(t, data)
		var off any
		withoutValueCache(func() { off, err = loadFRPickle(data) })
		if err != nil {
			t.Fatal(err)
		}
		on, err := loadFRPickle(data)
		if err != nil {
			t.Fatal(err)
		}
		if !sameEntries(t, on, off) {
			t.Fatalf("%s: the value cache changed the entries", p)
		}
		done, quick, hits := decodeStats(data)
		if p == fr && (quick < done*9/10 || hits < 3*quick) {
			t.Errorf("%s: %d entries, %d of them quick, %d values from the cache", p, done, quick, hits)
		}
	}
}

// sameEntries reports whether two decoded dumps hold the same entries.
func sameEntries(t *testing.T, a, b any) bool {
	ea, eb := asList(asMap(a)["entries"]), asList(asMap(b)["entries"])
	if len(ea) != len(eb) {
		return false
	}
	for i := range ea {
		x, okx := ea[i].(*frEntry)
		y, oky := eb[i].(*frEntry)
		if okx != oky || okx && !reflect.DeepEqual(*x, *y) || !okx && !samePlain(ea[i], eb[i]) {
			t.Logf("entry %d: %#v against %#v", i, ea[i], eb[i])
			return false
		}
	}
	return true
}

// pickleGen writes random Flight Recorder entries as torch's pickler
// does (keys and new strings memoized, later ones got from the memo),
// drawing values from a small pool so that entries repeat them, with the
// layouts the value cache must not be fooled by: tuples of memoized
// strings (whose second item looks like a key), memo slots overwritten
// between uses, values memoized, FRAMEs, keys spelled out again, dicts
// under keys read and not.
type pickleGen struct {
	rng  *rand.Rand
	b    strings.Builder
	memo int            // slots used
	slot map[string]int // string -> its slot
}

// put memoizes the value just written in the next slot.
func (g *pickleGen) put() {
	g.b.WriteByte('q')
	g.b.WriteByte(byte(g.memo))
	g.memo++
}

// str writes string s: got from the memo when it is there (mostly), else
// spelled out and memoized (mostly).
func (g *pickleGen) str(s string) {
	if i, ok := g.slot[s]; ok && g.rng.IntN(10) > 0 {
		g.b.WriteString("h" + string([]byte{byte(i)}))
		return
	}
	g.b.WriteString(u(s))
	if g.memo < 250 && g.rng.IntN(10) > 0 {
		g.slot[s] = g.memo
		g.put()
	}
}

// value writes a random value: scalars, strings, tuples of strings, lists
// of lists of ints or of strings, empty containers; hostile adds a dict,
// a memoized container, a string memoized over a slot in use and a FRAME
// inside a list.
func (g *pickleGen) value(hostile bool) {
	r := g.rng
	n := 11
	if hostile {
		n = 16
	}
	switch r.IntN(n) {
	case 0:
		g.b.WriteString("N")
	case 1:
		g.b.WriteString([]string{"\x88", "\x89"}[r.IntN(2)])
	case 2:
		g.b.WriteString([]string{"K\x07", "M\x00\x10", "J\x01\x02\x03\x04", "\x8a\x02\xff\x7f", "\x8a\x01\x80"}[r.IntN(5)])
	case 3:
		g.b.WriteString("G@\x14\x00\x00\x00\x00\x00\x00")
	case 4, 5:
		g.str([]string{"Float", "BFloat16", "nccl:send 0->1", "12", "completed", "PIPELINE"}[r.IntN(6)])
	case 6, 7: // a tuple of strings
		n := 2 + r.IntN(2)
		for range n {
			g.str([]string{"0", "5", "PIPELINE", "TP"}[r.IntN(4)])
		}
		g.b.WriteString([]string{"", "", "\x86", "\x87"}[n])
	case 8, 9: // a list of lists of ints
		g.b.WriteString("](")
		for range 1 + r.IntN(2) {
			g.b.WriteString("](" + []string{"M\x00\x10K\x01", "K\x02K\x03", "K\x01"}[r.IntN(3)] + "e")
		}
		g.b.WriteString("e")
	case 10: // a list of strings
		g.b.WriteString("](")
		for range 1 + r.IntN(2) {
			g.str([]string{"Float", "BFloat16", "Half"}[r.IntN(3)])
		}
		g.b.WriteString("e")
	case 11:
		g.b.WriteString([]string{"]", ")", "](e"}[r.IntN(3)])
	case 12: // a dict (run's under a key read)
		g.b.WriteString("}(")
		g.str("name")
		g.b.WriteString("K\x01u")
	case 13: // a container memoized
		g.b.WriteString("]")
		g.put()
		g.b.WriteString("(K\x01e")
	case 14: // a string memoized over a slot in use: later gets read it
		if g.memo > 0 {
			s := []string{"Half", "Float", "x"}[r.IntN(3)]
			i := r.IntN(g.memo)
			g.b.WriteString(u(s) + "q" + string([]byte{byte(i)}))
			for k, v := range g.slot {
				if v == i {
					delete(g.slot, k)
				}
			}
			g.slot[s] = i
			return
		}
		g.b.WriteString("N")
	default: // a FRAME in a list, whose length fits where it is written and not near the dump's end
		g.b.WriteString("](\x95" + le32(150) + "\x00\x00\x00\x00K\x05e")
	}
}

// dump returns a dump of n random entries.
func (g *pickleGen) dump(n int) []byte {
	g.b.Reset()
	g.memo, g.slot = 0, map[string]int{}
	keys := []string{"input_sizes", "input_dtypes", "process_group", "profiling_name", "state", "record_id",
		"time_created_ns", "is_p2p", "pg_id", "output_sizes", "output_dtypes", "op_id", "frames"}
	last := map[string]string{} // per key, the last value written that set no slot
	hostile := g.rng.IntN(2) == 0
	for range n {
		g.b.WriteString("}(")
		for range 2 + g.rng.IntN(8) {
			k := keys[g.rng.IntN(len(keys))]
			g.str(k)
			if v, ok := last[k]; ok && g.rng.IntN(3) > 0 {
				g.b.WriteString(v) // as an earlier entry wrote it
				continue
			}
			at, memo := g.b.Len(), g.memo
			g.value(hostile)
			if g.memo == memo && !strings.Contains(g.b.String()[at:], "q") {
				last[k] = g.b.String()[at:]
			}
		}
		g.b.WriteString("u")
	}
	return []byte(frDump(g.b.String()))
}

// TestValueCacheRandom: random dumps (pickleGen) decode to the generic
// path's values, and to the same entries with the value cache and
// without; across them quickEntry takes entries and the cache gives
// values.
func TestValueCacheRandom(t *testing.T) {
	g := &pickleGen{rng: rand.New(rand.NewPCG(7, 8))}
	var done, quick, hits int
	for i := range 1500 {
		data := g.dump(1 + g.rng.IntN(40))
		checkFRPickle(t, data)
		on, err := loadFRPickle(data)
		var off any
		var err2 error
		withoutValueCache(func() { off, err2 = loadFRPickle(data) })
		if (err == nil) != (err2 == nil) {
			t.Fatalf("dump %d %q: error %v with the cache, %v without", i, data, err, err2)
		}
		if err == nil && !sameEntries(t, on, off) {
			t.Fatalf("dump %d %q: the value cache changed the entries", i, data)
		}
		n, q, h := decodeStats(data)
		done, quick, hits = done+n, quick+q, hits+h
	}
	t.Logf("the entry decoder took %d entries, quickEntry %d of them; the cache gave %d values", done, quick, hits)
	if quick < done/10 || hits < done/2 {
		t.Errorf("quickEntry took %d of %d entries, the cache gave %d values", quick, done, hits)
	}
}

// TestRecent: recent finds what was found for the last eight distinct
// strings, the same string at other bytes too, and nothing else.
func TestRecent(t *testing.T) {
	var r recent[int]
	// get looks s up in a copy of r: what find found, and whether it
	// found it without calling of.
	get := func(s string) (int, bool) {
		c, missed := r, false
		v := c.find(s, func(string) int { missed = true; return -1 })
		return v, !missed
	}
	if _, ok := get(""); ok {
		t.Fatal("an empty recent found the empty string")
	}
	for i := range 20 {
		if v := r.find(strconv.Itoa(i), func(string) int { return i }); v != i {
			t.Fatalf("find(%d) of a new string = %d", i, v)
		}
		for j := 0; j <= i; j++ {
			v, ok := get(string([]byte(strconv.Itoa(j)))) // a copy: other bytes
			if want := j > i-8; ok != want || ok && v != j {
				t.Fatalf("after %d puts: get(%d) = %d, %v", i+1, j, v, ok)
			}
		}
	}
}

// TestValueCacheFrameEnd: a cached value whose bytes, in a later entry,
// run across the end of a FRAME (an argument split by it, which the
// generic path refuses) is not taken from the cache; one wholly after the
// frame is.
func TestValueCacheFrameEnd(t *testing.T) {
	// The first entry memoizes the keys; the second's input_sizes is
	// kept in the cache (the first's bytes held the put of its key).
	first := "}(" + u("time_created_ns") + "q\x00K\x05" + u("input_sizes") + "q\x01](](M\x00\x10K\x01eeu" +
		"}(h\x00K\x05h\x01](](M\x00\x10K\x01eeu"
	frame := func(n int) string { return "\x95" + le32(n) + "\x00\x00\x00\x00" }
	// The frame covers "K\x05h\x01](](M" and one byte of M's argument.
	split := []byte(frDump(first + "}(h\x00" + frame(10) + "K\x05h\x01](](M\x00\x10K\x01eeu"))
	checkFRPickle(t, split)
	if _, err := loadFRPickle(split); err == nil {
		t.Error("an argument across a frame's end was read")
	}
	// The frame covers "K\x05h\x01": the value after it comes from the cache.
	whole := []byte(frDump(first + "}(h\x00" + frame(4) + "K\x05h\x01](](M\x00\x10K\x01eeu"))
	checkFRPickle(t, whole)
	if _, _, hits := decodeStats(whole); hits != 1 {
		t.Errorf("%d values from the cache, want 1", hits)
	}
}

// TestStringAcrossFrameEnd: a string whose bytes run past the end of a
// FRAME is an error, as in the generic path (it was read as "").
func TestStringAcrossFrameEnd(t *testing.T) {
	// The frame covers BINUNICODE, its length and two of its four bytes,
	// which are opcodes too (a key "x", None): read as "", the entry
	// would be {state: "", x: None}.
	data := []byte(frDump("}(" + u("state") + "\x95" + le32(7) + "\x00\x00\x00\x00X\x04\x00\x00\x00\x8c\x01xNu"))
	checkFRPickle(t, data)
	if _, err := loadFRPickle(data); err == nil {
		t.Error("a string across a frame's end was read")
	}
}

// TestIntern: long strings of the same bytes are one string, in one dump
// and the next; what is kept stays under internMax.
func TestIntern(t *testing.T) {
	long := strings.Repeat("0, 1, 2, ", 200) // past internMin
	data := []byte(frDump("}(" + u("state") + "X" + le32(len(long)) + long + "u}(" + u("state") + "X" + le32(len(long)) + long + "u"))
	checkFRPickle(t, data)
	var x entryDec
	a, b := x.intern([]byte(long)), x.intern([]byte(long))
	if a != long || unsafe.StringData(a) != unsafe.StringData(b) {
		t.Error("the same bytes made two strings")
	}
	chunk := make([]byte, internMax/4+1)
	for i := range 9 {
		chunk[0] = byte(i)
		x.intern(chunk)
		if x.bigBytes > internMax {
			t.Fatalf("%d bytes interned, past %d", x.bigBytes, internMax)
		}
	}
}
