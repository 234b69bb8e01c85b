package ingest

import (
	"errors"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/ppprof/ppprof/internal/frdump"
	"github.com/ppprof/ppprof/sim"
	"github.com/ppprof/ppprof/trace/arrowv1"
)

// entriesDecoded runs loadFRPickle's decoder on data and returns how many
// entries the entry decoder took (the others were run's), and whether
// the fast path decoded data at all.
func entriesDecoded(data []byte) (done int, ok bool) {
	d := newFRDecoder(data)
	_, ok = d.run()
	return d.ed.done, ok
}

// TestEntryDecoderTakesDumps: every entry of torch's dumps (the shared
// Megatron ones, when ../shared is there), of Python's (the fixtures,
// protocols 2 and 4: FRAME and MEMOIZE inside entries) and of frdump's
// goes through the entry decoder, not the general one: it is not a path
// that never runs.
func TestEntryDecoderTakesDumps(t *testing.T) {
	paths, _ := filepath.Glob("../../shared/data/flight_recorder/*/_dump_*")
	paths = append(paths, "testdata/fr/proto2/_dump_0", "testdata/fr/proto4/_dump_0")
	dir := t.TempDir()
	if _, _, err := frdump.Write(dir, frdump.Config{Sim: sim.Config{Schedule: "1f1b", Stages: 4, TP: 2, MicroBatches: 8, Steps: 2}, Layers: 2}); err != nil {
		t.Fatal(err)
	}
	paths = append(paths, filepath.Join(dir, "_dump_3"))
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		v, err := loadFRPickle(b)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		n := len(asList(asMap(v)["entries"]))
		done, ok := entriesDecoded(b)
		if !ok || done != n {
			t.Errorf("%s: the entry decoder took %d of %d entries (fast path %v)", p, done, n, ok)
		}
		checkFRPickle(t, b)
	}
}

// frDump is a dump whose entries list holds the opcodes body (after the
// list's MARK).
func frDump(body string) string {
	return "\x80\x02}(X\x07\x00\x00\x00entries](" + body + "eu."
}

// u is SHORT_BINUNICODE of s.
func u(s string) string { return "\x8c" + string(rune(len(s))) + s }

// TestEntryDecoderCases: entries built to take each branch of the entry
// decoder, or to make it give the entry back to run, each checked
// against the generic path (checkFRPickle), with how many entries the
// entry decoder must take.
func TestEntryDecoderCases(t *testing.T) {
	torch := "}(" + u("record_id") + "q\x01J\xa87\x01\x00" + u("pg_id") + "K\x06" +
		u("process_group") + u("5") + "q\x02" + u("PIPELINE") + "q\x03\x86" +
		u("profiling_name") + u("nccl:send 0->1") + u("time_created_ns") + "\x8a\x08\x01\x02\x03\x04\x05\x06\x07\x08" +
		u("input_sizes") + "](](M\x00\x10K\x01M\x00\x14ee" + u("input_dtypes") + "](" + u("BFloat16") + "e" +
		u("output_sizes") + "](](K\x01K\x02ee" + u("state") + u("started") + u("time_discovered_started_ns") + "J\x10\x00\x00\x00" +
		u("time_discovered_completed_ns") + "N" + u("retired") + "\x89" + u("is_p2p") + "\x88" + u("p2p_seq_id") + "K\x03" +
		u("collective_seq_id") + "K\x00u"
	cases := []struct {
		name string
		body string
		done int
	}{
		{"torch layout", torch, 1},
		{"twice, keys and values by memo", torch + "}(h\x01K\x07" + u("process_group") + "h\x02h\x03\x86" + u("time_created_ns") + "K\x09u", 2},
		{"dict memoized before its mark", "}q\x09(" + u("time_created_ns") + "K\x05u", 1},
		{"MEMOIZE and FRAME inside", "}(" + u("state") + "\x94\x95\x01\x00\x00\x00\x00\x00\x00\x00" + u("completed") + "\x94" + u("time_created_ns") + "K\x05u", 1},
		{"frames: dicts under a key not read", "}(" + u("frames") + "](}(" + u("name") + u("f") + "u}(" + u("line") + "K\x07ue" + u("time_created_ns") + "K\x05u", 1},
		{"DICT from a mark, SETITEM, APPEND, tuples not read", "}(" + u("out") + "]((K\x01K\x02d}K\x03K\x04s)K\x01\x86eK\x05a" + u("time_created_ns") + "K\x05u", 1},
		{"a dict from a mark at the entry's level: run's", "}(" + u("out") + "((K\x01K\x02d" + u("time_created_ns") + "K\x05u", 0},
		{"LIST and TUPLE from marks", "}(" + u("input_sizes") + "((K\x01K\x02l(K\x03tl" + u("input_dtypes") + "(" + u("a") + u("b") + "t" + u("time_created_ns") + "K\x05u", 1},
		{"APPEND to a list read", "}(" + u("input_dtypes") + "]" + u("Float") + "a" + u("time_created_ns") + "K\x05u", 1},
		{"numbers as strings and floats", "}(" + u("record_id") + u("42") + u("time_created_ns") + "G@\x14\x00\x00\x00\x00\x00\x00" + u("pg_id") + "M\x2c\x01" + u("profiling_name") + "K\x07u", 1},
		{"a NaN under a key not read", "}(" + u("x") + "G\x7f\xf8\x00\x00\x00\x00\x00\x01" + u("time_created_ns") + "K\x05u", 1},
		{"two SETITEMS: the second is run's", "}(" + u("time_created_ns") + "K\x05u(" + u("state") + u("completed") + "u", 1},
		{"a memoized tuple used again", "}(" + u("out") + ")q\x0a" + u("process_group") + "h\x0a" + u("profiling_name") + "(K\x01]q\x0bN\x88G@\x00\x00\x00\x00\x00\x00\x00t\x85q\x0c" + u("input_sizes") + "h\x0c" + u("time_created_ns") + "K\x05u", 1},
		{"a memoized tuple holding a dict: run's", "}(" + u("out") + "(}t\x85q\x0d" + u("input_sizes") + "h\x0d" + u("time_created_ns") + "K\x05u", 0},
		{"a skipped number memoized, used again", "}(" + u("out") + "J\x00\x00\x01\x00q\x07" + u("record_id") + "h\x07u", 0},
		{"a dict under a key read: run's", "}(" + u("process_group") + "}(" + u("a") + "K\x01u" + u("time_created_ns") + "K\x05u", 0},
		{"an integer key: run's", "}(K\x01K\x02" + u("time_created_ns") + "K\x05u", 0},
		{"odd SETITEMS", "}(" + u("time_created_ns") + "u", 0},
		{"POP: run's", "}(" + u("x") + "K\x01K\x020" + u("time_created_ns") + "K\x05u", 0},
		{"APPENDS to the entry", "}(K\x01e", 0},
		{"marks past the entry decoder's bound", "}(" + u("x") + "]((((((((((((((((((K\x01eeeeeeeeeeeeeeeeee" + u("time_created_ns") + "K\x05u", 0},
		{"a list read with a skipped item", "}(" + u("input_sizes") + u("a") + u("op_id") + "M\x00\x10\x87" + u("time_created_ns") + "K\x05u", 0},
		{"lists 70 deep by APPEND: past the generic path's depth", "}(" + u("x") + strings.Repeat("]", 70) + "K\x01" + strings.Repeat("a", 70) + u("time_created_ns") + "K\x05u", 0},
		{"TUPLE2 across a mark", "}((K\x01\x86", 0},
		{"a string past the end", "}(" + u("time_created_ns") + "X\xff\x00\x00\x00", 0},
	}
	for _, c := range cases {
		data := []byte(frDump(c.body))
		checkFRPickle(t, data)
		if done, _ := entriesDecoded(data); done != c.done {
			t.Errorf("%s: the entry decoder took %d entries, want %d", c.name, done, c.done)
		}
	}
	// An entry the entry decoder gives back puts back the memo as it was:
	// run's MEMOIZE then takes the same slot, which a later entry uses
	// (the dump decodes fast, with that entry).
	data := []byte(frDump("}(" + u("state") + "\x94" + u("x") + "K\x01K\x02K\x030" + u("time_created_ns") + "K\x05u" + "}(" + u("profiling_name") + "h\x00" + u("time_created_ns") + "K\x05u"))
	if done, ok := entriesDecoded(data); !ok || done != 1 {
		t.Errorf("memo put back: entry decoder took %d entries, fast path %v", done, ok)
	}
	checkFRPickle(t, data)
	// ... and the slots it set back to what they held: an entry given
	// back reads slot 5 before it sets it again.
	data = []byte(frDump("}(" + u("state") + u("completed") + "q\x05" + u("time_created_ns") + "K\x05u" +
		"}(" + u("profiling_name") + "h\x05" + u("x") + "q\x05" + "K\x01K\x020" + u("time_created_ns") + "K\x05u"))
	if done, ok := entriesDecoded(data); !ok || done != 1 {
		t.Errorf("memo put back: entry decoder took %d entries, fast path %v", done, ok)
	}
	checkFRPickle(t, data)

	// The first case, read: the fields as torch's dump says.
	v, err := loadFRPickle([]byte(frDump(torch)))
	if err != nil {
		t.Fatal(err)
	}
	e := asList(asMap(v)["entries"])[0].(*frEntry)
	want := frEntry{name: "nccl:send 0->1", state: "started", pgN: 2, pg0: "5", pg1: "PIPELINE", pgID: "6", isP2P: true,
		created: frInt{0x0807060504030201, true}, started: frInt{16, true}, cseq: frInt{0, true}, pseq: frInt{3, true}, record: frInt{79784, true},
		nsizes: 1, dims0: []int64{4096, 1, 5120}, nelems: []int64{4096 * 5120}, dtypes: []string{"BFloat16"}}
	if !reflect.DeepEqual(*e, want) {
		t.Errorf("entry %+v, want %+v", *e, want)
	}
}

// TestEntrySetMatchesSet: setMini sets every field as set does from the
// plain value of the same value, for random values (scalars of every
// kind, lists and tuples of them, nested).
func TestEntrySetMatchesSet(t *testing.T) {
	keys := []string{"profiling_name", "process_group", "pg_id", "is_p2p", "time_created_ns", "state", "time_discovered_started_ns",
		"time_discovered_completed_ns", "input_sizes", "input_dtypes", "collective_seq_id", "p2p_seq_id", "record_id"}
	strs := []string{"", "nccl:send 0->1", "12", " 7", "-3", "1e3", "x", "Float", "9223372036854775807"}
	rng := rand.New(rand.NewPCG(1, 2))
	d := newFRDecoder(nil)
	var gen func(depth int) mval
	gen = func(depth int) mval {
		v := mval{sz: scalar}
		k := rng.IntN(7)
		if depth >= 3 {
			k = rng.IntN(5)
		}
		switch k {
		case 0:
			v.kind = mNone
		case 1:
			v.kind, v.b = mBool, rng.IntN(2) == 0
		case 2:
			v.kind, v.i = mInt, []int64{0, 1, -1, 4096, 1 << 40, math.MaxInt64, math.MinInt64}[rng.IntN(7)]
		case 3:
			v.kind, v.i = mFloat, int64(math.Float64bits([]float64{0, 2.5, -7, 1e19, math.NaN(), 3}[rng.IntN(6)]))
		case 4:
			v.kind, v.i = mStr, d.ed.str(strs[rng.IntN(len(strs))])
		default:
			v.kind = mList
			if k == 6 {
				v.kind = mTuple
			}
			items := make([]mval, rng.IntN(4))
			for j := range items {
				items[j] = gen(depth + 1)
			}
			v.a, v.n = int32(len(d.ed.kids)), int32(len(items))
			d.ed.kids = append(d.ed.kids, items...)
		}
		return v
	}
	for range 3000 {
		v := gen(0)
		for _, k := range keys {
			var got, want frEntry
			d.setMini(&got, fieldOf(k), &v)
			want.set(k, d.toAny(&v))
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s = %#v: setMini %+v, set %+v", k, d.toAny(&v), got, want)
			}
		}
	}
	for i, k := range keys {
		if f := fieldOf(k); f != int8(i+1) {
			t.Errorf("fieldOf(%q) = %d", k, f)
		}
	}
	if fieldOf("op_id") != -1 || strconv.Itoa(len(keys)) != "13" {
		t.Error("fieldOf of a key not read")
	}
}

// TestEntryDecoderReuse: a decoder's memory handed back (release) and
// used for the next dump leaves nothing of the last dump's entries in the
// next's: dumps of many keys and of few, decoded in turns through the
// pool, are read as the generic path reads them.
func TestEntryDecoderReuse(t *testing.T) {
	rich, err := os.ReadFile("testdata/fr/proto4/_dump_0")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, _, err := frdump.Write(dir, frdump.Config{Sim: sim.Config{Schedule: "1f1b", Stages: 4, TP: 2, MicroBatches: 8, Steps: 2}, Layers: 2}); err != nil {
		t.Fatal(err)
	}
	big, err := os.ReadFile(filepath.Join(dir, "_dump_3")) // more entries than a slab chunk
	if err != nil {
		t.Fatal(err)
	}
	sparse := []byte(frDump("}(" + u("time_created_ns") + "K\x05u}(" + u("state") + u("x") + "u"))
	many := []byte(frDump(strings.Repeat("}("+u("time_created_ns")+"K\x05u", 300))) // past the first chunks
	for _, data := range [][]byte{big, sparse, rich, big, many, sparse, sparse, big, rich, many, sparse} {
		v, ed, err := decodeFR(data)
		if err != nil || ed == nil {
			t.Fatalf("decodeFR: %v (decoder %v)", err, ed != nil)
		}
		want, err := slowPickle(data)
		if err != nil {
			t.Fatal(err)
		}
		ge, we := asList(asMap(v)["entries"]), asList(asMap(want)["entries"])
		if len(ge) != len(we) {
			t.Fatalf("%d entries, the generic path %d", len(ge), len(we))
		}
		for i := range ge {
			if w := entryOf(asMap(we[i])); !reflect.DeepEqual(*ge[i].(*frEntry), w) {
				t.Fatalf("entry %d: %+v, the generic path %+v", i, *ge[i].(*frEntry), w)
			}
		}
		// The rest of the dump too: the stack and memo are the last
		// dump's (entryDec.keep).
		gr, wr := maps.Clone(asMap(v)), maps.Clone(asMap(want))
		delete(gr, "entries")
		delete(wr, "entries")
		if !reflect.DeepEqual(gr, wr) {
			t.Fatalf("the dump's other keys: %v, the generic path %v", gr, wr)
		}
		ed.release()
	}
}

// TestArena: runs cut from an arena are disjoint and as long as asked;
// after reset the same memory is handed out again, zero when zero is set;
// uncut gives back the last run; a run past a chunk gets memory of its
// own.
func TestArena(t *testing.T) {
	for _, zero := range []bool{false, true} {
		a := arena[int64]{size: 8, zero: zero}
		var runs [][]int64
		for _, n := range []int{3, 5, 2, 8, 1} {
			r := a.cut(n)
			if len(r) != n || cap(r) != n {
				t.Fatalf("cut(%d): len %d cap %d", n, len(r), cap(r))
			}
			for i := range r {
				if r[i] != 0 {
					t.Fatalf("fresh memory not zero")
				}
				r[i] = int64(len(runs) + 1)
			}
			runs = append(runs, r)
		}
		for k, r := range runs {
			for _, v := range r {
				if v != int64(k+1) {
					t.Fatalf("run %d overwritten: %v", k, r)
				}
			}
		}
		if len(a.chunks) != 4 {
			t.Errorf("%d chunks for runs of 3+5, 2, 8, 1", len(a.chunks))
		}
		a.uncut(1)
		if r := a.cut(1); &r[0] != &runs[4][0] {
			t.Error("uncut did not give back the last run")
		}
		if r := a.cut(9); len(r) != 9 || len(a.chunks) != 4 {
			t.Error("a run past a chunk")
		}
		a.reset()
		again := a.cut(3)
		if &again[0] != &runs[0][0] {
			t.Error("reset did not hand the first chunk out again")
		}
		if zero != (again[0] == 0) {
			t.Errorf("zero %v: reused memory holds %d", zero, again[0])
		}
		a.cut(5)
		if r := a.cut(2); &r[0] != &runs[2][0] || zero != (r[0] == 0) {
			t.Errorf("zero %v: the second chunk reused %v", zero, &r[0] == &runs[2][0])
		}
	}
}

// TestReadFRRecycledBuffer: Flight Recorder dumps read from their files
// one after another (each into the buffer the last one handed back, and
// decoded with the last one's stacks) read as each dump does alone from
// a copy of its own: nothing read keeps a reference into the buffer.
func TestReadFRRecycledBuffer(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := frdump.Write(dir, frdump.Config{Sim: sim.Config{Schedule: "1f1b", Stages: 4, TP: 2, MicroBatches: 8, Steps: 2}, Layers: 2}); err != nil {
		t.Fatal(err)
	}
	paths := []string{"testdata/fr/proto4/_dump_0", filepath.Join(dir, "_dump_3"), filepath.Join(dir, "_dump_0"), "testdata/fr/proto2/_dump_0", filepath.Join(dir, "_dump_5")}
	var got []*part
	for _, p := range paths {
		pt, err := readPath(p, readOpts{}, nil)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if pt.info.Format != FormatFRPickle || pt.t.Len() == 0 {
			t.Fatalf("%s: read as %s, %d rows", p, pt.info.Format, pt.t.Len())
		}
		got = append(got, pt)
	}
	for i, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		want, err := readData(p, data, readOpts{})
		if err != nil {
			t.Fatal(err)
		}
		clear(data) // nothing of want may depend on it either
		if !reflect.DeepEqual(got[i], want) {
			t.Errorf("%s: read after other dumps differs from a read of its own", p)
		}
	}
}

// TestReadFRMappedTruncated: a dump large enough to be mapped
// (arrowv1.MapFile), cut short after it was mapped, is the file's error,
// not a crash: the decoder touches pages the file no longer has.
func TestReadFRMappedTruncated(t *testing.T) {
	big := strings.Repeat("x", 6<<20)
	var body strings.Builder
	for i := 0; i < 4; i++ {
		body.WriteString("}(" + u("time_created_ns") + "K\x05" + u("profiling_name") + "X" + le32(len(big)) + big + "u")
	}
	data := []byte(frDump(body.String()))
	path := filepath.Join(t.TempDir(), "_dump_0")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if Sniff(data[:sniffLen]) != FormatFRPickle {
		t.Fatalf("the dump is sniffed as %s", Sniff(data[:sniffLen]))
	}
	// Read whole, it is a dump of 4 entries.
	if p, err := readPath(path, readOpts{}, nil); err != nil || p.info.Format != FormatFRPickle {
		t.Fatalf("whole: %v", err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mapped, release, err := arrowv1.MapFile(f)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	_, err = readMappedData(path, mapped, readOpts{})
	var fe *FileError
	if !errors.As(err, &fe) || fe.Path != path || !strings.Contains(err.Error(), "changed while it was read") {
		t.Fatalf("cut under the mapping: %v, want the file's error", err)
	}
}

// le32 is n as 4 little-endian bytes.
func le32(n int) string {
	return string([]byte{byte(n), byte(n >> 8), byte(n >> 16), byte(n >> 24)})
}
